"""The webhook path's group commits (app/workers/webhooks/batches.py): one bad attempt record fails only its own
delivery; a kill -9 between a record batch's commit and its acks sends nothing recorded twice; the pooled client
keeps to the endpoint's in-flight cap; the in-process slot wait of app/workers/webhooks/slots.py; the endpoint's
gate (app/workers/webhooks/gate.py); and the longer wait, each time, of a delivery that keeps finding its endpoint
busy."""

import asyncio
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from sqlalchemy import delete, func, insert, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.backoff import busy_delays
from app.core.config import Settings
from app.core.messages import BUSY_HEADER, JobEvent, delivery_outgoing, job_event
from app.core.resources import Resources
from app.core.secret_box import SecretBox
from app.core.signing import new_secret
from app.core.topology import declare
from app.models.tables import ATTEMPTS, DELIVERIES, ENDPOINTS, JOB_EVENTS, JOBS, OUTBOX
from app.models.types import utcnow
from app.services.outbox import Outbox
from app.services.relay import make_outbox
from app.stores.deliveries import Attempt, Event
from app.stores.outbox import Pending
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.batches import DeliveryBatches
from app.workers.webhooks.breakers import LEASE_MARGIN_SECONDS, Admission, Ask, Gate, Result
from app.workers.webhooks.claims import Send, claim
from app.workers.webhooks.gate import EndpointGate, Passage, breaker_key
from app.workers.webhooks.outcomes import EndpointHealth, recording
from app.workers.webhooks.slots import FIRST_WAIT_SECONDS, SLOW_SECONDS, EndpointSlots, Slot
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import make_settings, settings_env, start_worker
from tests.core.test_safe_http import Clock
from tests.receiver import Receiver, serving
from tests.support import Api, BrokerProbe, app_process, make_job, until_status, wait_for

# ---------------------------------------------------------------- one bad record among many


def batches_for(resources: Resources, outbox: Outbox) -> DeliveryBatches:
    """The batches as the webhook worker builds them."""
    settings = resources.settings
    lease = settings.webhook_timeout_seconds + LEASE_MARGIN_SECONDS
    health = EndpointHealth(resources.stores.endpoints, settings.webhook_disable_after_seconds)
    return DeliveryBatches(resources.stores.deliveries, outbox, lease, health)


async def an_endpoint(db: AsyncEngine, box: SecretBox, client_id: str) -> str:
    """A registered endpoint for job.succeeded; nothing is ever sent to its URL (the discard port)."""
    now = utcnow()
    endpoint_id = str(uuid.uuid4())
    row = {
        "id": endpoint_id,
        "client_id": client_id,
        "url": "http://127.0.0.1:9/hook",
        "events": ["job.succeeded"],
        "active": True,
        "secret": box.seal(new_secret()),
        "created_at": now,
        "updated_at": now,
    }
    async with db.begin() as conn:
        await conn.execute(insert(ENDPOINTS).values(**row))
    return endpoint_id


async def finished_jobs(db: AsyncEngine, resources: Resources, client_id: str, count: int) -> list[Event]:
    """Succeeded jobs of the client, each with its job.succeeded event as the worker would consume it."""
    now = utcnow()
    jobs = [make_job(now, client_id=client_id, status="succeeded", seq=3, finished_at=now) for _ in range(count)]
    async with db.begin() as conn:
        await conn.execute(insert(JOBS), jobs)
    bodies = [job_event(resources.names, job, now).body for job in jobs]
    return [(JobEvent.from_bytes(body), body, None) for body in bodies]


async def forget(db: AsyncEngine, staged: list[list[Pending]]) -> None:
    """Drop the staged delivery messages: the test claims by id, and no relay is to send them later."""
    async with db.begin() as conn:
        await conn.execute(delete(OUTBOX).where(OUTBOX.c.id.in_([p.id for one in staged for p in one])))


def answered(status_code: int) -> Attempt:
    return Attempt(status_code, 3.0, None, "ok")


