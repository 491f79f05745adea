"""Throttled redrives (issue 48, item 3): validated, a client's own, paced at R a second, each item sent once,
paused and resumed, and the same for failed deliveries."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import DELIVERIES, JOB_EVENTS, JOBS
from tests.support import Api, make_delivery, make_job, wait_for

BASE = "/api/v1/dlq/redrives"
Headers = dict[str, str]


async def dead_jobs(db: AsyncEngine, client_id: str, n: int, job_type: str = "echo", **extra: Any) -> list[str]:
    """`n` dead-lettered jobs of `client_id`, died a millisecond apart (oldest first)."""
    died = datetime.now(UTC) - timedelta(minutes=5)
    rows = [
        make_job(
            client_id=client_id,
            job_type=job_type,
            status="dead_lettered",
            dead_reason="permanent_error",
            finished_at=died + timedelta(milliseconds=i),
            **extra,
        )
        for i in range(n)
    ]
    async with db.begin() as conn:
        await conn.execute(insert(JOBS), rows)
    return [row["id"] for row in rows]


async def start(api: Api, headers: Headers, **body: Any) -> dict[str, Any]:
    answer = await api.client.post(BASE, json=body, headers=headers)
    assert answer.status_code == 201, answer.text
    redrive: dict[str, Any] = answer.json()
    return redrive


async def read(api: Api, headers: Headers, redrive_id: str) -> dict[str, Any]:
    answer = await api.client.get(f"{BASE}/{redrive_id}", headers=headers)
    assert answer.status_code == 200, answer.text
    redrive: dict[str, Any] = answer.json()
    return redrive


async def until(api: Api, headers: Headers, redrive_id: str, status: str, within: float = 30) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        redrive = await read(api, headers, redrive_id)
        return redrive if redrive["status"] == status else None

    return await wait_for(reached, within=within)


async def replays_by(db: AsyncEngine, redrive_id: str) -> dict[str, int]:
    """How many `replayed` audit rows carry this redrive's id, by job."""
    query = select(JOB_EVENTS.c.job_id, JOB_EVENTS.c.detail).where(JOB_EVENTS.c.event == "replayed")
    async with db.connect() as conn:
        rows = (await conn.execute(query)).all()
    counts: dict[str, int] = {}
    for job_id, detail in rows:
        if (detail or {}).get("redrive") == redrive_id:
            counts[job_id] = counts.get(job_id, 0) + 1
    return counts


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"kind": "jobs", "limit": 5, "per_second": 1}, "empty selection"),
        ({"kind": "deliveries", "limit": 5, "per_second": 1}, "empty selection"),
        ({"kind": "deliveries", "job_type": "echo", "limit": 5, "per_second": 1}, "cannot select deliveries"),
        ({"kind": "jobs", "webhook_id": "w", "limit": 5, "per_second": 1}, "cannot select jobs"),
        ({"kind": "jobs", "job_type": "echo", "limit": 0, "per_second": 1}, "limit"),
        ({"kind": "jobs", "job_type": "echo", "limit": 100_001, "per_second": 1}, "limit"),
        ({"kind": "jobs", "job_type": "echo", "limit": 5, "per_second": 0}, "per_second"),
        ({"kind": "jobs", "job_type": "echo", "limit": 5, "per_second": 1001}, "per_second"),
        ({"kind": "messages", "job_type": "echo", "limit": 5, "per_second": 1}, "kind"),
    ],
)
async def test_a_redrive_that_cannot_be_done_is_a_422_that_says_why(api: Api, body: dict[str, Any], words: str) -> None:
    headers = await api.new_client("redrive-invalid")
    answer = await api.client.post(BASE, json=body, headers=headers)
    assert answer.status_code == 422, answer.text
    assert words in answer.text


async def test_ten_jobs_at_five_a_second_are_each_replayed_once_over_at_least_1_8_seconds(
    api: Api, db: AsyncEngine
) -> None:
    client = "redrive-pace-" + uuid.uuid4().hex[:6]
    headers = await api.new_client(client)
    ids = await dead_jobs(db, client, 10)
    await dead_jobs(db, client, 3, job_type="flaky")  # another type: not selected
    redrive = await start(api, headers, kind="jobs", job_type="echo", limit=100, per_second=5)
    assert (redrive["status"], redrive["total"], redrive["selection"]) == ("running", 10, {"job_type": "echo"})
    done = await until(api, headers, redrive["id"], "finished")
    assert (done["replayed"], done["skipped"]) == (10, 0)
    took = datetime.fromisoformat(done["finished_at"]) - datetime.fromisoformat(done["created_at"])
    assert took >= timedelta(seconds=1.75)  # the first at once, the tenth 9 gaps of 0.2 s later
    assert await replays_by(db, redrive["id"]) == dict.fromkeys(ids, 1)
    assert [h["event"] for h in done["history"]] == ["created", "finished"]
    assert done["history"][0]["by"] == client and done["history"][1]["by"] is None
    async with db.connect() as conn:
        dead = select(func.count()).where(JOBS.c.client_id == client, JOBS.c.status == "dead_lettered")
        assert (await conn.execute(dead)).scalar() == 3


