"""An endpoint's deliveries as one table: filtered by status, event type and time, paged newest first by cursor,
each item in the contract's shape; a bad filter is a 422 that says what is wrong."""

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import ATTEMPTS, DELIVERIES
from app.models.types import utcnow
from tests.receiver import Receiver
from tests.support import Api, make_delivery

ITEM_KEYS = {"id", "event_type", "job_id", "webhook_id", "url", "status", "created_at", "attempts"}
ATTEMPT_KEYS = {"attempt", "status_code", "duration_ms", "error", "response_body", "created_at", "next_attempt_at"}
# (minutes ago, status, event type) of the rows each test starts from
ROWS = [
    (5, "succeeded", "job.succeeded"),
    (10, "failed", "job.succeeded"),
    (20, "succeeded", "job.dead_lettered"),
    (30, "failed", "job.dead_lettered"),
    (40, "pending", "job.retrying"),
    (50, "succeeded", "webhook.test"),
]


async def endpoint_with_rows(api: Api, db: AsyncEngine, receiver: Receiver, prefix: str) -> tuple[dict[str, str], str]:
    headers = await api.new_client(prefix)
    hook = await api.client.post("/api/v1/webhooks", json={"url": receiver.url("/table")}, headers=headers)
    webhook_id = hook.json()["id"]
    me = (await api.client.get("/api/v1/me", headers=headers)).json()["client_id"]
    now = utcnow()
    rows, attempts = [], []
    for minutes, status, event_type in ROWS:
        row = make_delivery(f"msg_{uuid.uuid4().hex}", "", me, now - timedelta(minutes=minutes))
        row |= {"endpoint_id": webhook_id, "target": webhook_id, "job_id": None, "event_type": event_type}
        rows.append({**row, "status": status, "attempt_count": 1})
        code = 200 if status == "succeeded" else 500
        attempt = {"delivery_id": row["id"], "attempt": 1, "status_code": code, "duration_ms": 3.5}
        attempts.append({**attempt, "created_at": row["created_at"]})
    async with db.begin() as conn:
        await conn.execute(insert(DELIVERIES), rows)
        await conn.execute(insert(ATTEMPTS), attempts)
    return headers, webhook_id


async def listed(api: Api, headers: dict[str, str], webhook_id: str, **params: Any) -> list[dict[str, Any]]:
    answer = await api.client.get(f"/api/v1/webhooks/{webhook_id}/deliveries", params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()
    return items


def ages(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(item["status"], item["event_type"]) for item in items]


async def test_filters_narrow_the_list_and_keep_the_item_shape(api: Api, db: AsyncEngine, receiver: Receiver) -> None:
    headers, webhook_id = await endpoint_with_rows(api, db, receiver, "table-filters")
    everything = await listed(api, headers, webhook_id)
    assert ages(everything) == [(s, e) for _, s, e in reversed(ROWS)]  # without a page: every one, oldest first
    assert all(set(item) == ITEM_KEYS for item in everything)
    assert all(set(a) == ATTEMPT_KEYS for item in everything for a in item["attempts"])
    failed = await listed(api, headers, webhook_id, status="failed")
    assert ages(failed) == [("failed", "job.dead_lettered"), ("failed", "job.succeeded")]
    dead = await listed(api, headers, webhook_id, event_type="job.dead_lettered", status="succeeded")
    assert ages(dead) == [("succeeded", "job.dead_lettered")]
    now = utcnow()
    since, until = (now - timedelta(minutes=35)).isoformat(), (now - timedelta(minutes=15)).isoformat()
    between = await listed(api, headers, webhook_id, since=since, until=until)
    assert ages(between) == [("failed", "job.dead_lettered"), ("succeeded", "job.dead_lettered")]
    tests = await listed(api, headers, webhook_id, event_type="webhook.test")
    assert ages(tests) == [("succeeded", "webhook.test")]


async def test_pages_go_newest_first_and_the_link_header_leads_to_the_next(
    api: Api, db: AsyncEngine, receiver: Receiver
) -> None:
    headers, webhook_id = await endpoint_with_rows(api, db, receiver, "table-pages")
    seen: list[dict[str, Any]] = []
    url: str | None = f"/api/v1/webhooks/{webhook_id}/deliveries?limit=4"
    pages = 0
    while url:
        answer = await api.client.get(url, headers=headers)
        assert answer.status_code == 200, answer.text
        seen += answer.json()
        pages += 1
        link = answer.headers.get("link")
        url = link.split(">")[0].removeprefix("<") if link else None
        assert link is None or link.endswith('; rel="next"')
    assert pages == 2 and ages(seen) == [(s, e) for _, s, e in ROWS]
    times = [datetime.fromisoformat(item["created_at"]) for item in seen]
    assert times == sorted(times, reverse=True)
    failed_page = await api.client.get(
        f"/api/v1/webhooks/{webhook_id}/deliveries", params={"status": "failed", "limit": 1}, headers=headers
    )
    following = failed_page.headers["link"]
    assert "status=failed" in following and "cursor=" in following  # the filters stay on the next page


async def test_a_bad_filter_is_a_422_that_says_what_is_wrong(api: Api, receiver: Receiver) -> None:
    headers = await api.new_client("table-bad")
    hook = await api.client.post("/api/v1/webhooks", json={"url": receiver.url("/bad")}, headers=headers)
    path = f"/api/v1/webhooks/{hook.json()['id']}/deliveries"
    cases = {
        "status=lost": "'pending', 'succeeded' or 'failed'",
        "event_type=job.exploded": "'job.succeeded'",
        "since=yesterday": "datetime",
        "since=2026-01-01T00:00:00": "timezone",
        "since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z": "`since` must be before `until`",
        "limit=0": "greater than or equal to 1",
        "limit=201": "less than or equal to 200",
        "cursor=not-a-cursor": "cursor",
    }
    for query, said in cases.items():
        answer = await api.client.get(f"{path}?{query}", headers=headers)
        assert answer.status_code == 422, (query, answer.text)
        assert said in answer.text, (query, answer.text)