async def test_an_attempt_the_database_refuses_fails_only_its_own_delivery(db: AsyncEngine) -> None:
    resources = await Resources.open(make_settings(), role="test-records")
    outbox = make_outbox(resources)
    try:
        batches = batches_for(resources, outbox)
        store = batches.store
        client_id = "records-" + uuid.uuid4().hex[:8]
        await an_endpoint(db, SecretBox(resources.settings.secret_encryption_key), client_id)
        staged = await store.fan_out(await finished_jobs(db, resources, client_id, 4))
        await forget(db, staged)
        ids = [p.message.message_id or "" for one in staged for p in one]
        assert len(ids) == 4
        sends = [s for s in await claim(store, ids, batches.lease_seconds) if isinstance(s, Send)]
        assert len(sends) == 4
        bad, *good = sends

        recordings = [recording(bad, answered(2**40), None)] + [recording(s, answered(200), None) for s in good]
        outcomes = await asyncio.gather(*(batches.record(r) for r in recordings), return_exceptions=True)

        assert isinstance(outcomes[0], DBAPIError) and "out of int32 range" in str(outcomes[0])
        assert outcomes[1:] == [True, True, True]
        # One batch of four that failed, then each item alone: the three good ones committed, the bad one raised.
        assert (batches.records.batches, batches.records.items) == (5, 8)
        rows = await deliveries_by_id(db, ids)
        attempts = await attempts_by_delivery(db, ids)
        for send in good:
            assert rows[send.delivery["id"]] == ("succeeded", 1, None)
            assert attempts[send.delivery["id"]] == [(1, 200)]
        bad_id = bad.delivery["id"]
        assert rows[bad_id] == ("pending", 0, bad.delivery["lease_until"])  # still claimed, by the same lease
        assert bad_id not in attempts
        assert await delivery_trail(db, [s.delivery["job_id"] for s in sends]) == {
            s.delivery["job_id"]: 1 for s in good
        }

        # The claim still holds: a sane attempt for the same delivery is recorded as usual.
        assert await batches.record(recording(bad, answered(200), None)) is True
        assert (await deliveries_by_id(db, [bad_id]))[bad_id] == ("succeeded", 1, None)
    finally:
        await outbox.close()
        await resources.close()


async def deliveries_by_id(db: AsyncEngine, ids: list[str]) -> dict[str, tuple[str, int, Any]]:
    query = select(DELIVERIES.c.id, DELIVERIES.c.status, DELIVERIES.c.attempt_count, DELIVERIES.c.lease_until)
    async with db.connect() as conn:
        rows = await conn.execute(query.where(DELIVERIES.c.id.in_(ids)))
        return {row.id: (row.status, row.attempt_count, row.lease_until) for row in rows}


async def attempts_by_delivery(db: AsyncEngine, ids: list[str]) -> dict[str, list[tuple[int, int | None]]]:
    query = select(ATTEMPTS.c.delivery_id, ATTEMPTS.c.attempt, ATTEMPTS.c.status_code).order_by(ATTEMPTS.c.attempt)
    found: dict[str, list[tuple[int, int | None]]] = {}
    async with db.connect() as conn:
        for row in await conn.execute(query.where(ATTEMPTS.c.delivery_id.in_(ids))):
            found.setdefault(row.delivery_id, []).append((row.attempt, row.status_code))
    return found


async def delivery_trail(db: AsyncEngine, job_ids: list[str]) -> dict[str, int]:
    """How many `delivery` entries each job's audit trail holds (jobs with none left out)."""
    query = (
        select(JOB_EVENTS.c.job_id, func.count())
        .where(JOB_EVENTS.c.job_id.in_(job_ids), JOB_EVENTS.c.event == "delivery")
        .group_by(JOB_EVENTS.c.job_id)
    )
    async with db.connect() as conn:
        return {job_id: count for job_id, count in (await conn.execute(query)).all()}


# ---------------------------------------------------------------- kill -9 between a record commit and its acks

JOBS_PER_TEST = 6