async def test_a_limit_takes_the_oldest_and_a_job_replayed_meanwhile_is_skipped(api: Api, db: AsyncEngine) -> None:
    client = "redrive-skip-" + uuid.uuid4().hex[:6]
    headers = await api.new_client(client)
    ids = await dead_jobs(db, client, 6)
    redrive = await start(api, headers, kind="jobs", job_ids=ids, limit=5, per_second=2)
    assert redrive["total"] == 5  # the five that died first
    retried = await api.client.post(f"/api/v1/jobs/{ids[4]}/retry", headers=headers)
    assert retried.status_code == 200, retried.text
    done = await until(api, headers, redrive["id"], "finished")
    assert (done["replayed"], done["skipped"]) == (4, 1)
    assert await replays_by(db, redrive["id"]) == dict.fromkeys(ids[:4], 1)


async def test_a_paused_redrive_stops_and_resumes_where_it_stopped(api: Api, db: AsyncEngine) -> None:
    client = "redrive-pause-" + uuid.uuid4().hex[:6]
    headers = await api.new_client(client)
    ids = await dead_jobs(db, client, 12)
    redrive = await start(api, headers, kind="jobs", job_type="echo", limit=12, per_second=4)

    async def begun() -> bool:
        return (await read(api, headers, redrive["id"]))["replayed"] >= 2

    await wait_for(begun, within=10)
    paused = await api.client.post(f"{BASE}/{redrive['id']}/pause", headers=headers)
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    await asyncio.sleep(0.5)  # a turn already under way when the pause came may still commit; none after it
    held = (await read(api, headers, redrive["id"]))["replayed"]
    await asyncio.sleep(1.5)  # six items' worth at its pace
    assert (await read(api, headers, redrive["id"]))["replayed"] == held < 12
    again = await api.client.post(f"{BASE}/{redrive['id']}/pause", headers=headers)
    assert (again.status_code, again.json()["code"]) == (409, "not_allowed")
    resumed = await api.client.post(f"{BASE}/{redrive['id']}/resume", headers=headers)
    assert resumed.status_code == 200 and resumed.json()["status"] == "running"
    done = await until(api, headers, redrive["id"], "finished")
    assert (done["replayed"], done["skipped"]) == (12, 0)
    assert await replays_by(db, redrive["id"]) == dict.fromkeys(ids, 1)
    assert [h["event"] for h in done["history"]] == ["created", "paused", "resumed", "finished"]
    for action in ("pause", "resume", "cancel"):
        late = await api.client.post(f"{BASE}/{redrive['id']}/{action}", headers=headers)
        assert late.status_code == 409, (action, late.text)
        assert "finished redrive cannot be" in late.json()["detail"]


async def test_a_redrives_pace_is_changed_while_it_runs_and_not_once_it_has_ended(api: Api, db: AsyncEngine) -> None:
    client = "redrive-pace-" + uuid.uuid4().hex[:6]
    headers, others = await api.new_client(client), await api.new_client("redrive-pace-other-" + uuid.uuid4().hex[:6])
    ids = await dead_jobs(db, client, 60)
    redrive = await start(api, headers, kind="jobs", job_type="echo", limit=60, per_second=0.5)  # two minutes
    path = f"{BASE}/{redrive['id']}"
    for body in ({"per_second": 0}, {"per_second": 1001}, {}):
        refused = await api.client.patch(path, json=body, headers=headers)
        assert (refused.status_code, refused.json()["code"]) == (422, "validation_error"), body
    theirs = await api.client.patch(path, json={"per_second": 100}, headers=others)
    assert (theirs.status_code, theirs.json()["code"]) == (404, "not_found")

    faster = await api.client.patch(path, json={"per_second": 100}, headers=headers)
    assert faster.status_code == 200 and faster.json()["per_second"] == 100
    done = await until(api, headers, redrive["id"], "finished", within=20)  # at 0.5 a second: two minutes
    assert (done["replayed"], done["skipped"]) == (60, 0)
    assert await replays_by(db, redrive["id"]) == dict.fromkeys(ids, 1)
    changes = [(h["event"], h["by"]) for h in done["history"]]
    assert changes == [("created", client), ("rate_changed", client), ("finished", None)]
    late = await api.client.patch(path, json={"per_second": 1}, headers=headers)
    assert (late.status_code, late.json()["redrive_status"]) == (409, "finished")
    assert "finished redrive cannot be given a new pace" in late.json()["detail"]


