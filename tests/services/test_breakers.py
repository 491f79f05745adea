"""The breakers: their state machine under the job-type and the endpoint policy, the endpoint side's
batches (one round trip each), and the database rule that disables an endpoint, on PostgreSQL and SQLite and
rendered for MSSQL. Time is a clock the test moves, so nothing waits for a cooldown."""

import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from redis.asyncio import Connection, ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from sqlalchemy import event, insert, select
from sqlalchemy.dialects import mssql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.breaker import BreakerState, Policy
from app.core.names import Names
from app.core.redis_batch import RedisBatch
from app.models.tables import ENDPOINTS
from app.services.endpoint_health import EndpointResult, judge_endpoints
from app.services.job_type_breakers import JobTypeBreakers
from app.stores.endpoints.health import clear_failing, disable, failing_too_long, mark_failing
from app.stores.endpoints.sql import SqlEndpoints
from app.workers.jobs.breakers import BatchedBreakers
from app.workers.webhooks.breakers import (
    ADMIT,
    DONE,
    RELEASE,
    Admission,
    Ask,
    EndpointBreakers,
    Gate,
    Result,
    endpoint_policy,
)
from tests.conftest import NS, REDIS_URL
from tests.support import free_port

NAMES = Names(NS)
COOLDOWN = 10.0
LEASE = 30.0
SEND, PROBE, OPEN, BUSY = Admission(Gate.SEND), Admission(Gate.PROBE), Gate.OPEN, Admission(Gate.BUSY)