def webhooks_env(**overrides: object) -> dict[str, str]:
    """A webhook worker process with a consumer (and an endpoint slot) for every delivery of the test."""
    consumers = {"webhook_consumers": JOBS_PER_TEST, "webhook_max_in_flight_per_endpoint": JOBS_PER_TEST}
    return settings_env(make_settings(**consumers, **overrides))


async def register(api: Api, headers: dict[str, str], url: str) -> str:
    answer = await api.client.post("/api/v1/webhooks", json={"url": url, "events": ["job.succeeded"]}, headers=headers)
    assert answer.status_code == 201, answer.text
    endpoint_id: str = answer.json()["id"]
    return endpoint_id


async def statuses_of(db: AsyncEngine, client_id: str) -> dict[str, str]:
    async with db.connect() as conn:
        rows = await conn.execute(
            select(DELIVERIES.c.id, DELIVERIES.c.status).where(DELIVERIES.c.client_id == client_id)
        )
        return {row.id: row.status for row in rows}


async def purge_webhook_queues(broker: BrokerProbe) -> None:
    """Earlier tests' events and delivery messages would share the first batches."""
    names = broker.topology.names
    tiers = [names.webhook_tier_queue(tier) for tier in broker.topology.webhook_tiers]
    await broker.purge(names.webhook_events_queue, names.webhook_deliver_queue, *tiers)


@pytest.mark.slow
async def test_sigkill_after_a_record_commit_sends_no_recorded_delivery_again(
    api: Api, worker: JobWorker, broker: BrokerProbe, receiver: Receiver, db: AsyncEngine, tmp_path: Path
) -> None:
    await purge_webhook_queues(broker)
    client_id = "crash-record-" + uuid.uuid4().hex[:6]
    headers = await api.new_client(client_id)
    await register(api, headers, receiver.url("/crash"))
    jobs = [(await api.submit(headers, payload={"n": n})).json()["id"] for n in range(JOBS_PER_TEST)]
    for job_id in jobs:  # their events wait in the webhook events queue: no webhook worker runs yet
        assert (await until_status(api, headers, job_id))["status"] == "succeeded"

    with app_process(["worker", "webhooks"], webhooks_env(failpoints="after_record_commit"), tmp_path / "a.log") as a:
        exit_code = await asyncio.to_thread(a.popen.wait, 60)  # the receiver must keep answering meanwhile
        assert exit_code == -9, a.output()  # it killed itself right after committing its first attempt records
    recorded = {i for i, status in (await statuses_of(db, client_id)).items() if status == "succeeded"}
    assert recorded, "the first record batch committed before the crash"
    sent_before = Counter(r.headers["webhook-id"] for r in receiver.on("/crash"))
    assert all(sent_before[i] == 1 for i in recorded), sent_before

    with app_process(["worker", "webhooks"], webhooks_env(log_level="INFO"), tmp_path / "b.log") as b:

        async def all_succeeded() -> dict[str, str] | None:
            found = await statuses_of(db, client_id)
            return found if len(found) == JOBS_PER_TEST and set(found.values()) == {"succeeded"} else None

        await wait_for(all_succeeded, within=60, interval=0.2)

        async def redeliveries_handled() -> bool:
            """Each redelivered message of a delivery recorded before the crash was dropped (or, wrongly, sent)."""
            log, again = b.output(), Counter(r.headers["webhook-id"] for r in receiver.on("/crash"))
            return all(
                f"dropping delivery message {i}: delivery already succeeded" in log or again[i] > 1 for i in recorded
            )

        await wait_for(redeliveries_handled, within=30, interval=0.2)

    deliveries = await statuses_of(db, client_id)
    sent = Counter(r.headers["webhook-id"] for r in receiver.on("/crash"))
    assert {i: sent[i] for i in recorded} == dict.fromkeys(recorded, 1)  # dropped when redelivered, never resent
    assert set(deliveries.values()) == {"succeeded"}
    assert set(sent) == set(deliveries)  # every delivery reached the receiver, under its own webhook-id
    assert len(sent) == len(deliveries) == JOBS_PER_TEST
    async with db.connect() as conn:
        per_pair = await conn.execute(
            select(DELIVERIES.c.event_id, DELIVERIES.c.target, func.count())
            .where(DELIVERIES.c.client_id == client_id)
            .group_by(DELIVERIES.c.event_id, DELIVERIES.c.target)
        )
        assert sorted(count for _, _, count in per_pair) == [1] * JOBS_PER_TEST