async def test_a_cancelled_redrive_sends_nothing_more(api: Api, db: AsyncEngine) -> None:
    client = "redrive-cancel-" + uuid.uuid4().hex[:6]
    headers = await api.new_client(client)
    await dead_jobs(db, client, 20)
    redrive = await start(api, headers, kind="jobs", job_type="echo", limit=20, per_second=2)
    cancelled = await api.client.post(f"{BASE}/{redrive['id']}/cancel", headers=headers)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    sent = cancelled.json()["replayed"]
    await asyncio.sleep(1.5)
    after = await read(api, headers, redrive["id"])
    assert after["replayed"] == sent <= 1 and after["finished_at"] is not None
    resumed = await api.client.post(f"{BASE}/{redrive['id']}/resume", headers=headers)
    assert resumed.status_code == 409


async def test_a_client_sees_and_takes_only_its_own_and_an_admins_redrive_takes_every_clients(
    api: Api, db: AsyncEngine
) -> None:
    mine, theirs = "redrive-mine-" + uuid.uuid4().hex[:6], "redrive-theirs-" + uuid.uuid4().hex[:6]
    me, them = await api.new_client(mine), await api.new_client(theirs)
    job_type = "flaky"
    group = uuid.uuid4().hex[:16]
    my_jobs = await dead_jobs(db, mine, 2, job_type=job_type, failure_group=group)
    their_jobs = await dead_jobs(db, theirs, 3, job_type=job_type, failure_group=group)
    own = await start(api, me, kind="jobs", group=group, limit=100, per_second=50)
    assert own["total"] == 2 and own["client_id"] == mine
    for path in (f"{BASE}/{own['id']}", f"{BASE}/{own['id']}/pause"):
        answer = await (api.client.get if path.endswith(own["id"]) else api.client.post)(path, headers=them)
        assert (answer.status_code, answer.json()["code"]) == (404, "not_found")
    listed = (await api.client.get(BASE, headers=them)).json()
    assert own["id"] not in [r["id"] for r in listed["items"]]
    await until(api, me, own["id"], "finished")
    everyone = await start(api, api.admin, kind="jobs", group=group, limit=100, per_second=50)
    assert everyone["total"] == 3 and everyone["client_id"] is None  # the other client's three, still dead
    await until(api, api.admin, everyone["id"], "finished")
    assert await replays_by(db, own["id"]) == dict.fromkeys(my_jobs, 1)
    assert await replays_by(db, everyone["id"]) == dict.fromkeys(their_jobs, 1)
    assert (await api.client.get(f"{BASE}/{everyone['id']}", headers=me)).status_code == 404
    admin_list = (await api.client.get(f"{BASE}?status=finished&limit=200", headers=api.admin)).json()
    assert {own["id"], everyone["id"]} <= {r["id"] for r in admin_list["items"]}


async def test_the_list_pages_newest_first_and_filters_by_status(api: Api) -> None:
    headers = await api.new_client("redrive-list-" + uuid.uuid4().hex[:6])
    body = {"kind": "deliveries", "event_type": "job.none", "limit": 1, "per_second": 1}
    made = [(await start(api, headers, **body))["id"] for _ in range(3)]
    first = (await api.client.get(f"{BASE}?limit=2", headers=headers)).json()
    second = (await api.client.get(f"{BASE}?limit=2&cursor={first['next_cursor']}", headers=headers)).json()
    assert [r["id"] for r in first["items"] + second["items"]] == made[::-1] and second["next_cursor"] is None
    assert (await api.client.get(f"{BASE}?status=running", headers=headers)).json()["items"] == []
    assert (await api.client.get(f"{BASE}?status=lost", headers=headers)).status_code == 422


async def test_failed_deliveries_are_sent_again_once_each_with_a_fresh_budget(api: Api, db: AsyncEngine) -> None:
    client = "redrive-hooks-" + uuid.uuid4().hex[:6]
    headers = await api.new_client(client)
    at = datetime.now(UTC) - timedelta(minutes=5)
    rows = [make_delivery("msg_" + uuid.uuid4().hex, str(uuid.uuid4()), client, at) for _ in range(4)]
    rows[3] = {**rows[3], "event_type": "job.dead_lettered"}
    async with db.begin() as conn:
        await conn.execute(insert(DELIVERIES), rows)
    redrive = await start(api, headers, kind="deliveries", event_type="job.succeeded", limit=10, per_second=10)
    assert (redrive["total"], redrive["selection"]) == (3, {"event_type": "job.succeeded"})
    done = await until(api, headers, redrive["id"], "finished")
    assert (done["replayed"], done["skipped"]) == (3, 0)
    async with db.connect() as conn:
        found = (await conn.execute(select(DELIVERIES).where(DELIVERIES.c.client_id == client))).all()
    states = {row.id: (row.status, row.budget_used) for row in found}
    # Pending and due with a fresh budget, as a redelivery leaves them (no webhook worker runs here to send them).
    assert states == {**{row["id"]: ("pending", 0) for row in rows[:3]}, rows[3]["id"]: ("failed", 2)}
