"""The DLQ's failure groups (GET /api/v1/dlq/groups, /groups/{id}, /dlq?group=), replaying a group, and editing a
dead job's payload as it is replayed (POST /api/v1/dlq/{job_id}/replay)."""

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook
from starlette.responses import Response

from app.core.failure_groups import group_of
from app.core.masking import MASK
from app.core.messages import loads
from app.core.secret_box import SecretBox
from app.models.tables import JOBS
from app.services.dlq_groups import DlqGroups, page_query
from app.services.tenancy import Principal
from app.workers.jobs.worker import JobWorker
from tests.api.test_tenancy_matrix import MISSING
from tests.conftest import TEST_SETTINGS
from tests.receiver import Receiver
from tests.services.test_payload_secrets import CREDENTIALS, SECRET, assert_clear_of_secrets, notification
from tests.support import Api, make_job, trail, until_status

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


async def dead(api: Api, headers: dict[str, str], payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`flaky` jobs that die on their first run, one per payload."""
    jobs = [(await api.submit(headers, job_type="flaky", payload=p, max_retries=0)).json() for p in payloads]
    return [await until_status(api, headers, job["id"], 30) for job in jobs]


async def groups(api: Api, headers: dict[str, str], query: str = "") -> list[dict[str, Any]]:
    answer = await api.client.get(f"/api/v1/dlq/groups{query}", headers=headers)
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


async def test_failures_that_differ_only_in_numbers_are_one_group_seen_by_their_client_alone(
    api: Api, worker: JobWorker
) -> None:
    owner, other = await api.new_client("groups-owner"), await api.new_client("groups-other")
    permanent = await dead(api, owner, [{"fail_times": n, "permanent": True} for n in (1, 2, 3)])
    transient = await dead(api, owner, [{"fail_times": n} for n in (4, 5)])
    assert {j["error"]["message"] for j in permanent} == {f"flaky failure on run 1 of {n}" for n in (1, 2, 3)}

    big, small = await groups(api, owner)
    assert (big["job_type"], big["error_class"], big["count"]) == ("flaky", "PermanentError", 3)
    assert big["message"] == "flaky failure on run <n> of <n>"
    assert big["id"] == group_of("flaky", permanent[0]["error"])
    assert big["example"]["job_id"] in {j["id"] for j in permanent}
    assert big["example"]["reason"] == "permanent_error" and big["example"]["attempts"] == 1
    assert big["example"]["error"]["type"] == "PermanentError"
    times = sorted(j["finished_at"] for j in permanent)
    assert _at(big["first_seen"]) == _at(times[0]) and _at(big["last_seen"]) == _at(times[-1])
    assert (small["error_class"], small["count"], small["example"]["reason"]) == (
        "TransientError",
        2,
        "retries_exhausted",
    )

    assert small["example"]["job_id"] in {j["id"] for j in transient}
    one = await api.client.get(f"/api/v1/dlq/groups/{big['id']}", headers=owner)
    assert one.status_code == 200 and one.json() == big
    listed = (await api.client.get(f"/api/v1/dlq?group={big['id']}", headers=owner)).json()["items"]
    assert sorted(j["id"] for j in listed) == sorted(j["id"] for j in permanent)
    assert (await api.client.get("/api/v1/dlq?group=not-a-group", headers=owner)).status_code == 422

    # Another client has none of them; an admin sees the owner's among every client's.
    assert await groups(api, other) == []
    theirs = await api.client.get(f"/api/v1/dlq/groups/{big['id']}", headers=other)
    assert (theirs.status_code, theirs.json()["code"]) == (404, "not_found")
    assert (await api.client.get(f"/api/v1/dlq?group={big['id']}", headers=other)).json()["items"] == []
    everyone = {g["id"]: g for g in await groups(api, api.admin, "?job_type=flaky&limit=200")}
    assert everyone[big["id"]]["count"] >= 3 and everyone[small["id"]]["count"] >= 2
    assert await groups(api, owner, "?job_type=echo") == []


async def test_groups_page_biggest_first_then_latest_and_every_group_once(api: Api, db: AsyncEngine) -> None:
    client = "groups-" + uuid.uuid4().hex[:8]
    headers = await api.new_client(client)
    # (message, count, minutes after T0 of the last death): two groups of 3 tie, the later one first.
    shapes = [("a 1", 1, 50), ("b 1", 3, 10), ("c 1", 5, 5), ("d 1", 3, 40), ("e 1", 2, 60)]
    rows = [
        _dead_row(client, "echo", f"{message} {i}", T0 + timedelta(minutes=last - i))
        for message, count, last in shapes
        for i in range(count)
    ]
    rows.append(_dead_row(client, "sleep", "before groups", T0, group=None))  # dead before migration 0015
    async with db.begin() as conn:
        await conn.execute(insert(JOBS), rows)

    whole = await groups(api, headers)
    assert [(g["message"].split()[0], g["count"]) for g in whole] == [
        ("c", 5),
        ("d", 3),
        ("b", 3),
        ("e", 2),
        ("a", 1),
        ("before", 1),
    ]
    assert whole[0]["message"] == "c <n> <n>" and whole[5]["id"] is None and whole[5]["job_type"] == "sleep"
    assert _at(whole[0]["first_seen"]) == T0 + timedelta(minutes=1) and _at(whole[0]["last_seen"]) == T0 + timedelta(
        minutes=5
    )

    paged, cursor = [], ""
    for _ in range(5):
        answer = await api.client.get(f"/api/v1/dlq/groups?limit=2{cursor}", headers=headers)
        assert answer.status_code == 200, answer.text
        paged += answer.json()["items"]
        if answer.json()["next_cursor"] is None:
            break
        cursor = f"&cursor={answer.json()['next_cursor']}"
    assert paged == whole
    assert [g["message"] for g in await groups(api, headers, "?job_type=sleep")] == ["before groups"]

    bad = await api.client.get("/api/v1/dlq/groups?cursor=abc", headers=headers)
    assert (bad.status_code, bad.json()["code"]) == (422, "bad_cursor")
    jobs_cursor = (await api.client.get("/api/v1/jobs?limit=1", headers=api.admin)).json()["next_cursor"]
    assert (await api.client.get(f"/api/v1/dlq/groups?cursor={jobs_cursor}", headers=headers)).status_code == 422
    for missing in (MISSING["job"], "0123456789abcdef", "nothex"):
        assert (await api.client.get(f"/api/v1/dlq/groups/{missing}", headers=headers)).status_code == 404


async def test_the_groups_query_runs_on_sqlite_too(engine: AsyncEngine) -> None:
    client = "groups-" + uuid.uuid4().hex[:8]
    rows = [_dead_row(client, "echo", f"boom {i}", T0 + timedelta(seconds=i)) for i in range(3)]
    rows.append(_dead_row(client, "echo", "other", T0))
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), rows)
    found, after = await DlqGroups(engine).page(Principal(None, client, False), None, 1, None)
    assert [(g["message"], g["count"], g["last_seen"]) for g in found] == [("boom <n>", 3, T0 + timedelta(seconds=2))]
    assert after is not None
    rest, end = await DlqGroups(engine).page(Principal(None, client, False), None, 1, after)
    assert [(g["message"], g["count"]) for g in rest] == [("other", 1)] and end is None
    assert await DlqGroups(engine).one(Principal(None, "someone-else", False), found[0]["id"]) is None


async def test_a_group_is_replayed_oldest_first_up_to_the_limit_and_its_jobs_succeed(
    api: Api, worker: JobWorker
) -> None:
    headers = await api.new_client("groups-replay")
    jobs = await dead(api, headers, [{"fail_times": 1, "permanent": True}] * 3)
    others = await dead(api, headers, [{"fail_times": 1}])
    [group] = [g for g in await groups(api, headers) if g["count"] == 3]

    first = await api.client.post("/api/v1/dlq/replay", json={"group": group["id"], "limit": 2}, headers=headers)
    assert first.status_code == 200 and first.json() == {"replayed": 2, "job_ids": [j["id"] for j in jobs[:2]]}
    rest = await api.client.post("/api/v1/dlq/replay", json={"group": group["id"]}, headers=headers)
    assert rest.json() == {"replayed": 1, "job_ids": [jobs[2]["id"]]}
    for job in jobs:
        assert (await until_status(api, headers, job["id"], 30))["status"] == "succeeded"
    assert (await api.client.get(f"/api/v1/dlq/groups/{group['id']}", headers=headers)).status_code == 404
    assert (await api.job(headers, others[0]["id"]))["status"] == "dead_lettered"  # another group: untouched
    other = await api.new_client("groups-replay-other")
    again = await api.client.post("/api/v1/dlq/replay", json={"group": group["id"]}, headers=other)
    assert again.json() == {"replayed": 0, "job_ids": []}
    bad = await api.client.post("/api/v1/dlq/replay", json={"group": "x"}, headers=headers)
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["body", "group"]


async def test_a_payload_edited_as_it_is_replayed_is_checked_and_kept_in_the_trail(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("groups-edit")
    [job] = await dead(api, headers, [{"fail_times": 5, "permanent": True}])
    path = f"/api/v1/dlq/{job['id']}/replay"

    for payload, loc, kind in (
        ({"fail_times": "none"}, ["body", "payload", "fail_times"], "int_type"),
        ({"fail_times": 500}, ["body", "payload", "fail_times"], "less_than_equal"),
        ({"nope": 1}, ["body", "payload", "nope"], "extra_forbidden"),
    ):
        refused = await api.client.post(path, json={"payload": payload}, headers=headers)
        assert refused.status_code == 422, refused.text
        assert [(e["loc"], e["type"]) for e in refused.json()["errors"]] == [(loc, kind)]
    assert (await api.job(headers, job["id"]))["status"] == "dead_lettered"  # a refused edit changed nothing
    not_object = await api.client.post(path, json={"payload": [1]}, headers=headers)
    assert not_object.status_code == 422 and not_object.json()["errors"][0]["loc"][:2] == ["body", "payload"]

    other = await api.new_client("groups-edit-other")
    theirs = await api.client.post(path, json={"payload": {"fail_times": 0}}, headers=other)
    assert (theirs.status_code, theirs.json()["code"]) == (404, "not_found")
    missing = await api.client.post(f"/api/v1/dlq/{MISSING['job']}/replay", json={}, headers=headers)
    assert missing.status_code == 404

    edited = await api.client.post(path, json={"payload": {"fail_times": 0}}, headers=headers)
    assert edited.status_code == 200, edited.text
    assert edited.json()["status"] == "queued" and edited.json()["payload"] == {"fail_times": 0, "permanent": False}
    done = await until_status(api, headers, job["id"], 30)
    assert (done["status"], done["result"], done["payload"]["fail_times"]) == ("succeeded", {"attempts": 2}, 0)
    events = await trail(api, headers, job["id"])
    [entry] = [e for e in events if e["event"] == "edited"]
    assert entry["detail"] == {
        "by": "groups-edit",
        "admin": False,
        "before": {"fail_times": 5, "permanent": True},
        "after": {"fail_times": 0, "permanent": False},
    }
    names = [e["event"] for e in events]
    assert names.index("edited") + 1 == names.index("replayed")

    again = await api.client.post(path, json={"payload": {"fail_times": 0}}, headers=headers)
    assert (again.status_code, again.json()["code"]) == (409, "not_dead_lettered")
    assert (await api.client.post(path, headers=headers)).status_code == 409  # no body: a plain replay


async def test_a_plain_replay_of_one_job_and_an_admins_edit(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("groups-plain")
    one, two = await dead(api, headers, [{"fail_times": 1, "permanent": True}] * 2)
    plain = await api.client.post(f"/api/v1/dlq/{one['id']}/replay", headers=headers)
    assert plain.status_code == 200 and plain.json()["payload"] == one["payload"]
    assert (await until_status(api, headers, one["id"], 30))["status"] == "succeeded"
    assert "edited" not in [e["event"] for e in await trail(api, headers, one["id"])]

    by_admin = await api.client.post(
        f"/api/v1/dlq/{two['id']}/replay", json={"payload": {"fail_times": 0}}, headers=api.admin
    )
    assert by_admin.status_code == 200, by_admin.text
    [entry] = [e for e in await trail(api, headers, two["id"]) if e["event"] == "edited"]
    assert entry["detail"]["admin"] is True and entry["detail"]["by"] != "groups-plain"


async def test_credentials_left_masked_in_an_edit_keep_their_sealed_values(
    api: Api, worker: JobWorker, receiver: Receiver, db: AsyncEngine
) -> None:
    headers = await api.new_client("groups-secrets")
    receiver.answer = lambda request: Response(status_code=503 if request.path == "/deny" else 200)
    request = notification(receiver.url("/deny"), max_retries=0)
    submitted = await api.client.post("/api/v1/jobs", json=request, headers=headers)
    assert submitted.status_code == 201, submitted.text
    job = await until_status(api, headers, submitted.json()["id"], 30)
    assert job["status"] == "dead_lettered"

    # The edit as a client sees the job: `***` where the credentials stood, a new URL and one header more.
    payload = {**job["payload"], "url": receiver.url("/ok"), "headers": {**job["payload"]["headers"], "X-New": "2"}}
    assert payload["secret"] == MASK
    edited = await api.client.post(f"/api/v1/dlq/{job['id']}/replay", json={"payload": payload}, headers=headers)
    assert edited.status_code == 200, edited.text
    assert edited.json()["payload"]["secret"] == MASK
    assert (await until_status(api, headers, job["id"], 30))["status"] == "succeeded"

    [call] = receiver.on("/ok")
    assert {name: call.headers[name.lower()] for name in CREDENTIALS} == CREDENTIALS
    assert call.headers["x-new"] == "2"
    Webhook(SECRET).verify(call.body, call.headers)
    async with db.connect() as conn:
        sealed = (await conn.execute(select(JOBS.c.sealed).where(JOBS.c.id == job["id"]))).scalar_one()
    box = SecretBox(TEST_SETTINGS["secret_encryption_key"])
    assert loads(box.unseal(sealed)) == {"secret": SECRET, "headers": CREDENTIALS}
    events = await trail(api, headers, job["id"])
    [entry] = [e for e in events if e["event"] == "edited"]
    assert entry["detail"]["before"]["secret"] == entry["detail"]["after"]["secret"] == MASK
    assert entry["detail"]["after"]["url"] == receiver.url("/ok")
    assert_clear_of_secrets(str(events))


def _dead_row(client: str, job_type: str, message: str, at: datetime, group: str | None = "") -> dict[str, Any]:
    error = {"type": "RuntimeError", "message": message}
    failure_group = group_of(job_type, error) if group == "" else group
    return make_job(
        at,
        client_id=client,
        job_type=job_type,
        status="dead_lettered",
        attempts=1,
        runs=1,
        seq=3,
        error=error,
        dead_reason="permanent_error",
        finished_at=at,
        failure_group=failure_group,
    )


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def test_a_clients_groups_are_an_index_only_scan_of_the_dead_jobs_index(db: AsyncEngine) -> None:
    client = "groups-plan-" + uuid.uuid4().hex[:8]
    rows = [_dead_row(client, "echo", f"boom {i % 7} after {i}", T0 + timedelta(seconds=i)) for i in range(2000)]
    others = [make_job(T0, status="succeeded", finished_at=T0) for _ in range(2000)]
    async with db.begin() as conn:
        await conn.execute(insert(JOBS), rows + others)
    async with db.connect() as conn:
        await (await conn.execution_options(isolation_level="AUTOCOMMIT")).exec_driver_sql("VACUUM ANALYZE jobs")
    statement = page_query(Principal(None, client, False), None, 51, None)
    sql = str(statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    async with db.connect() as conn:
        plan = (await conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {sql}")).scalar_one()
    scans = _nodes((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])
    reads = {(node["Node Type"], node.get("Index Name")) for node in scans if node.get("Relation Name") == "jobs"}
    assert reads == {("Index Only Scan", "ix_jobs_failure_group")}


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(found for child in node.get("Plans", []) for found in _nodes(child))]