# ---------------------------------------------------------------- connections through the worker


async def test_200_deliveries_to_one_endpoint_open_at_most_its_in_flight_cap_of_connections(
    api: Api, broker: BrokerProbe
) -> None:
    cap = 3
    settings = make_settings(webhook_consumers=8, webhook_max_in_flight_per_endpoint=cap)
    headers = await api.new_client("hooks-pool")
    await purge_webhook_queues(broker)
    async with serving() as server:
        server.receiver.delay = 0.005  # long enough for attempts to overlap
        answer = await api.client.post("/api/v1/webhooks", json={"url": server.url("/pool")}, headers=headers)
        assert answer.status_code == 201, answer.text
        ping = f"/api/v1/webhooks/{answer.json()['id']}/test"
        # Queued before the worker runs, so its eight consumers all find work at once.
        queued = [(await api.client.post(ping, headers=headers)).json()["delivery_id"] for _ in range(200)]

        async def all_arrived() -> set[str] | None:
            got = {r.headers["webhook-id"] for r in server.receiver.on("/pool")}
            return got if len(got) >= 200 else None

        async with start_worker(WebhookWorker, settings):
            arrived = await wait_for(all_arrived, within=30)
    assert arrived == set(queued)
    assert len(server.receiver.requests) == 200
    assert 1 <= server.connections <= cap, server.connections
    assert server.most_in_flight == cap  # the cap was reached (so the bound above means something), never passed


# ---------------------------------------------------------------- the in-process slot wait


FAST, SLOW = 0.001, 5.0  # round trips well inside and well outside any bound the slots keep


async def taught(slots: EndpointSlots, key: str, round_trip: float) -> EndpointSlots:
    """The slots after one attempt to `key` that took `round_trip` seconds."""
    assert await slots.take(key)
    slots.give(key, round_trip)
    return slots


async def test_a_fast_endpoints_delivery_waits_for_a_slot_and_gets_it_when_one_frees() -> None:
    slots = await taught(EndpointSlots(per_endpoint=1), "fast", FAST)
    assert 0 < slots.wait_bound("fast") <= SLOW_SECONDS
    assert await slots.take("fast")
    waiting = asyncio.create_task(slots.take("fast"))
    await asyncio.sleep(0)
    assert not waiting.done() and slots.full("fast")
    assert slots.give("fast", FAST) is None  # nothing succeeded: nothing handed over in Redis
    assert await waiting == Slot()  # a plain slot: its delivery asks for admission
    assert slots.full("fast")  # the freed slot went to the waiter: one in flight, never two
    slots.give("fast", FAST)
    assert not slots.full("fast")


async def test_a_success_hands_its_slot_to_the_first_delivery_waiting_and_names_it() -> None:
    slots = await taught(EndpointSlots(per_endpoint=1), "fast", FAST)
    assert await slots.take("fast", "a") == Slot()
    first = asyncio.create_task(slots.take("fast", "b"))
    second = asyncio.create_task(slots.take("fast", "c"))
    await asyncio.sleep(0)
    assert slots.give("fast", FAST, succeeded="a") == "b"  # first come, first served
    assert await first == Slot(heir_of="a")  # sent without asking: a's success closed the circuit
    assert not second.done() and slots.full("fast")
    assert slots.give("fast", FAST) is None  # b failed (or was not sent): c gets a plain slot and asks
    assert await second == Slot()
    slots.give("fast", FAST)
    assert not slots.full("fast")