class Clock:
    """The breakers' time, moved by the test."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def fresh(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:10]}"


def endpoints(redis: Redis, clock: Clock, failures: int = 3, cap: int = 2) -> EndpointBreakers:
    return EndpointBreakers(redis, NAMES, endpoint_policy(failures, COOLDOWN, LEASE), cap, clock)


def results(key: str, *oks: bool) -> list[Result]:
    return [Result(key, fresh("d"), ok) for ok in oks]


def asks(key: str, n: int) -> list[Ask]:
    return [Ask(key, fresh("d")) for _ in range(n)]


async def opened(guard: EndpointBreakers, key: str) -> None:
    assert await guard.done_many(results(key, False, False, False)) == {key}


# ---------------------------------------------------------------- the endpoint policy


async def test_an_endpoint_opens_after_n_failures_and_not_before(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock), fresh("ep")
    assert await guard.done_many(results(key, False, False)) == set()
    assert await guard.admit_many(asks(key, 1)) == [SEND]
    assert await guard.done_many(results(key, False)) == {key}
    assert [a.gate for a in await guard.admit_many(asks(key, 1))] == [OPEN]
    assert await redis.hget(NAMES.endpoint_breaker_key(key), "opened_at") is not None


async def test_a_success_between_failures_starts_the_count_again(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock), fresh("ep")
    assert await guard.done_many(results(key, False, False, True, False, False)) == set()  # judged in order
    assert await guard.admit_many(asks(key, 1)) == [SEND]
    assert await guard.done_many(results(key, False)) == {key}


async def test_an_open_circuit_says_how_long_is_left(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock), fresh("ep")
    await opened(guard, key)
    clock.advance(4)
    [admission] = await guard.admit_many(asks(key, 1))
    assert admission.gate is OPEN and admission.wait == pytest.approx(COOLDOWN - 4, abs=0.01)
    assert await guard.admit_many(asks(fresh("ep"), 1)) == [SEND]  # another endpoint is not held back


async def test_after_the_cooldown_one_ask_is_the_probe_and_its_success_closes(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock, cap=10), fresh("ep")
    await opened(guard, key)
    clock.advance(COOLDOWN + 0.5)
    batch = asks(key, 4)
    admissions = await guard.admit_many(batch)
    assert [a.gate for a in admissions] == [Gate.PROBE, OPEN, OPEN, OPEN]
    assert {a.wait for a in admissions[1:]} == {COOLDOWN / 10}
    assert [a.gate for a in await guard.admit_many(asks(key, 2))] == [OPEN, OPEN]  # the probe is out
    assert await guard.done_many([Result(key, batch[0].delivery_id, True)]) == set()
    assert await redis.exists(NAMES.endpoint_breaker_key(key)) == 0
    assert await guard.admit_many(asks(key, 2)) == [SEND, SEND]


async def test_a_failed_probe_opens_the_circuit_for_a_fresh_cooldown(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock), fresh("ep")
    await opened(guard, key)
    clock.advance(COOLDOWN + 0.5)
    [probe] = asks(key, 1)
    assert await guard.admit_many([probe]) == [PROBE]
    clock.advance(2)
    assert await guard.done_many([Result(key, probe.delivery_id, False)]) == set()  # open again, not newly
    [admission] = await guard.admit_many(asks(key, 1))
    assert admission.gate is OPEN and admission.wait == pytest.approx(COOLDOWN, abs=0.01)


async def test_a_late_failure_leaves_an_open_circuit_as_it_is_and_a_late_success_closes_it(
    redis: Redis, clock: Clock
) -> None:
    guard, key = endpoints(redis, clock), fresh("ep")
    await opened(guard, key)
    clock.advance(4)
    assert await guard.done_many(results(key, False)) == set()  # sent before it opened: not the probe
    [admission] = await guard.admit_many(asks(key, 1))
    assert admission.wait == pytest.approx(COOLDOWN - 4, abs=0.01)
    assert await guard.done_many(results(key, True)) == set()  # but any success shows the endpoint alive
    assert await guard.admit_many(asks(key, 1)) == [SEND]


# ---------------------------------------------------------------- the in-flight cap


async def test_the_cap_holds_within_a_batch_and_across_batches_until_slots_are_freed(
    redis: Redis, clock: Clock
) -> None:
    guard, key = endpoints(redis, clock, cap=2), fresh("ep")
    first = asks(key, 3)
    assert await guard.admit_many(first) == [SEND, SEND, BUSY]
    waiting = asks(key, 1)
    assert await guard.admit_many(waiting) == [BUSY]
    assert await guard.admit_many(asks(fresh("ep"), 2)) == [SEND, SEND]  # each endpoint has its own cap
    await guard.release_many(first[:1])
    assert await guard.admit_many(waiting) == [SEND]
    assert await guard.admit_many(asks(key, 1)) == [BUSY]
    assert await guard.done_many([Result(key, first[1].delivery_id, True)]) == set()
    assert await guard.admit_many(asks(key, 2)) == [SEND, BUSY]
    clock.advance(LEASE + 1)  # slots whose holder never came back expire with the lease
    assert await guard.admit_many(asks(key, 3)) == [SEND, SEND, BUSY]


async def test_a_success_hands_its_slot_to_its_heir_and_a_failure_frees_it(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock, cap=1), fresh("ep")
    first = asks(key, 1)
    assert await guard.admit_many(first) == [SEND]
    heir, other = fresh("d"), asks(key, 1)
    assert await guard.done_many([Result(key, first[0].delivery_id, True, heir)]) == set()
    assert await guard.admit_many(other) == [BUSY]  # the heir holds the slot now
    members = await redis.zrange(NAMES.endpoint_inflight_key(key), 0, -1)
    assert [m.decode() for m in members] == [heir]
    assert await guard.done_many([Result(key, heir, False, fresh("d"))]) == set()  # a failure hands nothing on
    assert await guard.admit_many(other) == [SEND]


async def test_an_heir_that_sends_nothing_gives_the_handed_slot_back_after_it_was_handed(
    redis: Redis, clock: Clock
) -> None:
    guard, key = endpoints(redis, clock, cap=1), fresh("ep")
    first, heir = asks(key, 1), Ask(key, fresh("d"))
    assert await guard.admit_many(first) == [SEND]
    handed = [Result(key, first[0].delivery_id, True, heir.delivery_id)]
    # One batch: the success hands its slot to the heir, the heir gives it back unused, then a third delivery asks.
    assert await guard.done_then_admit(handed, asks(key, 1), freed=[heir]) == (set(), [SEND])
    assert await guard.admit_many(asks(key, 1)) == [BUSY]  # the third holds the one slot: none leaked, none twice


async def test_a_busy_endpoint_keeps_its_probe_for_an_ask_that_can_send(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock, cap=1), fresh("ep")
    holder = asks(key, 1)
    assert await guard.admit_many(holder) == [SEND]
    await opened(guard, key)
    clock.advance(COOLDOWN + 0.5)
    assert await guard.admit_many(asks(key, 1)) == [BUSY]  # no slot: the probe was not taken
    await guard.release_many(holder)
    assert await guard.admit_many(asks(key, 1)) == [PROBE]


async def test_a_released_probe_can_be_taken_again(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock), fresh("ep")
    await opened(guard, key)
    clock.advance(COOLDOWN + 0.5)
    probe = asks(key, 1)
    assert await guard.admit_many(probe) == [PROBE]
    await guard.release_many(probe)
    assert await guard.admit_many(asks(key, 2)) == [PROBE, Admission(OPEN, COOLDOWN / 10)]


# ---------------------------------------------------------------- operators


async def test_an_operators_attempt_goes_through_an_open_circuit_and_its_success_closes_it(
    redis: Redis, clock: Clock
) -> None:
    guard, key = endpoints(redis, clock), fresh("ep")
    await opened(guard, key)
    operator = Ask(key, fresh("d"), operator=True)
    admissions = await guard.admit_many([operator, *asks(key, 1)])
    assert [a.gate for a in admissions] == [Gate.SEND, OPEN]
    assert await guard.done_many([Result(key, operator.delivery_id, True)]) == set()
    assert await redis.exists(NAMES.endpoint_breaker_key(key)) == 0
    assert await guard.admit_many(asks(key, 1)) == [SEND]


async def test_an_operators_failure_keeps_the_circuit_open_for_a_fresh_cooldown(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock), fresh("ep")
    await opened(guard, key)
    clock.advance(6)
    operator = Ask(key, fresh("d"), operator=True)
    assert await guard.admit_many([operator]) == [SEND]
    assert await guard.done_many([Result(key, operator.delivery_id, False)]) == set()
    [admission] = await guard.admit_many(asks(key, 1))
    assert admission.gate is OPEN and admission.wait == pytest.approx(COOLDOWN, abs=0.01)


async def test_an_operators_attempt_takes_no_slot(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock, cap=1), fresh("ep")
    batch = [Ask(key, fresh("d")), Ask(key, fresh("d"), operator=True), Ask(key, fresh("d"), operator=True)]
    assert await guard.admit_many(batch) == [SEND, SEND, SEND]
    assert await guard.admit_many(asks(key, 1)) == [BUSY]
    assert await redis.zcard(NAMES.endpoint_inflight_key(key)) == 1


# ---------------------------------------------------------------- round trips and a Redis that is down


class CountingConnection(Connection):
    """Counts the writes to Redis: one per command sent alone, one per pipeline."""

    writes = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.writes += 1
        await super().send_packed_command(command, check_health)


async def test_each_batch_costs_one_round_trip(clock: Clock) -> None:
    counted = Redis(connection_pool=ConnectionPool.from_url(REDIS_URL, connection_class=CountingConnection))
    try:
        for script in (ADMIT, DONE, RELEASE):
            await counted.script_load(script)  # so no call below needs a second try after NOSCRIPT
        guard, keys = endpoints(counted, clock, cap=3), [fresh("ep") for _ in range(4)]
        batch = [ask for key in keys for ask in asks(key, 5)]
        for call in (
            lambda: guard.admit_many(batch),
            lambda: guard.done_many([Result(a.key, a.delivery_id, False) for a in batch[:12]]),
            lambda: guard.release_many(batch[12:]),
            lambda: guard.done_then_admit(
                [Result(keys[3], fresh("d"), True)], asks(keys[3], 2), freed=asks(keys[3], 2)
            ),
        ):
            before = CountingConnection.writes
            await call()
            assert CountingConnection.writes - before == 1
        assert await guard.admit_many(asks(keys[0], 1)) == [Admission(OPEN, COOLDOWN)]  # the work was done
    finally:
        await counted.aclose()


async def test_scripts_redis_lost_are_loaded_again_and_each_result_counts_once(redis: Redis, clock: Clock) -> None:
    guard, key = endpoints(redis, clock, failures=2, cap=1), fresh("ep")
    first = asks(key, 1)
    assert await guard.admit_many(first) == [SEND]
    await redis.script_flush()  # as a restart does: Redis forgets every script
    failed = [Result(key, first[0].delivery_id, False)]
    assert await guard.done_then_admit(failed, asks(key, 1)) == (set(), [SEND])  # in order: the slot was freed
    assert await guard.done_many(results(key, False)) == {key}  # the second failure opens it: the first counted once


async def test_the_breakers_fail_open_when_redis_is_down(clock: Clock) -> None:
    down = Redis(port=free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    try:
        guard, key = endpoints(down, clock), fresh("ep")
        assert await guard.admit_many(asks(key, 3)) == [SEND, SEND, SEND]
        assert await guard.done_many(results(key, False, False, False)) == set()
        await guard.release_many(asks(key, 1))
        jobs = job_types(down, clock)
        assert (await jobs.check("echo", take_probe=True)).state is BreakerState.CLOSED
        assert await jobs.record("echo", ok=False, probe=False) is None
    finally:
        await down.aclose()


# ---------------------------------------------------------------- the job-type policy


def job_types(redis: Redis, clock: Clock) -> JobTypeBreakers:
    policy = Policy(failure_rate=0.5, min_calls=4, window_seconds=60, cooldown_seconds=COOLDOWN, probe_seconds=LEASE)
    return JobTypeBreakers(RedisBatch(redis), NAMES, policy, clock)


async def test_a_job_type_opens_at_the_failure_rate_over_enough_calls(redis: Redis, clock: Clock) -> None:
    breakers, healthy, failing = job_types(redis, clock), fresh("jt"), fresh("jt")
    assert await breakers.record_counts(healthy, 4, 1) is BreakerState.CLOSED  # a quarter fail: below the rate
    for ok in (False, True, True):
        assert await breakers.record(failing, ok, probe=False) is BreakerState.CLOSED  # too few calls yet
    assert await breakers.record(failing, False, probe=False) is BreakerState.OPEN
    circuit = await breakers.check(failing)
    assert (circuit.state, circuit.calls, circuit.failures) == (BreakerState.OPEN, 4, 2)
    assert circuit.retry_after == pytest.approx(COOLDOWN, abs=0.01)
    assert (await breakers.check(healthy)).state is BreakerState.CLOSED


async def test_a_job_types_counts_start_afresh_after_the_window(redis: Redis, clock: Clock) -> None:
    breakers, job_type = job_types(redis, clock), fresh("jt")
    assert await breakers.record_counts(job_type, 3, 3) is BreakerState.CLOSED
    clock.advance(61)
    assert (await breakers.check(job_type)).calls == 0
    assert await breakers.record(job_type, False, probe=False) is BreakerState.CLOSED
    circuit = await breakers.check(job_type)
    assert (circuit.state, circuit.calls, circuit.failures) == (BreakerState.CLOSED, 1, 1)


async def test_a_job_type_lets_one_probe_through_and_only_the_probe_decides(redis: Redis, clock: Clock) -> None:
    breakers, job_type = job_types(redis, clock), fresh("jt")
    assert await breakers.record_counts(job_type, 4, 4) is BreakerState.OPEN
    assert (await breakers.check(job_type, take_probe=True)).probe is False  # cooling down
    clock.advance(COOLDOWN + 0.5)
    first, second = [await breakers.check(job_type, take_probe=True) for _ in range(2)]
    assert (first.state, first.probe, second.state, second.probe) == (BreakerState.HALF_OPEN, True, "half_open", False)
    assert await breakers.record_counts(job_type, 5, 0) is BreakerState.OPEN  # not the probe: no say
    assert await breakers.record(job_type, True, probe=True) is BreakerState.CLOSED
    assert await redis.exists(NAMES.job_breaker_key(job_type), NAMES.job_probe_key(job_type)) == 0


async def test_a_job_types_failed_probe_reopens_it_and_a_released_probe_is_free_again(
    redis: Redis, clock: Clock
) -> None:
    breakers, job_type = job_types(redis, clock), fresh("jt")
    await breakers.record_counts(job_type, 4, 4)
    clock.advance(COOLDOWN + 0.5)
    assert (await breakers.check(job_type, take_probe=True)).probe
    await breakers.release_probe(job_type)
    assert (await breakers.check(job_type, take_probe=True)).probe
    clock.advance(3)
    assert await breakers.record(job_type, False, probe=True) is BreakerState.OPEN
    circuit = await breakers.check(job_type, take_probe=True)
    assert (circuit.state, circuit.probe) == (BreakerState.OPEN, False)
    assert circuit.retry_after == pytest.approx(COOLDOWN, abs=0.01)


async def test_the_workers_tally_goes_with_the_failure_that_follows_it(redis: Redis, clock: Clock) -> None:
    breakers, job_type = job_types(redis, clock), fresh("jt")
    batched = BatchedBreakers(breakers)
    assert (await batched.check(job_type)).state is BreakerState.CLOSED
    for ok in (True, False, False, False):  # the success alone would wait for the next flush
        await batched.record(job_type, ok, probe=False)
    circuit = await breakers.check(job_type)
    assert (circuit.state, circuit.calls, circuit.failures) == (BreakerState.OPEN, 4, 3)
    assert (await batched.check(job_type)).state is BreakerState.OPEN  # no longer trusted as closed


# ---------------------------------------------------------------- disabling endpoints in the database

NOW = datetime.now(UTC).replace(microsecond=0)
BOUND = 60.0


async def add_endpoint(engine: AsyncEngine, failing_for: float | None = None, active: bool = True) -> str:
    endpoint_id = str(uuid.uuid4())
    since = None if failing_for is None else NOW - timedelta(seconds=failing_for)
    row = {
        "id": endpoint_id,
        "client_id": "c_breakers",
        "url": "https://example.com/hook",
        "events": ["job.succeeded"],
        "active": active,
        "failing_since": since,
        "secret": "sealed",
        "created_at": NOW,
        "updated_at": NOW,
    }
    async with engine.begin() as conn:
        await conn.execute(insert(ENDPOINTS).values(**row))
    return endpoint_id


async def judge(engine: AsyncEngine, *outcomes: EndpointResult) -> list[tuple[str, str]]:
    async with engine.begin() as conn:
        return await judge_endpoints(SqlEndpoints(engine), conn, outcomes, NOW, BOUND)


async def endpoint(engine: AsyncEngine, endpoint_id: str) -> dict[str, Any]:
    async with engine.connect() as conn:
        return dict((await conn.execute(select(ENDPOINTS).where(ENDPOINTS.c.id == endpoint_id))).one()._mapping)


def stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


async def test_a_410_disables_the_endpoint_with_its_reason(engine: AsyncEngine) -> None:
    gone, already_off = await add_endpoint(engine), await add_endpoint(engine, active=False)
    reason = f"the endpoint answered 410 Gone at {stamp(NOW)}"
    outcomes = [EndpointResult(gone, False, True), EndpointResult(already_off, False, True)]
    assert await judge(engine, *outcomes) == [(gone, reason)]
    row = await endpoint(engine, gone)
    assert (row["active"], row["disabled_reason"], row["failing_since"]) == (False, reason, NOW)
    assert (await endpoint(engine, already_off))["disabled_reason"] is None


async def test_an_endpoint_failing_longer_than_the_bound_is_disabled(engine: AsyncEngine) -> None:
    too_long, not_yet, new = [await add_endpoint(engine, failing_for=f) for f in (BOUND + 1, BOUND - 1, None)]
    since = NOW - timedelta(seconds=BOUND + 1)
    outcomes = [EndpointResult(e, False, False) for e in (new, too_long, not_yet)]
    assert await judge(engine, *outcomes) == [(too_long, f"every attempt failed from {stamp(since)} to {stamp(NOW)}")]
    assert (await endpoint(engine, too_long))["active"] is False
    kept = [await endpoint(engine, e) for e in (not_yet, new)]
    younger = NOW - timedelta(seconds=BOUND - 1)
    assert [(r["active"], r["failing_since"]) for r in kept] == [(True, younger), (True, NOW)]


async def test_an_endpoints_last_result_decides_and_a_success_clears_failing_since(engine: AsyncEngine) -> None:
    recovered, relapsed = await add_endpoint(engine, failing_for=BOUND + 1), await add_endpoint(engine)
    outcomes = [(recovered, False), (relapsed, True), (recovered, True), (relapsed, False)]
    assert await judge(engine, *(EndpointResult(e, ok, False) for e, ok in outcomes)) == []
    assert (await endpoint(engine, recovered))["failing_since"] is None
    assert (await endpoint(engine, relapsed))["failing_since"] == NOW


async def test_one_endpoints_failure_leaves_another_alone(engine: AsyncEngine) -> None:
    failing, healthy, absent = [await add_endpoint(engine, failing_for=BOUND + 1) for _ in range(3)]
    disabled = await judge(engine, EndpointResult(failing, False, False), EndpointResult(healthy, True, False))
    assert [e for e, _ in disabled] == [failing]
    rows = {e: await endpoint(engine, e) for e in (healthy, absent)}
    assert (rows[healthy]["active"], rows[healthy]["failing_since"]) == (True, None)
    assert (rows[absent]["active"], rows[absent]["failing_since"]) == (True, NOW - timedelta(seconds=BOUND + 1))


async def test_an_endpoint_re_enabled_since_it_was_judged_stays_enabled(engine: AsyncEngine) -> None:
    reenabled, gone = await add_endpoint(engine), await add_endpoint(engine)  # neither failing now
    reasons = {reenabled: "every attempt failed", gone: "the endpoint answered 410 Gone"}
    async with engine.begin() as conn:
        disabled = (await conn.execute(disable(reasons, [gone], NOW - timedelta(seconds=BOUND), NOW))).scalars()
        assert list(disabled) == [gone]
    assert (await endpoint(engine, reenabled))["active"] is True


async def test_a_batch_costs_the_same_statements_whatever_its_size(engine: AsyncEngine) -> None:
    statements: list[str] = []

    def seen(*args: Any) -> None:
        statements.append(args[2])

    async def count(n: int) -> int:
        ids = [await add_endpoint(engine, failing_for=BOUND + 1) for _ in range(n)]
        outcomes = [EndpointResult(e, i % 3 == 0, i % 3 == 1) for i, e in enumerate(ids)]  # ok, gone, failing
        statements.clear()
        event.listen(engine.sync_engine, "before_cursor_execute", seen)
        try:
            disabled = await judge(engine, *outcomes)
        finally:
            event.remove(engine.sync_engine, "before_cursor_execute", seen)
        assert len(disabled) == n - len(range(0, n, 3))
        return len([s for s in statements if "webhook_endpoints" in s])

    assert await count(3) == await count(30) == 4


def _mssql(statement: Any) -> str:
    return str(statement.compile(dialect=mssql.dialect(), compile_kwargs={"render_postcompile": True}))


def test_the_endpoint_statements_render_for_mssql() -> None:
    ids = ["a", "b"]
    reasons = {"a": "the endpoint answered 410 Gone", "b": "every attempt failed"}
    disabling = _mssql(disable(reasons, ["a"], NOW, NOW))
    assert "OUTPUT inserted.id" in disabling and "RETURNING" not in disabling
    assert "CASE webhook_endpoints.id" in disabling and "webhook_endpoints.active = 1" in disabling
    assert " IS 1" not in disabling
    for statement in (clear_failing(ids), mark_failing(ids, NOW), failing_too_long(ids, NOW)):
        rendered = _mssql(statement)
        assert re.search(r"webhook_endpoints\.id IN \(:\w+, :\w+\)", rendered) and " IS 1" not in rendered
