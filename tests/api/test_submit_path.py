"""`POST /api/v1/jobs` answered by its fast path (app/api/submit_path.py) exactly as FastAPI's route answers it.

Each answer of the fast path is compared with the one FastAPI gives the same request sent with a query parameter
the route ignores, which sends it on to FastAPI. The path counts the requests it took, so every test also checks
which of the two answered."""

from typing import Any

import httpx

from tests.support import Api

TO_FASTAPI = {"via": "fastapi"}  # a query parameter the route ignores: the fast path leaves such requests alone
PER_JOB = {"id", "created_at", "updated_at", "request_id", "idempotency_key"}
PER_ANSWER = {"x-request-id", "content-length", "x-ratelimit-remaining", "x-ratelimit-reset"}


def taken(api: Api) -> int:
    count: int = api.app.state.submit_path.taken
    return count


async def both(api: Api, edge: bool = False, **request: Any) -> tuple[httpx.Response, httpx.Response]:
    """The same request through the fast path, then through FastAPI; asserts which path took each (neither, for
    a request without a valid key: app/api/request_body.py refuses it before either)."""
    before = taken(api)
    fast = await api.client.post("/api/v1/jobs", **request)
    assert taken(api) == before + (not edge), "the fast path did not take a plain submit"
    slow = await api.client.post("/api/v1/jobs", params=TO_FASTAPI, **request)
    assert taken(api) == before + (not edge), "the fast path took a request with a query string"
    return fast, slow


def same_answer(fast: httpx.Response, slow: httpx.Response, varying: set[str]) -> None:
    assert fast.status_code == slow.status_code, (fast.text, slow.text)
    assert fast.headers.keys() == slow.headers.keys()
    for name in fast.headers.keys() - PER_ANSWER:
        assert fast.headers[name] == slow.headers[name], name
    mine, theirs = fast.json(), slow.json()
    assert mine.keys() == theirs.keys()
    assert {k: v for k, v in mine.items() if k not in varying} == {k: v for k, v in theirs.items() if k not in varying}


async def test_a_plain_submit_is_answered_by_the_fast_path_as_fastapi_answers_it(api: Api) -> None:
    headers = {**await api.new_client("fast-plain"), "X-Request-ID": "fast-path-1"}
    body = {"job_type": "echo", "payload": {"n": 1, "text": "é ✓", "x": 1.5e-7}, "priority": 3}
    fast, slow = await both(api, json=body, headers=headers)
    assert fast.status_code == 201, fast.text
    same_answer(fast, slow, PER_JOB)
    assert fast.headers["content-type"] == "application/json"
    assert fast.headers["x-request-id"] == "fast-path-1" == fast.json()["request_id"]
    assert int(fast.headers["x-ratelimit-remaining"]) == int(slow.headers["x-ratelimit-remaining"]) + 1
    saved = await api.job(headers, fast.json()["id"])
    assert (saved["payload"], saved["priority"], saved["request_id"]) == (body["payload"], 3, "fast-path-1")


async def test_the_fast_paths_errors_are_fastapis(api: Api) -> None:
    headers = await api.new_client("fast-errors")
    json_headers = {**headers, "Content-Type": "application/json"}
    refused: list[tuple[int, dict[str, Any]]] = [
        (401, {"edge": True, "json": {"job_type": "echo", "payload": {}}}),
        (
            401,
            {
                "edge": True,
                "json": {"job_type": "echo", "payload": {}},
                "headers": {"Authorization": "Bearer tq_not_a_key"},
            },
        ),
        (422, {"content": b"{not json", "headers": json_headers}),
        (422, {"content": b'{"job_type": "echo", "payload": {"x": NaN}}', "headers": json_headers}),
        (415, {"json": {"job_type": "echo", "payload": {}}, "headers": {**headers, "Content-Type": "text/plain"}}),
        (422, {"content": b"[1, 2]", "headers": json_headers}),
        (422, {"json": {"job_type": "no-such-type", "payload": {}}, "headers": headers}),
        (422, {"json": {"job_type": "echo", "payload": {}, "priority": 11}, "headers": headers}),
        (
            413,
            {
                "content": b'{"job_type": "echo", "payload": {"x": "' + b"x" * 300_000 + b'"}}',
                "headers": json_headers,
            },
        ),
    ]
    for status, request in refused:
        fast, slow = await both(api, **request)
        assert fast.status_code == status, (status, fast.text)
        same_answer(fast, slow, set())


async def test_idempotency_on_the_fast_path(api: Api) -> None:
    headers = await api.new_client("fast-keys")
    before = taken(api)
    first = await api.submit(headers, idempotency_key="order-1")
    again = await api.client.post(
        "/api/v1/jobs",
        json={"job_type": "echo", "payload": {"n": 1}},
        headers={**headers, "Idempotency-Key": "order-1"},
    )
    other = await api.submit(headers, idempotency_key="order-1", payload={"n": 2})
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
    assert again.json()["id"] == first.json()["id"]
    assert other.json()["code"] == "idempotency_conflict"
    assert taken(api) == before + 3


async def test_what_the_fast_path_leaves_to_fastapi(api: Api) -> None:
    headers = await api.new_client("fast-leaves")
    before = taken(api)
    waited = await api.client.post(
        "/api/v1/jobs", params={"wait": "0.1"}, json={"job_type": "echo", "payload": {}}, headers=headers
    )
    long_key = await api.client.post(
        "/api/v1/jobs", json={"job_type": "echo", "payload": {}}, headers={**headers, "Idempotency-Key": "k" * 256}
    )
    batch = await api.client.post(
        "/api/v1/jobs/batch", json={"jobs": [{"job_type": "echo", "payload": {}}]}, headers=headers
    )
    listed = await api.client.get("/api/v1/jobs", headers=headers)
    assert (waited.status_code, long_key.status_code, batch.status_code, listed.status_code) == (201, 422, 201, 200)
    assert long_key.json()["errors"][0]["loc"] == ["header", "idempotency-key"]
    assert taken(api) == before
    at_limit = await api.client.post(
        "/api/v1/jobs", json={"job_type": "echo", "payload": {}}, headers={**headers, "Idempotency-Key": "k" * 255}
    )
    assert at_limit.status_code == 201, at_limit.text
    assert taken(api) == before + 1