async def test_a_slot_handed_over_reaches_its_waiting_delivery_in_the_next_turn_of_the_loop() -> None:
    """The handover is on a busy endpoint's slot cycle: every turn of the loop it waits is a turn the slot sends
    nothing."""
    slots = await taught(EndpointSlots(per_endpoint=1), "fast", FAST)
    assert await slots.take("fast", "a")
    waiting = asyncio.create_task(slots.take("fast", "b"))
    await asyncio.sleep(0)
    assert slots.give("fast", FAST, succeeded="a") == "b"
    await asyncio.sleep(0)  # one turn: the waiter runs before this task does again
    assert waiting.done() and waiting.result() == Slot(heir_of="a")
    slots.give("fast", FAST)
    assert not slots.full("fast")


async def test_a_delivery_cancelled_as_a_slot_is_handed_to_it_passes_the_slot_on() -> None:
    slots = await taught(EndpointSlots(per_endpoint=1), "fast", FAST)
    assert await slots.take("fast", "a")
    leaving = asyncio.create_task(slots.take("fast", "b"))
    staying = asyncio.create_task(slots.take("fast", "c"))
    await asyncio.sleep(0)
    assert slots.give("fast", FAST) is None  # to b, whose task is cancelled before it runs again
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert await staying == Slot()  # b passed its slot on: c has it, still one in flight
    assert slots.full("fast")
    slots.give("fast", FAST)
    assert not slots.full("fast")


async def test_a_delivery_that_gave_up_waiting_is_not_handed_a_slot() -> None:
    slots = await taught(EndpointSlots(per_endpoint=1), "fast", FAST)
    assert await slots.take("fast", "a")
    impatient = asyncio.create_task(slots.take("fast", "b"))
    await asyncio.sleep(0)
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    patient = asyncio.create_task(slots.take("fast", "c"))
    await asyncio.sleep(0)
    assert slots.give("fast", FAST, succeeded="a") == "c"
    assert await patient == Slot(heir_of="a")
    slots.give("fast", FAST)
    assert not slots.full("fast")


async def test_a_fast_endpoints_delivery_gives_up_once_its_bound_passes() -> None:
    slots = await taught(EndpointSlots(per_endpoint=1), "fast", FAST)
    bound = slots.wait_bound("fast")
    assert await slots.take("fast")
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await slots.take("fast") is None
    assert bound <= loop.time() - started < bound + 1
    assert slots.full("fast")  # still the one attempt in flight


async def test_a_delivery_waiting_on_a_new_endpoint_waits_on_once_the_endpoint_shows_itself_fast() -> None:
    """A burst to an endpoint not heard from yet (a worker starting on a backlog): its waiters begin with the short
    first wait, and keep waiting, as for a fast endpoint, once the first attempt back shows that it is fast."""
    slots = EndpointSlots(per_endpoint=2)
    assert await slots.take("new") and await slots.take("new")  # two first attempts in flight
    assert slots.wait_bound("new") == FIRST_WAIT_SECONDS
    first = asyncio.create_task(slots.take("new", "a"))
    second = asyncio.create_task(slots.take("new", "b"))
    await asyncio.sleep(0)
    slots.give("new", FAST)  # the first attempt is back, fast: its slot goes to "a"
    assert await first == Slot()
    await asyncio.sleep(2 * FIRST_WAIT_SECONDS)  # past the first wait "b" began with
    assert not second.done()  # still waiting: the endpoint is known fast now
    slots.give("new", FAST)
    assert await second == Slot()


async def test_an_operators_delivery_waits_for_a_slot_of_an_endpoint_that_was_slow_and_moves_again() -> None:
    """An endpoint whose past attempts were slow (an outage's timeouts), with its slots moving again: an ordinary
    delivery does not wait for one, an operator's waits as for a fast endpoint; once its slots stop moving,
    neither waits."""
    clock = Clock()
    slots = await taught(EndpointSlots(per_endpoint=1, clock=clock), "back", SLOW)
    assert await slots.take("back")
    assert await slots.take("back", "plain") is None  # the slow mean: no wait at all
    assert slots.patient_bound("back") == SLOW_SECONDS
    waiting = asyncio.create_task(slots.take("back", "operator", patient=True))
    await asyncio.sleep(0)
    slots.give("back", FAST)  # the endpoint answers fast now
    assert await waiting == Slot()
    clock.now += 2 * SLOW_SECONDS  # the slot "operator" holds has not moved since
    assert slots.patient_bound("back") == 0.0
    assert await slots.take("back", "later", patient=True) is None


