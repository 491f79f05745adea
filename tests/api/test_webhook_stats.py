"""An endpoint's stats (GET /api/v1/webhooks/{id}/stats) from real deliveries to a loopback receiver that answers
200 and 500: counts by status, the attempts' success rate and latency, the last error, the circuit, in flight."""

import asyncio
import math
import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.models.tables import ATTEMPTS, DELIVERIES
from app.models.types import utcnow
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import make_settings
from tests.receiver import Receiver
from tests.support import Api, make_delivery, wait_for

BREAKER_FAILURES = 3  # a delivery that fails all of its 3 attempts opens its endpoint's circuit…
COOLDOWN = 120  # …for longer than any test here takes


@pytest.fixture
def settings() -> Settings:
    return make_settings(webhook_breaker_failures=BREAKER_FAILURES, webhook_breaker_cooldown_seconds=COOLDOWN)


async def endpoint(api: Api, headers: dict[str, str], receiver: Receiver, path: str) -> str:
    answer = await api.client.post("/api/v1/webhooks", json={"url": receiver.url(path)}, headers=headers)
    assert answer.status_code == 201, answer.text
    webhook_id: str = answer.json()["id"]
    return webhook_id


async def deliveries(api: Api, headers: dict[str, str], webhook_id: str, **params: Any) -> list[dict[str, Any]]:
    answer = await api.client.get(f"/api/v1/webhooks/{webhook_id}/deliveries", params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()
    return found


async def settled_test_event(api: Api, headers: dict[str, str], webhook_id: str) -> dict[str, Any]:
    """Send the endpoint a test event and wait until its delivery has succeeded or failed for good."""
    sent = await api.client.post(f"/api/v1/webhooks/{webhook_id}/test", headers=headers)
    assert sent.status_code == 202, sent.text
    delivery_id = sent.json()["delivery_id"]

    async def settled() -> dict[str, Any] | None:
        found = [d for d in await deliveries(api, headers, webhook_id) if d["id"] == delivery_id]
        return found[0] if found and found[0]["status"] != "pending" else None

    delivery = await wait_for(settled, within=20)
    assert delivery is not None
    return delivery


async def stats(api: Api, headers: dict[str, str], webhook_id: str, window: str | None = None) -> dict[str, Any]:
    params = {"window": window} if window else {}
    answer = await api.client.get(f"/api/v1/webhooks/{webhook_id}/stats", params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    figures: dict[str, Any] = answer.json()
    return figures


def nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[max(math.ceil(p * len(ordered)) - 1, 0)], 1)


async def test_two_good_deliveries_and_one_failed_give_rates_latency_and_the_last_error(
    api: Api, webhook_worker: WebhookWorker, receiver: Receiver
) -> None:
    headers = await api.new_client("stats-mixed")
    webhook_id = await endpoint(api, headers, receiver, "/stats")
    receiver.delays["/stats"] = 0.05  # every answer takes at least 50 ms
    receiver.statuses[:] = [200, 200, 500, 500, 500]
    sent = [await settled_test_event(api, headers, webhook_id) for _ in range(3)]
    assert [d["status"] for d in sent] == ["succeeded", "succeeded", "failed"]

    async def opened() -> dict[str, Any] | None:
        figures = await stats(api, headers, webhook_id)
        return figures if figures["circuit"] == "open" else None

    figures = await wait_for(opened)  # the failed delivery's third failure opened the circuit
    assert figures is not None
    attempts = [a for d in sent for a in d["attempts"]]
    durations = [a["duration_ms"] for a in attempts]
    assert min(durations) >= 50
    last = sent[2]["attempts"][-1]
    assert figures == {
        "window": "1h",
        "deliveries": 3,
        "succeeded": 2,
        "failed": 1,
        "pending": 0,
        "attempts": 5,
        "success_rate": 0.4,  # of attempts: 2 of 5 answered 2xx
        "latency_ms": {"p50": nearest_rank(durations, 0.5), "p95": nearest_rank(durations, 0.95)},
        "last_error": {"at": last["created_at"], "status_code": 500, "error": last["error"]},
        "circuit": "open",
        "in_flight": 0,
    }
    assert last["error"] and "500" in last["error"]
    assert (await stats(api, headers, webhook_id, "24h")) == {**figures, "window": "24h"}


async def test_an_endpoint_with_nothing_sent_has_no_rate_no_latency_and_a_closed_circuit(
    api: Api, receiver: Receiver
) -> None:
    headers = await api.new_client("stats-empty")
    webhook_id = await endpoint(api, headers, receiver, "/quiet")
    figures = await stats(api, headers, webhook_id)
    assert figures == {
        "window": "1h",
        "deliveries": 0,
        "succeeded": 0,
        "failed": 0,
        "pending": 0,
        "attempts": 0,
        "success_rate": None,
        "latency_ms": {"p50": None, "p95": None},
        "last_error": None,
        "circuit": "closed",
        "in_flight": 0,
    }


async def test_a_delivery_being_sent_is_in_flight(api: Api, webhook_worker: WebhookWorker, receiver: Receiver) -> None:
    headers = await api.new_client("stats-in-flight")
    webhook_id = await endpoint(api, headers, receiver, "/slow")
    receiver.holds["/slow"] = answer = asyncio.Event()
    sent = await api.client.post(f"/api/v1/webhooks/{webhook_id}/test", headers=headers)
    assert sent.status_code == 202

    async def arrived() -> bool:
        return bool(receiver.on("/slow"))

    await wait_for(arrived)  # the receiver holds the request until told: the delivery is being sent now
    figures = await stats(api, headers, webhook_id)
    assert (figures["in_flight"], figures["pending"], figures["deliveries"], figures["attempts"]) == (1, 1, 1, 0)
    answer.set()

    async def done() -> dict[str, Any] | None:
        figures = await stats(api, headers, webhook_id)
        return figures if figures["succeeded"] == 1 else None

    after = await wait_for(done)
    assert after is not None and (after["in_flight"], after["attempts"]) == (0, 1)


async def test_the_window_counts_only_deliveries_made_in_it(api: Api, db: AsyncEngine, receiver: Receiver) -> None:
    headers = await api.new_client("stats-window")
    webhook_id = await endpoint(api, headers, receiver, "/window")
    me = (await api.client.get("/api/v1/me", headers=headers)).json()["client_id"]
    for hours, code in ((2, 503), (30, 502)):  # one in the last day, one before it; neither in the last hour
        made = utcnow() - timedelta(hours=hours)
        row = make_delivery(f"msg_{uuid.uuid4().hex}", "", me, made)
        row |= {"endpoint_id": webhook_id, "target": webhook_id, "job_id": None, "event_type": "webhook.test"}
        attempt = {"delivery_id": row["id"], "attempt": 1, "status_code": code, "duration_ms": 7.0, "created_at": made}
        async with db.begin() as conn:
            await conn.execute(insert(DELIVERIES), [row])
            await conn.execute(insert(ATTEMPTS), [{**attempt, "error": f"HTTP {code}"}])
    hour, day = await stats(api, headers, webhook_id), await stats(api, headers, webhook_id, "24h")
    assert (hour["deliveries"], hour["attempts"], hour["last_error"]) == (0, 0, None)
    assert (day["deliveries"], day["failed"], day["attempts"], day["success_rate"]) == (1, 1, 1, 0.0)
    assert day["last_error"]["status_code"] == 503 and day["latency_ms"] == {"p50": 7.0, "p95": 7.0}


async def test_a_window_other_than_an_hour_or_a_day_is_refused(api: Api, receiver: Receiver) -> None:
    headers = await api.new_client("stats-bad-window")
    webhook_id = await endpoint(api, headers, receiver, "/bad")
    for window in ("7d", "1H", ""):
        answer = await api.client.get(f"/api/v1/webhooks/{webhook_id}/stats?window={window}", headers=headers)
        assert answer.status_code == 422, (window, answer.text)
        assert "'1h' or '24h'" in answer.text


async def test_another_clients_endpoint_has_no_stats(api: Api, receiver: Receiver) -> None:
    owner, other = await api.new_client("stats-owner"), await api.new_client("stats-other")
    webhook_id = await endpoint(api, owner, receiver, "/owned")
    theirs = await api.client.get(f"/api/v1/webhooks/{webhook_id}/stats", headers=other)
    assert theirs.status_code == 404 and theirs.json()["code"] == "not_found"
    assert (await api.client.get(f"/api/v1/webhooks/{webhook_id}/stats", headers=api.admin)).status_code == 200
