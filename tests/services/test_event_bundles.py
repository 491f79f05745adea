"""Events of one routing key that go out together travel as one message (a bundle); every subscriber gets each
event of it as if it had come alone."""

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.broker import Broker, Outgoing
from app.core.messages import BUNDLE_MAX, REQUEST_ID_HEADER, bundle, dumps, events_of
from app.models.tables import OUTBOX
from app.services.live import EventFeed, Hub
from app.services.outbox import Outbox
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import RABBITMQ_URL
from tests.receiver import Receiver
from tests.support import Api, BrokerProbe, stores_for, until_status, wait_for
from tests.workers.test_webhooks import arrived, delivered, register

WITHIN = 10.0


def event(n: int, status: str = "running", request_id: str | None = None) -> Outgoing:
    job = {"id": f"job-{n}", "job_type": "echo", "client_id": "bundles", "request_id": request_id}
    body = {"id": f"evt_job{n}_2", "type": f"job.{status}", "seq": 2, "data": {"job": job}}
    headers = {REQUEST_ID_HEADER: request_id} if request_id else {}
    return Outgoing("events", f"job.echo.{status}", dumps(body), headers, message_id=body["id"], mandatory=False)


def test_a_bundle_holds_its_events_bodies_in_order() -> None:
    events = [event(n) for n in range(3)]
    message = bundle(events)
    assert (message.exchange, message.routing_key, message.mandatory) == ("events", "job.echo.running", False)
    assert message.message_id == "evt_job0_2+2"
    assert events_of(message.body) == [e.body for e in events]
    alone = event(7)
    assert bundle([alone]) is alone and events_of(alone.body) == [alone.body]
    for broken in (b"[1, 2]", b"[{", b'[{"id": 1}, "x"]'):
        with pytest.raises(ValueError):
            events_of(broken)


async def test_the_outbox_publishes_events_of_one_key_as_bundles(db: AsyncEngine, broker: BrokerProbe) -> None:
    """101 running events and one queued event, staged together: three messages (100 + 1 running, 1 queued),
    every row confirmed and forgotten; the lone event keeps its headers."""
    names = broker.topology.names
    publisher = Broker(RABBITMQ_URL, broker.topology, 5, name="test-bundles")
    await publisher.start(wait=10)  # declares the topology
    listener = await broker.channel.declare_queue(exclusive=True)
    await listener.bind(names.events_exchange, routing_key="job.bundles.*")
    stores = stores_for(db, names)
    box = Outbox(
        stores.jobs,
        stores.outbox,
        publisher,
        relay_after=60,
        batch_size=500,
        hold_seconds=15,
        pubsub=frozenset({names.events_exchange}),
    )
    try:
        running = [
            replace(event(n), exchange=names.events_exchange, routing_key="job.bundles.running")
            for n in range(BUNDLE_MAX + 1)
        ]
        queued = replace(
            event(999, "queued", request_id="req-b"), exchange=names.events_exchange, routing_key="job.bundles.queued"
        )
        async with db.begin() as conn:
            staged = await stores.outbox.stage(conn, [*running, queued])
        assert await box.publish(staged) == [True] * len(staged)

        async def three() -> bool:
            return await broker.depth(listener.name) >= 3

        await wait_for(three, within=WITHIN)
        messages = await broker.take_all(listener.name)
        sizes = sorted((m.routing_key, len(events_of(m.body))) for m in messages)
        assert sizes == [("job.bundles.queued", 1), ("job.bundles.running", 1), ("job.bundles.running", 100)]
        bodies = [b for m in messages if m.routing_key == "job.bundles.running" for b in events_of(m.body)]
        assert sorted(bodies) == sorted(m.body for m in running)
        [lone] = [m for m in messages if m.routing_key == "job.bundles.queued"]
        assert lone.body == queued.body and lone.headers[REQUEST_ID_HEADER] == "req-b"
        await box.flush()
        ids = [p.id for p in staged]
        async with db.connect() as conn:
            left = (await conn.execute(select(func.count()).where(OUTBOX.c.id.in_(ids)))).scalar_one()
        assert left == 0
    finally:
        await publisher.close()


async def test_a_live_stream_gets_every_event_of_a_bundle(api: Api) -> None:
    resources = api.app.state.runtime.resources
    broker, names = resources.broker, resources.names
    feed = EventFeed(broker, names, Hub(size=16))
    await feed.start()
    try:
        assert await feed.wanted(WITHIN)
        with feed.hub.subscribed(lambda e: e.client_id == "bundles") as subscription:
            events = [replace(event(n), exchange=names.events_exchange) for n in range(3)]
            await broker.publish(bundle(events))
            got = [await asyncio.wait_for(subscription.next(), WITHIN) for _ in events]
        assert [(e.id, e.job_id, e.data) for e in got if e is not None] == [
            (f"evt_job{n}_2", f"job-{n}", e.body.decode()) for n, e in enumerate(events)
        ]
    finally:
        await feed.stop()


async def test_a_bundle_of_events_fans_out_to_one_delivery_each(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver, broker: BrokerProbe
) -> None:
    """Two jobs' `succeeded` events, held back and published again as one bundle beside their own messages:
    each job gets one delivery, with its own request id, once."""
    headers = await api.new_client("hooks-bundle")
    await register(api, headers, receiver, "/bundle", events=["job.succeeded"])
    names = broker.topology.names
    await webhook_worker.fanout.stop(grace=1)  # hold the events back so we can bundle them
    try:
        jobs = [(await api.submit(headers, payload={"n": n})).json() for n in range(2)]
        for job in jobs:
            await until_status(api, headers, job["id"])
        ids = {job["id"] for job in jobs}
        held: list[Any] = []

        async def both() -> bool:
            held.extend(await broker.take_all(names.webhook_events_queue))
            return {_job_of(body) for m in held for body in events_of(m.body)} >= ids

        await wait_for(both, within=WITHIN)
    finally:
        await webhook_worker.fanout.start()
    bodies = [body for m in held for body in events_of(m.body) if _job_of(body) in ids]
    assert len(bodies) == 2
    copies = [Outgoing(names.events_exchange, names.event_key("echo", "succeeded"), b, mandatory=False) for b in bodies]
    publisher = Broker(RABBITMQ_URL, broker.topology, 5, name="test-bundle-fanout")
    await publisher.start(wait=10)
    try:
        await publisher.publish(bundle(copies))
        await publisher.publish(bundle(copies))  # a bundle redelivered makes no second delivery (rule 10)
    finally:
        await publisher.close()
    got = await arrived(receiver, "/bundle", 2)
    sent = {json.loads(r.body)["data"]["job"]["id"]: _header(r.headers, "x-request-id") for r in got}
    assert sent == {job["id"]: job["request_id"] for job in jobs}
    for job in jobs:
        [log] = await delivered(api, headers, job["id"], "succeeded")
        assert len(log["attempts"]) == 1


def _header(headers: dict[str, str], name: str) -> str | None:
    return next((value for key, value in headers.items() if key.lower() == name), None)


def _job_of(body: bytes) -> str:
    found: str = json.loads(body)["data"]["job"]["id"]
    return found