async def test_a_slow_endpoints_delivery_does_not_wait_at_all() -> None:
    slots = await taught(EndpointSlots(per_endpoint=2), "slow", SLOW)
    assert slots.wait_bound("slow") == 0.0
    for _ in range(2):
        assert await slots.take("slow")
    taking = slots.take("slow")
    with pytest.raises(StopIteration) as finished:
        taking.send(None)  # it returns without ever suspending: no wait at all
    assert finished.value.value is None
    assert slots.full("slow") and not slots.full("other")
    assert await slots.take("other")  # another endpoint is not held up by it


async def test_many_deliveries_to_one_endpoint_never_exceed_its_cap() -> None:
    slots = await taught(EndpointSlots(per_endpoint=3), "hooks", FAST)
    holding = most = sent = 0

    async def deliver() -> bool:
        nonlocal holding, most, sent
        if not await slots.take("hooks"):
            return False
        holding += 1
        most = max(most, holding)
        await asyncio.sleep(FAST)
        holding -= 1
        sent += 1
        slots.give("hooks", FAST)
        return True

    outcomes = await asyncio.gather(*(deliver() for _ in range(60)))
    assert most == 3
    assert outcomes.count(True) == sent >= 3
    assert not slots.full("hooks")


async def test_an_endpoint_whose_busy_slots_have_not_moved_for_a_while_is_not_waited_for() -> None:
    now = [1000.0]
    slots = EndpointSlots(per_endpoint=1, clock=lambda: now[0])
    assert await slots.take("new")  # its first attempt: how long it takes is not known yet
    assert slots.wait_bound("new") == FIRST_WAIT_SECONDS  # a short wait, until it is known
    now[0] += SLOW_SECONDS + 0.1  # ... but no slot freed for longer than that
    assert slots.wait_bound("new") == 0.0
    assert await slots.take("new") is None
    slots.give("new", SLOW_SECONDS + 0.1)
    assert await slots.take("new")  # the freed slot is taken at once
    assert slots.wait_bound("new") == 0.0  # slow on average now, though a slot just moved
    fast = EndpointSlots(per_endpoint=1, clock=lambda: now[0])
    assert await fast.take("fast")
    fast.give("fast", 0.01)
    assert await fast.take("fast")
    assert fast.wait_bound("fast") == SLOW_SECONDS  # known to be fast: worth a longer wait


# ---------------------------------------------------------------- the endpoint's gate


class AllSend:
    """Stands in for the endpoint breakers in Redis: every ask may send; every round trip is kept."""

    def __init__(self, gate: Gate = Gate.SEND) -> None:
        self.gate = gate
        self.trips: list[tuple[list[Result], list[Ask], list[Ask]]] = []

    async def done_then_admit(
        self,
        results: Sequence[Result],
        asks: Sequence[Ask],
        freed: Sequence[Ask] = (),
    ) -> tuple[set[str], list[Admission]]:
        self.trips.append((list(results), list(asks), list(freed)))
        return set(), [Admission(self.gate) for _ in asks]


class Leases:
    """Stands in for the deliveries store: the leases given back, by delivery id."""

    def __init__(self) -> None:
        self.released: list[str] = []

    async def release(self, claimed: list[dict[str, Any]]) -> None:
        self.released += [d["id"] for d in claimed]


def a_delivery(delivery_id: str) -> dict[str, Any]:
    return {"id": delivery_id, "endpoint_id": "gated", "url": "http://127.0.0.1:9/hook"}


