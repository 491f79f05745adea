"""The job worker in this process: run, retry, dead-letter, back off, and the redelivery rules."""

import itertools
import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.broker import Broker, Outgoing
from app.core.config import Settings
from app.core.messages import JobMessage, events_of, job_outgoing
from app.core.names import Lane
from app.core.topology import QueueSpec, build_topology
from app.main import create_app
from app.models.tables import JOBS, OUTBOX
from app.workers import consumers
from app.workers.jobs.worker import JobWorker
from tests.conftest import ADMIN_KEY, RABBITMQ_URL, make_settings, start_worker
from tests.support import Api, BrokerProbe, api_with, trail, until_status, wait_for


async def test_echo_succeeds_on_the_first_attempt(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("w-echo")
    job = (await api.submit(headers, payload={"hello": "world"})).json()
    done = await until_status(api, headers, job["id"])
    assert (done["status"], done["attempts"], done["result"]) == ("succeeded", 1, {"hello": "world"})
    assert done["started_at"] and done["finished_at"] and done["error"] is None
    events = await trail(api, headers, job["id"])
    assert [e["event"] for e in events] == ["created", "queued", "running", "succeeded"]
    assert events[2]["detail"] == {"from": "queued", "to": "running", "attempt": 1}


async def test_flaky_two_of_three_succeeds_at_attempt_three(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("w-flaky")
    job = (await api.submit(headers, job_type="flaky", payload={"fail_times": 2}, max_retries=3)).json()
    done = await until_status(api, headers, job["id"])
    assert (done["status"], done["attempts"], done["result"]) == ("succeeded", 3, {"attempts": 3})
    names = [e["event"] for e in await trail(api, headers, job["id"])]
    assert names == ["created", "queued", "running", "retrying", "running", "retrying", "running", "succeeded"]


async def test_retries_exhausted_permanent_and_zero_retries_dead_letter(
    api: Api, worker: JobWorker, broker: BrokerProbe
) -> None:
    headers = await api.new_client("w-dead")
    dlq = broker.topology.names.jobs_dlq
    await broker.purge(dlq)
    exhausted = (await api.submit(headers, job_type="flaky", payload={"fail_times": 5}, max_retries=1)).json()
    permanent = (await api.submit(headers, job_type="flaky", payload={"permanent": True}, max_retries=3)).json()
    no_retry = (await api.submit(headers, job_type="flaky", payload={"fail_times": 1}, max_retries=0)).json()
    results = [await until_status(api, headers, j["id"]) for j in (exhausted, permanent, no_retry)]
    assert [(r["status"], r["attempts"]) for r in results] == [
        ("dead_lettered", 2),
        ("dead_lettered", 1),
        ("dead_lettered", 1),
    ]
    assert results[0]["error"]["type"] == "TransientError"
    assert results[1]["error"]["type"] == "PermanentError"

    async def all_in_dlq() -> set[str]:
        return set() if await broker.depth(dlq) < 3 else {m.message_id for m in await broker.take_all(dlq)}

    assert await wait_for(all_in_dlq) == {exhausted["id"], permanent["id"], no_retry["id"]}
    last = (await trail(api, headers, permanent["id"]))[-1]
    assert last["event"] == "dead_lettered" and last["detail"]["reason"] == "permanent_error"


async def test_a_timeout_is_retried_then_dead_lettered_as_a_timeout(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("w-timeout")
    job = (
        await api.submit(headers, job_type="sleep", payload={"seconds": 5}, timeout_seconds=0.3, max_retries=1)
    ).json()
    done = await until_status(api, headers, job["id"])
    assert (done["status"], done["attempts"]) == ("dead_lettered", 2)
    assert done["error"]["type"] == "JobTimeout" and "timeout" in done["error"]["message"]
    events = await trail(api, headers, job["id"])
    assert [e["event"] for e in events].count("retrying") == 1
    assert events[-1]["detail"]["reason"] == "timeout"


async def test_each_retry_waits_between_d_and_1_2_d(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("w-backoff")
    job = (await api.submit(headers, job_type="flaky", payload={"fail_times": 3}, max_retries=3)).json()
    await until_status(api, headers, job["id"])
    events = await trail(api, headers, job["id"])
    stamps = [(e["event"], datetime.fromisoformat(e["created_at"])) for e in events]
    waits = [
        (later - earlier).total_seconds()
        for (name, earlier), (next_name, later) in itertools.pairwise(stamps)
        if name == "retrying" and next_name == "running"
    ]
    delays = [0.2, 0.4, 0.8]  # RETRY_BASE_DELAY=0.2 doubling
    assert len(waits) == 3
    for wait, delay in zip(waits, delays, strict=True):
        # Lower bound exact; the upper bound allows for the hop back through the lane and the claim.
        assert delay <= wait <= 1.2 * delay + 0.25, (waits, delays)


async def test_a_long_tier_does_not_hold_back_a_short_one(broker: BrokerProbe) -> None:
    topology = build_topology(make_settings())
    names, tiers = topology.names, topology.job_tiers
    lane = names.lane_queue(Lane.BULK)
    await broker.purge(lane)
    publisher = Broker(RABBITMQ_URL, topology, 2, name="test-tiers")
    await publisher.start(wait=10)
    try:
        long_tier, short_tier = tiers[-1], tiers[0]
        for tier, ident in ((long_tier, "long"), (short_tier, "short")):
            queue = names.job_tier_queue(Lane.BULK, tier)
            await publisher.publish(Outgoing(names.jobs_retry_exchange, queue, b"{}", message_id=ident))

        async def first_back() -> list[str]:
            return [m.message_id or "" for m in await broker.take_all(lane)]

        assert await wait_for(first_back, within=10) == ["short"]
        assert await wait_for(first_back, within=10) == ["long"]
    finally:
        await publisher.close()


async def test_duplicates_run_once_and_finished_jobs_messages_are_settled(
    api: Api, worker: JobWorker, broker: BrokerProbe, db: AsyncEngine
) -> None:
    headers = await api.new_client("w-dupes")
    names = broker.topology.names
    dlq = names.jobs_dlq
    await broker.purge(dlq)
    ok = (await api.submit(headers, job_type="sleep", payload={"seconds": 0.3})).json()
    dead = (await api.submit(headers, job_type="flaky", payload={"permanent": True}, max_retries=0)).json()
    publisher = Broker(RABBITMQ_URL, broker.topology, 2, name="test-dupes")
    await publisher.start(wait=10)
    try:
        row = await _row(db, ok["id"])
        await publisher.publish(job_outgoing(names, JobMessage.from_row(row)))  # a duplicate while it runs
        await until_status(api, headers, ok["id"])
        await until_status(api, headers, dead["id"])
        await wait_for(lambda: broker.depth(dlq))
        assert [m.message_id for m in await broker.take_all(dlq)] == [dead["id"]]
        # Now a message for each finished job: the succeeded one is dropped, the dead one lands in the DLQ once.
        for job_id in (ok["id"], dead["id"]):
            await publisher.publish(job_outgoing(names, JobMessage.from_row(await _row(db, job_id))))
        await wait_for(lambda: broker.depth(dlq))
        assert [m.message_id for m in await broker.take_all(dlq)] == [dead["id"]]
    finally:
        await publisher.close()
    assert (await _row(db, ok["id"]))["runs"] == 1
    assert [e["event"] for e in await trail(api, headers, ok["id"])].count("running") == 1
    assert (await api.job(headers, ok["id"]))["status"] == "succeeded"


async def test_a_claim_past_the_budget_dead_letters_without_running(
    api: Api, worker: JobWorker, broker: BrokerProbe, db: AsyncEngine
) -> None:
    """A worker died on the last attempt (its lease expired): the next claim must not run the job again."""
    headers = await api.new_client("w-budget")
    await worker.stop(grace=1)  # hold the job still while we stage the crash
    job = (await api.submit(headers, job_type="echo", max_retries=0)).json()
    async with db.begin() as conn:
        await conn.execute(
            update(JOBS)
            .where(JOBS.c.id == job["id"])
            .values(
                status="running",
                attempts=1,
                runs=1,
                seq=JOBS.c.seq + 1,
                lease_until=datetime.now(UTC) - timedelta(seconds=1),
            )
        )
    await worker.start()
    done = await until_status(api, headers, job["id"])
    assert (done["status"], done["attempts"], done["error"]["type"]) == ("dead_lettered", 1, "WorkerLost")
    assert (await _row(db, job["id"]))["runs"] == 1  # never ran again


async def _row(db: AsyncEngine, job_id: str) -> dict[str, object]:
    async with db.connect() as conn:
        row = (await conn.execute(select(JOBS).where(JOBS.c.id == job_id))).one()
    return dict(row._mapping)


async def test_embedded_workers_run_jobs_and_report_in_ready() -> None:
    settings = make_settings(embedded_workers=True)
    app = create_app(settings)
    async with api_with(app, ADMIN_KEY) as api:
        client = api.client

        async def worker_running() -> bool:
            return (await client.get("/ready")).json()["components"]["job_worker"] == "running"

        await wait_for(worker_running, within=15)
        headers = await api.new_client("embedded")
        job = (await api.submit(headers, payload={"embedded": True})).json()
        done = await until_status(api, headers, job["id"], 10)
        assert (done["status"], done["result"]) == ("succeeded", {"embedded": True})
        await app.state.workers["job_worker"].stop(grace=1)
        ready = await client.get("/ready")
        assert ready.status_code == 503 and ready.json()["components"]["job_worker"] == "stopped"


async def test_every_status_change_is_published_as_an_event(api: Api, worker: JobWorker, broker: BrokerProbe) -> None:
    # A queue of the test's own, bound to every job event.
    listener = await broker.channel.declare_queue(exclusive=True)
    await listener.bind(broker.topology.names.events_exchange, routing_key="job.#")
    events_queue = listener.name
    headers = await api.new_client("w-events")
    job = (await api.submit(headers, job_type="flaky", payload={"fail_times": 1}, max_retries=1)).json()
    await until_status(api, headers, job["id"])

    async def five_events() -> bool:
        return await broker.depth(events_queue) >= 5

    await wait_for(five_events)
    # Events that went out together travel as one message (a bundle, app/core/messages.py): count each event.
    carried = [(m, json.loads(body)) for m in await broker.take_all(events_queue) for body in events_of(m.body)]
    mine = [(m, body) for m, body in carried if body["data"]["job"]["id"] == job["id"]]
    messages = [m for m, _ in mine]
    bodies = sorted((body for _, body in mine), key=lambda body: body["seq"])
    assert [(b["seq"], b["type"]) for b in bodies] == [
        (1, "job.queued"),
        (2, "job.running"),
        (3, "job.retrying"),
        (4, "job.running"),
        (5, "job.succeeded"),
    ]
    keys = {m.routing_key for m in messages}
    assert keys == {"job.flaky.queued", "job.flaky.running", "job.flaky.retrying", "job.flaky.succeeded"}
    assert len({b["id"] for b in bodies}) == 5 and all(b["id"].startswith("evt_") for b in bodies)
    assert bodies[-1]["data"]["job"]["result"] == {"attempts": 2}
    assert all(body["data"]["job"]["request_id"] == job["request_id"] for body in bodies)
    alone = [m for m in messages if len(events_of(m.body)) == 1]
    assert alone and all(m.headers["x-request-id"] == job["request_id"] for m in alone)


async def test_the_outbox_empties_once_its_messages_are_out(api: Api, worker: JobWorker, db: AsyncEngine) -> None:
    """Every staged message (job messages and every event, queued and running included) is routable and deleted
    after its confirm: the outbox does not grow with the jobs."""
    headers = await api.new_client("w-outbox")
    jobs = [(await api.submit(headers, payload={"n": n})).json() for n in range(20)]
    for job in jobs:
        await until_status(api, headers, job["id"])
    ids = [job["id"] for job in jobs]

    async def left() -> int:
        async with db.connect() as conn:
            query = (
                select(func.count())
                .select_from(OUTBOX)
                .where(OUTBOX.c.body.contains(ids[0].encode()) | OUTBOX.c.job_id.in_(ids))
            )
            return int((await conn.execute(query)).scalar_one())

    async def empty() -> bool:
        return await left() == 0

    await wait_for(empty, within=10)


async def test_a_consumer_that_stops_consuming_is_replaced_and_its_lane_runs_on(
    api: Api, worker: JobWorker, broker: BrokerProbe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer lost without aio-pika noticing (its restore failed, say) is found and started again."""
    monkeypatch.setattr(consumers, "WATCH_INTERVAL", 0.2)
    lane = broker.topology.names.lane_queue(Lane.DEFAULT)
    full = await broker.consumers(lane)
    lost = next(c for c in worker.group.consumers if c.queue_name == lane)
    underlay = await lost.channel.get_underlay_channel()
    await underlay.basic_cancel(lost.tag)  # the broker stops delivering to it; aio-pika is not told

    async def one_short() -> bool:
        return await broker.consumers(lane) == full - 1

    async def replaced() -> bool:
        return await broker.consumers(lane) == full and lost not in worker.group.consumers

    await wait_for(one_short, within=5)
    await wait_for(replaced, within=30)  # the watch runs every 5 s until the patch applies
    assert lost.channel.is_closed
    assert sum(c.queue_name == lane for c in worker.group.consumers) == full
    headers = await api.new_client("w-replaced")
    jobs = [(await api.submit(headers, payload={"n": n})).json() for n in range(full + 1)]
    for job in jobs:
        assert (await until_status(api, headers, job["id"]))["status"] == "succeeded"


async def test_a_starting_worker_attaches_its_consumers_together(
    settings: Settings, broker: BrokerProbe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker starting on a backlog reaches its full concurrency in a few round trips: its consumers are
    attached together, not one after another while the first ones already drain."""
    settings = settings.model_copy(update={"job_consumers_default": 8})
    attaching = most = 0
    attach = consumers.ConsumerGroup.attach

    async def counted(group: consumers.ConsumerGroup, spec: QueueSpec) -> consumers.Consumer:
        nonlocal attaching, most
        attaching += 1
        most = max(most, attaching)
        try:
            return await attach(group, spec)
        finally:
            attaching -= 1

    monkeypatch.setattr(consumers.ConsumerGroup, "attach", counted)
    async with start_worker(JobWorker, settings) as worker:
        planned = settings.job_consumers_critical + settings.job_consumers_default + settings.job_consumers_bulk
        assert most == planned == 10
        assert len(worker.group.consumers) == planned
        assert len({id(c.channel) for c in worker.group.consumers}) == planned
        for lane, count in worker.counts().items():
            assert await broker.consumers(broker.topology.names.lane_queue(lane)) == count
