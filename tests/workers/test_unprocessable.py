"""A message the service itself fails to process (not a handler's failure: our own code path for it raising) is
tried three times, then given up: its job dead-lettered as `unprocessable`, the message in the DLQ, no loop."""

import uuid
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy import insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.broker import Broker, Outgoing, PublishError
from app.core.messages import JobMessage, job_outgoing
from app.core.names import Lane
from app.models.tables import JOBS
from app.workers.jobs.worker import JobWorker
from app.workers.unprocessable import TRIES, error_of, is_outage
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import RABBITMQ_URL
from tests.support import Api, BrokerProbe, make_job, trail, until_status, wait_for


async def test_a_job_whose_stored_values_break_the_claim_is_dead_lettered_as_unprocessable_after_three_tries(
    api: Api, worker: JobWorker, broker: BrokerProbe, db: AsyncEngine
) -> None:
    names = broker.topology.names
    lane, dlq = names.lane_queue(Lane.DEFAULT), names.jobs_dlq
    await broker.purge(dlq)
    headers = await api.new_client("unprocessable")
    await worker.stop(grace=1)  # the job's message waits in its lane while we spoil its row
    job = (await api.submit(headers, job_type="echo")).json()

    async def confirmed() -> bool:  # the API has recorded its publish: nothing sends the message again
        async with db.connect() as conn:
            status = (await conn.execute(select(JOBS.c.status).where(JOBS.c.id == job["id"]))).scalar_one()
        return bool(status == "queued")

    await wait_for(confirmed)
    async with db.begin() as conn:  # a value PostgreSQL keeps and the claim's SQL-built event cannot hold
        await conn.execute(text("UPDATE jobs SET run_at = '-infinity' WHERE id = :id"), {"id": job["id"]})
    failed_before = worker.group.failed
    await worker.start()

    done = await until_status(api, headers, job["id"], 30, "dead_lettered")

    assert worker.group.failed - failed_before == TRIES == 3
    assert done["attempts"] == 0 and done["error"]["type"] == "IntegrityError"
    assert "outbox" in done["error"]["message"] and len(done["error"]["message"]) < 600
    last = (await trail(api, headers, job["id"]))[-1]
    assert (last["event"], last["detail"]["reason"]) == ("dead_lettered", "unprocessable")

    async def in_dlq() -> list[str | None]:
        return [m.message_id for m in await broker.take_all(dlq)] if await broker.depth(dlq) else []

    assert await wait_for(in_dlq) == [job["id"]]
    assert await broker.depth(lane) == 0
    assert worker.group.failed - failed_before == TRIES  # never again


async def test_a_pending_job_whose_claim_fails_is_given_up_too_from_pending(
    worker: JobWorker, broker: BrokerProbe, db: AsyncEngine
) -> None:
    """The issue's case: the API's record of the publish failed as the claim does, so the job is still pending."""
    names = broker.topology.names
    await broker.purge(names.jobs_dlq)
    job = make_job(status="pending", request_id="req-unprocessable")
    async with db.begin() as conn:
        await conn.execute(insert(JOBS), [job])
        await conn.execute(text("UPDATE jobs SET run_at = '-infinity' WHERE id = :id"), {"id": job["id"]})
    publisher = Broker(RABBITMQ_URL, broker.topology, 2, name="test-pending-unprocessable")
    await publisher.start(wait=10)
    try:
        await publisher.publish(job_outgoing(names, JobMessage.from_row(job)))
    finally:
        await publisher.close()

    async def dead() -> dict[str, Any] | None:
        async with db.connect() as conn:
            found = (await conn.execute(select(JOBS).where(JOBS.c.id == job["id"]))).one()._mapping
        return dict(found) if found["status"] == "dead_lettered" else None

    buried = await wait_for(dead, within=30)
    assert (buried["dead_reason"], buried["attempts"], buried["seq"]) == ("unprocessable", 0, 1)
    assert await wait_for(lambda: broker.depth(names.jobs_dlq)) == 1
    assert await broker.depth(names.lane_queue(Lane.DEFAULT)) == 0


async def test_a_delivery_message_the_webhook_worker_cannot_read_goes_to_its_dlq_after_three_tries(
    webhook_worker: WebhookWorker, broker: BrokerProbe
) -> None:
    names = broker.topology.names
    queue, dlq = names.webhook_deliver_queue, names.webhooks_dlq
    await broker.purge(dlq)
    failed_before = webhook_worker.senders.failed
    message_id = f"unreadable-{uuid.uuid4().hex}"
    publisher = Broker(RABBITMQ_URL, broker.topology, 2, name="test-unreadable")
    await publisher.start(wait=10)
    try:
        await publisher.publish(Outgoing("", queue, b"{not json", message_id=message_id))

        assert (await broker.until_taken(dlq, message_id, within=30)).count(message_id) == 1
    finally:
        await publisher.close()
    assert webhook_worker.senders.failed - failed_before == TRIES
    assert await broker.depth(queue) == 0


class _ServerError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"server error {sqlstate}\nDETAIL: more")
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (DBAPIError("UPDATE jobs ...", None, _ServerError("57P01")), True),  # the server shutting down
        (DBAPIError("UPDATE jobs ...", None, _ServerError("40P01")), True),  # a deadlock: try again
        (DBAPIError("UPDATE jobs ...", None, _ServerError("55P03")), True),  # a lock not available
        (PublishError("RabbitMQ is not connected"), True),
        (RedisConnectionError("connection refused"), True),
        (ConnectionResetError(), True),
        (IntegrityError("INSERT INTO outbox ...", None, _ServerError("23502")), False),  # our own values
        (ValueError("a stored value our code cannot read"), False),
        (KeyError("delivery_id"), False),
    ],
)
def test_only_the_services_own_failures_count_towards_giving_a_message_up(error: Exception, outage: bool) -> None:
    assert is_outage(error) is outage


def test_the_error_stored_is_the_drivers_first_line_never_the_statement() -> None:
    error = IntegrityError("INSERT INTO outbox (body) VALUES ($1) -- long", None, _ServerError("23502"))
    assert error_of(error) == {"type": "IntegrityError", "message": "server error 23502"}
    assert error_of(ValueError("x" * 2000))["message"] == "x" * 500