async def test_a_success_hands_both_its_slots_to_the_delivery_waiting_so_it_sends_without_asking() -> None:
    breakers, leases = AllSend(), Leases()
    key = breaker_key(a_delivery("a"))
    gate = EndpointGate(await taught(EndpointSlots(per_endpoint=1), key, FAST), breakers, leases)
    first = await gate.enter(a_delivery("a"), operator=False)
    assert isinstance(first, Passage)
    waiting = asyncio.create_task(gate.enter(a_delivery("b"), operator=False))
    await asyncio.sleep(0.01)
    assert not waiting.done()  # one slot: b waits for a's

    assert await gate.leave(first, ok=True) is None
    second = await waiting

    assert isinstance(second, Passage) and second.delivery["id"] == "b"
    assert breakers.trips == [([], [Ask(key, "a", False)], []), ([Result(key, "a", True, "b")], [], [])]
    await gate.abandon(second)  # nothing sent after all: both slots back
    assert breakers.trips[-1] == ([], [], [Ask(key, "b", False)])
    assert not gate.slots.full(key) and leases.released == []


async def test_a_delivery_told_to_wait_gives_back_its_slot_and_its_lease() -> None:
    for said in (Gate.BUSY, Gate.OPEN):
        leases = Leases()
        gate = EndpointGate(EndpointSlots(per_endpoint=1), AllSend(said), leases)
        assert await gate.enter(a_delivery("a"), operator=False) == Admission(said)
        assert leases.released == ["a"] and not gate.slots.full(breaker_key(a_delivery("a")))


# ---------------------------------------------------------------- a busy endpoint's deliveries back off


async def test_a_delivery_that_keeps_finding_its_endpoint_busy_waits_longer_each_time(
    settings: Settings, broker: BrokerProbe
) -> None:
    """Each time a delivery finds its slow endpoint's slots all busy, it goes back through a longer delay tier
    (by default 5 s, 15 s, then 60 s from then on; here 1, 3 and 12 times the tests' shortest retry delay), its
    count on the message; no database work is done for it."""
    await declare(broker.channel, broker.topology)  # this test may run first
    await purge_webhook_queues(broker)
    names, tiers = broker.topology.names, broker.topology.webhook_tiers
    cap = settings.webhook_max_in_flight_per_endpoint
    waits = busy_delays(settings.webhook_retry_delays)
    assert waits == pytest.approx([0.2, 0.6, 2.4])
    async with start_worker(WebhookWorker, settings) as hooks:
        key = str(uuid.uuid4())
        await taught(hooks.gate.slots, key, SLOW)
        for _ in range(cap):
            assert await hooks.gate.slots.take(key)  # attempts in flight to a slow endpoint fill every slot
        exchange = await broker.channel.get_exchange(names.webhooks_exchange)
        seen = []
        for times_busy in range(4):  # as if back from a delay tier this many times
            outgoing = delivery_outgoing(names, str(uuid.uuid4()), None, key)
            headers = {**outgoing.headers, **({BUSY_HEADER: times_busy} if times_busy else {})}
            message = aio_pika.Message(outgoing.body, headers=headers, message_id=outgoing.message_id)
            await exchange.publish(message, routing_key=outgoing.routing_key)
            seen.append(await _waiting_in_a_tier(broker, outgoing.message_id or ""))
    assert seen == [
        (names.webhook_tier_queue(next(t for t in tiers if t.delay == wait)), times)
        for wait, times in zip([*waits, waits[-1]], range(1, 5), strict=True)
    ]


async def _waiting_in_a_tier(broker: BrokerProbe, message_id: str) -> tuple[str, int]:
    """The tier queue a delivery message went to wait in, and the busy count it carries there."""
    names = broker.topology.names
    queues = [names.webhook_tier_queue(tier) for tier in broker.topology.webhook_tiers]
    found: list[tuple[str, int]] = []

    async def arrived() -> bool:
        for queue in queues:
            for message in await broker.take_all(queue):
                assert message.message_id == message_id
                found.append((queue, int((message.headers or {}).get(BUSY_HEADER, 0))))
        return bool(found)

    await wait_for(arrived, within=5)
    assert len(found) == 1
    return found[0]
