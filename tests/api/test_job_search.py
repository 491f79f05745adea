"""Searching the jobs list (by id, request id, keys, `q` and payload fields) and acting on many jobs at once."""

import uuid
from typing import Any

from app.workers.jobs.worker import JobWorker
from tests.support import Api, until_status

SEARCH = "/api/v1/jobs"
BULK = "/api/v1/jobs/bulk"


async def ids_found(api: Api, headers: dict[str, str], **params: Any) -> list[str]:
    answer = await api.client.get(SEARCH, params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    return [job["id"] for job in answer.json()["items"]]


async def keyed_job(api: Api, headers: dict[str, str], tag: str) -> dict[str, Any]:
    """A job with every key the search reads, each ending in `tag`."""
    answer = await api.submit(
        {**headers, "X-Request-ID": f"req-{tag}"},
        idempotency_key=f"idem-{tag}",
        unique={"key": f"uniq-{tag}"},
        concurrency={"key": f"conc-{tag}", "limit": 5},
    )
    assert answer.status_code == 201, answer.text
    job: dict[str, Any] = answer.json()
    return job


async def test_each_key_and_q_find_exactly_their_job(api: Api) -> None:
    headers = await api.new_client("search-keys")
    tag = uuid.uuid4().hex[:8]
    job, other = await keyed_job(api, headers, tag), await keyed_job(api, headers, tag + "x")
    values = {
        "id": job["id"],
        "request_id": f"req-{tag}",
        "idempotency_key": f"idem-{tag}",
        "unique_key": f"uniq-{tag}",
        "concurrency_key": f"conc-{tag}",
    }
    for name, value in values.items():
        assert await ids_found(api, headers, **{name: value}) == [job["id"]], name
        assert await ids_found(api, headers, q=value) == [job["id"]], name
    assert await ids_found(api, headers, q=f"conc-{tag}x") == [other["id"]]
    assert await ids_found(api, headers, q=f"req-{tag}", status="queued", job_type="echo") == [job["id"]]
    assert await ids_found(api, headers, q=f"req-{tag}", status="succeeded") == []
    assert await ids_found(api, headers, q=f"idem-{tag}", request_id=f"req-{tag}x") == []
    assert await ids_found(api, headers, q="nothing-" + tag) == []
    assert await ids_found(api, headers, q="", request_id="") == [other["id"], job["id"]]  # empty: no filter


async def test_a_payload_field_matches_that_number_or_that_string(api: Api) -> None:
    headers = await api.new_client("search-payload")
    payloads = [
        {"order_id": 123, "shop": "north"},
        {"order_id": "123", "shop": "south"},
        {"order_id": 1234},
        {"order_id": {"n": 123}},
        {"customer": {"id": "c-9", "tier": 2}},
        [123],
        "order_id",
    ]
    made = [(await api.submit(headers, payload=payload)).json()["id"] for payload in payloads]
    assert await ids_found(api, headers, **{"payload.order_id": "123"}) == [made[1], made[0]]
    assert await ids_found(api, headers, **{"payload.order_id": "123", "payload.shop": "north"}) == [made[0]]
    assert await ids_found(api, headers, **{"payload.order_id": "12"}) == []
    assert await ids_found(api, headers, **{"payload.customer.id": "c-9"}) == [made[4]]
    assert await ids_found(api, headers, **{"payload.customer.tier": "2"}) == [made[4]]
    assert await ids_found(api, headers, **{"payload.order_id": "123", "id": made[0]}) == [made[0]]
    assert await ids_found(api, headers, **{"payload.order_id": ""}) == made[::-1]  # empty: no filter


async def test_a_search_finds_only_the_callers_jobs_and_an_admin_finds_all(api: Api) -> None:
    owner, other = await api.new_client("search-owner"), await api.new_client("search-other")
    tag = uuid.uuid4().hex[:8]
    job = await keyed_job(api, owner, tag)
    await api.submit(owner, payload={"secret_order": tag})
    for params in ({"id": job["id"]}, {"q": f"req-{tag}"}, {"idempotency_key": f"idem-{tag}"}):
        assert await ids_found(api, other, **params) == []
        assert await ids_found(api, api.admin, **params) == [job["id"]]
    assert await ids_found(api, other, **{"payload.secret_order": tag}) == []
    assert len(await ids_found(api, api.admin, **{"payload.secret_order": tag})) == 1


async def test_bad_filters_are_422s_that_say_how_to_write_them(api: Api) -> None:
    headers = await api.new_client("search-bad")
    for params in (
        {"payload.1st": "1"},
        {"payload.a-b": "1"},
        {"payload": "1"},
        {"payload.": "1"},
        {"payload.a..b": "1"},
        {"payload.a.b.c.d.e": "1"},
        {"payload.a": "1", "payload.b": "1", "payload.c": "1", "payload.d": "1"},
        {"payload.a": "x" * 256},
    ):
        answer = await api.client.get(SEARCH, params=params, headers=headers)
        assert answer.status_code == 422, params
        assert answer.json()["code"] == "bad_payload_filter", params
    twice = await api.client.get(f"{SEARCH}?payload.a=1&payload.a=2", headers=headers)
    assert (twice.status_code, twice.json()["code"]) == (422, "bad_payload_filter")
    said = (await api.client.get(f"{SEARCH}?payload.1=1", headers=headers)).json()["detail"]
    assert "payload.<field>=<value>" in said
    for name in ("id", "request_id", "q", "concurrency_key"):
        answer = await api.client.get(SEARCH, params={name: "x" * 256}, headers=headers)
        assert (answer.status_code, answer.json()["code"]) == (422, "validation_error"), name


async def test_pages_of_a_search_follow_the_cursor_with_its_filters(api: Api) -> None:
    headers = await api.new_client("search-pages")
    tag = uuid.uuid4().hex[:8]
    body = {"concurrency": {"key": f"pages-{tag}", "limit": 1}}
    found = [(await api.submit(headers, payload={"run": tag}, **body)).json()["id"] for _ in range(5)]
    await api.submit(headers, payload={"run": "other"}, **body)
    for params in ({"payload.run": tag}, {"payload.run": tag, "concurrency_key": f"pages-{tag}"}):
        seen, cursor = [], None
        for _ in range(3):
            answer = await api.client.get(SEARCH, params={**params, "limit": 2, "cursor": cursor}, headers=headers)
            page = answer.json()
            seen += [job["id"] for job in page["items"]]
            cursor = page["next_cursor"]
        assert seen == found[::-1] and cursor is None, params


async def test_bulk_cancel_answers_for_each_job_and_keeps_to_the_callers(api: Api) -> None:
    owner, other = await api.new_client("bulk-owner"), await api.new_client("bulk-other")
    mine = [(await api.submit(owner)).json()["id"] for _ in range(3)]
    theirs = (await api.submit(other)).json()["id"]
    missing = str(uuid.uuid4())
    body = {"action": "cancel", "job_ids": [*mine, mine[0], theirs, missing]}
    answer = await api.client.post(BULK, json=body, headers=owner)
    assert answer.status_code == 200, answer.text
    assert answer.json()["items"] == [
        *({"job_id": job_id, "outcome": "cancelled", "status": "cancelled"} for job_id in mine),
        {"job_id": theirs, "outcome": "not_found", "status": None},
        {"job_id": missing, "outcome": "not_found", "status": None},
    ]
    assert {(await api.job(owner, job_id))["status"] for job_id in mine} == {"cancelled"}
    assert (await api.job(other, theirs))["status"] == "queued"
    again = await api.client.post(BULK, json={"action": "cancel", "job_ids": mine[:1]}, headers=owner)
    assert again.json()["items"] == [{"job_id": mine[0], "outcome": "conflict", "status": "cancelled"}]
    retry = await api.client.post(BULK, json={"action": "retry", "job_ids": [mine[1], theirs]}, headers=owner)
    assert retry.json()["items"] == [
        {"job_id": mine[1], "outcome": "conflict", "status": "cancelled"},
        {"job_id": theirs, "outcome": "not_found", "status": None},
    ]
    admin = await api.client.post(BULK, json={"action": "cancel", "job_ids": [theirs]}, headers=api.admin)
    assert admin.json()["items"] == [{"job_id": theirs, "outcome": "cancelled", "status": "cancelled"}]


async def test_bulk_retry_replays_dead_jobs_and_cancel_stops_a_running_one(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("bulk-retry")
    dead = [
        (await api.submit(headers, job_type="flaky", payload={"fail_times": 1, "permanent": True})).json()["id"]
        for _ in range(2)
    ]
    done = (await api.submit(headers)).json()["id"]
    for job_id in [*dead, done]:
        await until_status(api, headers, job_id)
    answer = await api.client.post(BULK, json={"action": "retry", "job_ids": [*dead, done]}, headers=headers)
    assert answer.json()["items"] == [
        *({"job_id": job_id, "outcome": "replayed", "status": "queued"} for job_id in dead),
        {"job_id": done, "outcome": "conflict", "status": "succeeded"},
    ]
    for job_id in dead:  # the second run outlives fail_times
        assert (await until_status(api, headers, job_id))["status"] == "succeeded"
    slow = (await api.submit(headers, job_type="sleep", payload={"seconds": 30})).json()["id"]
    await until_status(api, headers, slow, 20, "running")
    stop = await api.client.post(BULK, json={"action": "cancel", "job_ids": [slow]}, headers=headers)
    assert stop.json()["items"] == [{"job_id": slow, "outcome": "cancel_requested", "status": "running"}]
    assert (await until_status(api, headers, slow, 10))["status"] == "cancelled"


async def test_a_bulk_body_out_of_bounds_is_a_422(api: Api) -> None:
    headers = await api.new_client("bulk-bounds")
    for body in (
        {"action": "cancel", "job_ids": []},
        {"action": "cancel", "job_ids": [str(uuid.uuid4()) for _ in range(501)]},
        {"action": "delete", "job_ids": [str(uuid.uuid4())]},
        {"job_ids": [str(uuid.uuid4())]},
        {"action": "cancel", "job_ids": "all"},
    ):
        answer = await api.client.post(BULK, json=body, headers=headers)
        assert (answer.status_code, answer.json()["code"]) == (422, "validation_error"), body
    nul = await api.client.post(BULK, json={"action": "retry", "job_ids": ["a\x00b"]}, headers=headers)
    assert nul.json()["items"] == [{"job_id": "a\x00b", "outcome": "not_found", "status": None}]
