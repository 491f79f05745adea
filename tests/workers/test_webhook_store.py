"""The deliveries store (app/stores/deliveries/) on PostgreSQL and SQLite, and its portable
statements rendered for MSSQL: fan out, claim by lease, record, release and abandon, each for a whole batch."""

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.dialects import mssql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.backoff import Tier
from app.core.messages import JobEvent, delivery_id, event_id, job_event
from app.core.names import Names
from app.core.secret_box import SecretBox
from app.core.signing import new_secret
from app.models.tables import ATTEMPTS, CLIENT_SECRETS, DELIVERIES, ENDPOINTS, JOB_EVENTS, JOBS, OUTBOX
from app.stores.deliveries import CALLBACK, Attempt, DeliveryStore, Recording
from app.stores.deliveries.portable import ROWS_PER_INSERT
from app.stores.deliveries.statements import CLAIM, recorded_update, released, reset_for_redelivery
from app.stores.outbox import Pending
from app.workers.retry_policy import DeadLetter, Retry
from app.workers.verdicts import Defer, Drop
from app.workers.webhooks.batches import DeliveryBatches
from app.workers.webhooks.claims import Claim, Send, claim
from app.workers.webhooks.outcomes import EndpointHealth, recording
from tests.conftest import NS, TEST_SETTINGS
from tests.support import make_job, statements, stores_for

LEASE = 30.0
BOX = SecretBox(TEST_SETTINGS["secret_encryption_key"])
Event = tuple[dict[str, Any], bytes, str | None]


def store(engine: AsyncEngine) -> DeliveryStore:
    return stores_for(engine, Names(NS), BOX).deliveries


def health(engine: AsyncEngine) -> EndpointHealth:
    return EndpointHealth(stores_for(engine, Names(NS), BOX).endpoints, disable_after_seconds=3600)


async def claims(engine: AsyncEngine, ids: list[str]) -> list[Claim]:
    """What one claim batch of the webhook worker decides for these deliveries' messages, in their order."""
    return await claim(store(engine), ids, LEASE)


async def record(engine: AsyncEngine, batch: list[Recording]) -> list[bool]:
    """Record a batch of attempts as the webhook worker does, its endpoints judged."""
    return await store(engine).record(batch, health(engine))


def a_client() -> str:
    return "hooks-" + uuid.uuid4().hex[:10]


async def an_endpoint(engine: AsyncEngine, client_id: str, secret: str, **overrides: Any) -> str:
    """An active endpoint of the client for job.succeeded; nothing is ever sent to its URL."""
    now = datetime.now(UTC)
    row = {
        "id": str(uuid.uuid4()),
        "client_id": client_id,
        "url": "http://127.0.0.1:9/hook",
        "events": ["job.succeeded"],
        "active": True,
        "secret": BOX.seal(secret),
        "created_at": now,
        "updated_at": now,
        **overrides,
    }
    async with engine.begin() as conn:
        await conn.execute(insert(ENDPOINTS).values(**row))
    return str(row["id"])


async def finished(engine: AsyncEngine, client_id: str, **overrides: Any) -> Event:
    """A succeeded job of the client, with its job.succeeded event as the fan-out consumes it."""
    now = datetime.now(UTC)
    job = make_job(now, client_id=client_id, status="succeeded", seq=3, finished_at=now, **overrides)
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), [job])
    body = job_event(Names(NS), job, now).body
    return JobEvent.from_bytes(body), body, None


async def forget(engine: AsyncEngine, staged: list[list[Pending]]) -> None:
    """Drop the staged delivery messages: the test claims by id, and no relay of a later test is to send them."""
    async with engine.begin() as conn:
        await conn.execute(delete(OUTBOX).where(OUTBOX.c.id.in_([p.id for one in staged for p in one])))


async def fanned(engine: AsyncEngine, events: list[Event]) -> list[str]:
    """Fan the events out; the staged delivery ids, in order."""
    staged = await store(engine).fan_out(events)
    await forget(engine, staged)
    return [p.message.message_id or "" for one in staged for p in one]


async def sends(engine: AsyncEngine, ids: list[str]) -> list[Send]:
    verdicts = await claims(engine, ids)
    assert all(isinstance(v, Send) for v in verdicts), verdicts
    return [v for v in verdicts if isinstance(v, Send)]


async def deliveries(engine: AsyncEngine, ids: list[str]) -> dict[str, dict[str, Any]]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(DELIVERIES).where(DELIVERIES.c.id.in_(ids)))
        return {row.id: dict(row._mapping) for row in rows}


async def attempts(engine: AsyncEngine, ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    query = select(ATTEMPTS).where(ATTEMPTS.c.delivery_id.in_(ids)).order_by(ATTEMPTS.c.id)
    async with engine.connect() as conn:
        for row in await conn.execute(query):
            found.setdefault(row.delivery_id, []).append(dict(row._mapping))
    return found


async def trail(engine: AsyncEngine, job_id: str) -> list[tuple[str, dict[str, Any]]]:
    query = select(JOB_EVENTS.c.event, JOB_EVENTS.c.detail).where(JOB_EVENTS.c.job_id == job_id)
    async with engine.connect() as conn:
        return [(event, detail) for event, detail in await conn.execute(query.order_by(JOB_EVENTS.c.id))]


async def endpoint(engine: AsyncEngine, endpoint_id: str) -> dict[str, Any]:
    async with engine.connect() as conn:
        return dict((await conn.execute(select(ENDPOINTS).where(ENDPOINTS.c.id == endpoint_id))).one()._mapping)


def answered(status_code: int, body: str = "ok", error: str | None = None) -> Attempt:
    return Attempt(status_code, 4.0, error, body)


# ---------------------------------------------------------------- fan-out


async def test_fan_out_makes_one_delivery_per_endpoint_and_callback_however_often_an_event_comes(
    engine: AsyncEngine,
) -> None:
    client_id = a_client()
    endpoint_id = await an_endpoint(engine, client_id, new_secret())
    plain = await finished(engine, client_id)
    called = await finished(engine, client_id, callback_url="http://127.0.0.1:9/callback")
    plain_id, called_id = plain[0].id, called[0].id
    wanted_ids = [delivery_id(e, t) for e in (plain_id, called_id) for t in (endpoint_id, CALLBACK)]

    staged = await store(engine).fan_out([plain, called, plain])  # the first event twice in one batch
    await forget(engine, staged)
    assert [len(one) for one in staged] == [1, 2, 0]
    assert await store(engine).fan_out([called, plain]) == [[], []]  # published again: nothing new (rule 10)
    async with engine.connect() as conn:  # and no message staged for it either
        left = (await conn.execute(select(OUTBOX.c.message_id).where(OUTBOX.c.message_id.in_(wanted_ids)))).all()
    assert left == []

    wanted = {
        delivery_id(plain_id, endpoint_id): (plain_id, endpoint_id, "http://127.0.0.1:9/hook"),
        delivery_id(called_id, endpoint_id): (called_id, endpoint_id, "http://127.0.0.1:9/hook"),
        delivery_id(called_id, CALLBACK): (called_id, None, "http://127.0.0.1:9/callback"),
    }
    assert {p.message.message_id for one in staged for p in one} == set(wanted)
    async with engine.connect() as conn:
        rows = (await conn.execute(select(DELIVERIES).where(DELIVERIES.c.client_id == client_id))).all()
    assert {r.id: (r.event_id, r.endpoint_id, r.url) for r in rows} == wanted
    assert {(r.status, r.attempt_count, r.budget_used, r.event_type) for r in rows} == {
        ("pending", 0, 0, "job.succeeded")
    }
    assert {r.job_id for r in rows if r.event_id == called_id} == {called[0].job["id"]}
    assert plain_id == event_id(plain[0].job["id"], 3)


# ---------------------------------------------------------------- claim


async def test_a_claim_leases_each_delivery_once_and_opens_its_secrets(engine: AsyncEngine) -> None:
    client_id = a_client()
    current, previous = new_secret(), new_secret()
    rotated = {"previous_secret": BOX.seal(previous), "previous_expires_at": datetime.now(UTC) + timedelta(hours=1)}
    endpoint_id = await an_endpoint(engine, client_id, current, **rotated)
    by_endpoint, by_callback = await fanned(
        engine, [await finished(engine, client_id, callback_url="http://127.0.0.1:9/callback")]
    )
    before = datetime.now(UTC)

    verdicts = await claims(engine, [by_endpoint, by_callback, "msg_no_such_delivery", by_endpoint])

    first, second, unknown, again = verdicts
    assert isinstance(first, Send) and isinstance(second, Send)
    assert first.secrets == [current, previous]  # newest first, the rotated one while it has not expired
    async with engine.connect() as conn:
        sealed = (
            await conn.execute(select(CLIENT_SECRETS.c.secret).where(CLIENT_SECRETS.c.client_id == client_id))
        ).scalar_one()
    assert second.secrets == [BOX.open(sealed)]  # a callback is signed with the client's own secret
    assert (first.delivery["endpoint_id"], second.delivery["endpoint_id"]) == (endpoint_id, None)
    assert first.failing is False
    lease = first.delivery["lease_until"]
    assert before + timedelta(seconds=LEASE) <= lease <= datetime.now(UTC) + timedelta(seconds=LEASE)
    assert unknown == Drop("no such delivery")
    assert again == Defer(LEASE, in_flight=True)  # the same delivery twice in one batch: the first one sends
    assert (await deliveries(engine, [by_endpoint]))[by_endpoint]["lease_until"] == lease

    leased = await claims(engine, [by_endpoint, by_callback, "msg_no_such_delivery"])
    assert [type(v) for v in leased] == [Defer, Defer, Drop]
    assert all(LEASE - 5 < v.seconds <= LEASE for v in leased if isinstance(v, Defer))  # until the lease ends
    assert [v.in_flight for v in leased if isinstance(v, Defer)] == [True, True]  # due, and being attempted


# ---------------------------------------------------------------- record


async def test_a_record_batch_logs_a_success_a_retry_and_a_dead_letter(engine: AsyncEngine) -> None:
    client_id = a_client()
    endpoint_id = await an_endpoint(engine, client_id, new_secret())
    events = [await finished(engine, client_id) for _ in range(3)]
    ids = await fanned(engine, events)
    ok, retried, dead = await sends(engine, ids)
    next_at = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    before = datetime.now(UTC)

    recorded = await record(
        engine,
        [
            recording(ok, answered(200), None),
            recording(retried, answered(503), Retry(Tier(1, 0.2), 200, next_at)),
            recording(dead, answered(500, error="HTTP 500"), DeadLetter("retries_exhausted")),
        ],
    )

    assert recorded == [True, True, True]
    rows = await deliveries(engine, ids)
    assert [
        (rows[i]["status"], rows[i]["attempt_count"], rows[i]["budget_used"], rows[i]["next_attempt_at"]) for i in ids
    ] == [("succeeded", 1, 1, None), ("pending", 1, 1, next_at), ("failed", 1, 1, None)]
    assert [rows[i]["lease_until"] for i in ids] == [None, None, None]
    logged = await attempts(engine, ids)
    assert [[(a["attempt"], a["status_code"], a["next_attempt_at"]) for a in logged[i]] for i in ids] == [
        [(1, 200, None)],
        [(1, 503, next_at)],
        [(1, 500, None)],
    ]
    assert logged[dead.delivery["id"]][0]["error"] == "HTTP 500"
    outcomes = []
    for send in (ok, retried, dead):
        [(event, detail)] = await trail(engine, send.delivery["job_id"])
        assert event == "delivery"
        assert (detail["delivery_id"], detail["webhook_id"], detail["attempt"]) == (send.delivery["id"], endpoint_id, 1)
        outcomes.append((detail["outcome"], detail["status_code"]))
    assert outcomes == [("succeeded", 200), ("retrying", 503), ("failed", 500)]
    failing_since = (await endpoint(engine, endpoint_id))["failing_since"]
    assert before <= failing_since <= datetime.now(UTC)  # the batch's last result at the endpoint was a failure


async def test_a_record_fenced_out_by_a_newer_claim_returns_false_and_writes_nothing(engine: AsyncEngine) -> None:
    client_id = a_client()
    await an_endpoint(engine, client_id, new_secret())
    [the_id] = await fanned(engine, [await finished(engine, client_id)])
    [late] = await sends(engine, [the_id])
    async with engine.begin() as conn:  # its worker stalled past the lease
        past = datetime.now(UTC) - timedelta(seconds=1)
        await conn.execute(update(DELIVERIES).where(DELIVERIES.c.id == the_id).values(lease_until=past))
    [newer] = await sends(engine, [the_id])
    assert await record(engine, [recording(newer, answered(200), None)]) == [True]

    assert await record(engine, [recording(late, answered(500), DeadLetter("retries_exhausted"))]) == [False]

    row = (await deliveries(engine, [the_id]))[the_id]
    assert (row["status"], row["attempt_count"], row["budget_used"]) == ("succeeded", 1, 1)
    assert [(a["attempt"], a["status_code"]) for a in (await attempts(engine, [the_id]))[the_id]] == [(1, 200)]
    assert [detail["status_code"] for _, detail in await trail(engine, late.delivery["job_id"])] == [200]


async def test_a_success_fenced_out_by_a_newer_claim_writes_no_attempt_and_no_audit_row(engine: AsyncEngine) -> None:
    """A batch of successes at healthy endpoints is one statement on PostgreSQL: its fencing holds there too."""
    client_id = a_client()
    await an_endpoint(engine, client_id, new_secret())
    first, second = await fanned(engine, [await finished(engine, client_id), await finished(engine, client_id)])
    [late, other] = await sends(engine, [first, second])
    async with engine.begin() as conn:  # the first one's worker stalled past the lease; another took it over
        past = datetime.now(UTC) - timedelta(seconds=1)
        await conn.execute(update(DELIVERIES).where(DELIVERIES.c.id == first).values(lease_until=past))
    [newer] = await sends(engine, [first])
    assert await record(engine, [recording(newer, answered(201), None)]) == [True]

    recorded = await record(engine, [recording(late, answered(200), None), recording(other, answered(200), None)])

    assert recorded == [False, True]
    logged = await attempts(engine, [first, second])
    assert [(a["attempt"], a["status_code"]) for a in logged[first]] == [(1, 201)]
    assert [(a["attempt"], a["status_code"]) for a in logged[second]] == [(1, 200)]
    assert [detail["status_code"] for _, detail in await trail(engine, late.delivery["job_id"])] == [201]
    assert [detail["status_code"] for _, detail in await trail(engine, other.delivery["job_id"])] == [200]


async def test_a_redelivery_while_attempts_are_in_flight_is_not_undone_by_their_records(engine: AsyncEngine) -> None:
    """An operator's redelivery resets a delivery while a worker is attempting it: the attempt is still counted
    and logged, but its outcome does not push the next attempt out or spend the fresh budget, unless it
    succeeded (the receiver has it). The success goes through the one-statement record on PostgreSQL, the failure
    through the one that judges its endpoint; SQLite takes the portable statement."""
    client_id = a_client()
    await an_endpoint(engine, client_id, new_secret())
    first, second = await fanned(engine, [await finished(engine, client_id), await finished(engine, client_id)])
    succeeding, failing = await sends(engine, [first, second])
    async with engine.begin() as conn:
        for the_id in (first, second):
            await conn.execute(reset_for_redelivery(the_id))
    later = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)

    assert await record(engine, [recording(succeeding, answered(200), None)]) == [True]
    assert await record(
        engine, [recording(failing, answered(500, error="HTTP 500"), Retry(Tier(1, 0.2), 200, later))]
    ) == [True]

    rows = await deliveries(engine, [first, second])
    assert [
        (rows[i]["status"], rows[i]["attempt_count"], rows[i]["budget_used"], rows[i]["next_attempt_at"])
        for i in (first, second)
    ] == [("succeeded", 1, 0, None), ("pending", 1, 0, None)]
    assert [rows[i]["lease_until"] for i in (first, second)] == [None, None]
    logged = await attempts(engine, [first, second])
    assert [[(a["attempt"], a["status_code"]) for a in logged[i]] for i in (first, second)] == [[(1, 200)], [(1, 500)]]
    [next_claim] = await sends(engine, [second])  # the operator's message finds it due at once
    assert next_claim.delivery["attempt_count"] == 1
    assert await record(
        engine, [recording(next_claim, answered(500, error="HTTP 500"), Retry(Tier(1, 0.2), 200, later))]
    ) == [True]
    [not_due] = await claims(engine, [second])  # a second copy of the operator's message, after its attempt
    assert isinstance(not_due, Defer) and not not_due.in_flight and not_due.seconds > 3600


async def test_a_response_body_with_nul_characters_is_recorded_with_them_replaced(engine: AsyncEngine) -> None:
    client_id = a_client()
    await an_endpoint(engine, client_id, new_secret())
    [the_id] = await fanned(engine, [await finished(engine, client_id)])
    [send] = await sends(engine, [the_id])
    retry = Retry(Tier(1, 0.2), 200, datetime.now(UTC) + timedelta(minutes=1))

    odd = Attempt(502, 4.0, "bad\x00gateway", "head\x00tail")
    assert await record(engine, [recording(send, odd, retry)]) == [True]

    [logged] = (await attempts(engine, [the_id]))[the_id]
    assert (logged["response_body"], logged["error"]) == ("head\ufffdtail", "bad\ufffdgateway")


# ---------------------------------------------------------------- release and abandon


async def test_release_gives_the_lease_back_only_where_the_claim_still_holds(engine: AsyncEngine) -> None:
    client_id = a_client()
    await an_endpoint(engine, client_id, new_secret())
    [the_id] = await fanned(engine, [await finished(engine, client_id)])
    [first] = await sends(engine, [the_id])

    await store(engine).release([first.delivery])

    assert (await deliveries(engine, [the_id]))[the_id]["lease_until"] is None
    [second] = await sends(engine, [the_id])  # claimable again at once
    due = datetime.now(UTC) - timedelta(seconds=1)  # a retry already due, so the next claim takes it
    retry = Retry(Tier(1, 0.2), 200, due)
    assert await record(engine, [recording(second, answered(503), retry)]) == [True]
    [third] = await sends(engine, [the_id])
    assert third.delivery["attempt_count"] == 1

    await store(engine).release([second.delivery])  # a stale claim: the newer lease stays

    assert (await deliveries(engine, [the_id]))[the_id]["lease_until"] == third.delivery["lease_until"]
    assert [type(v) for v in await claims(engine, [the_id])] == [Defer]


async def test_abandon_fails_the_deliveries_and_writes_their_audit_rows(engine: AsyncEngine) -> None:
    client_id = a_client()
    await an_endpoint(engine, client_id, new_secret())
    ids = await fanned(engine, [await finished(engine, client_id) for _ in range(2)])
    claimed = await sends(engine, ids)

    await store(engine).abandon([s.delivery for s in claimed], "the endpoint is disabled")

    rows = await deliveries(engine, ids)
    assert [(rows[i]["status"], rows[i]["lease_until"], rows[i]["attempt_count"]) for i in ids] == [
        ("failed", None, 0),
        ("failed", None, 0),
    ]
    assert await attempts(engine, ids) == {}
    for send in claimed:
        assert await trail(engine, send.delivery["job_id"]) == [
            ("delivery", {"delivery_id": send.delivery["id"], "outcome": "failed", "error": "the endpoint is disabled"})
        ]


# ---------------------------------------------------------------- the endpoint's row


async def test_a_success_at_a_failing_endpoint_clears_its_failing_since(engine: AsyncEngine) -> None:
    client_id = a_client()
    since = datetime.now(UTC) - timedelta(minutes=5)
    endpoint_id = await an_endpoint(engine, client_id, new_secret(), failing_since=since)
    assert (await endpoint(engine, endpoint_id))["failing_since"] == since
    [the_id] = await fanned(engine, [await finished(engine, client_id)])
    [send] = await sends(engine, [the_id])
    assert send.failing is True

    assert await record(engine, [recording(send, answered(204), None)]) == [True]

    after = await endpoint(engine, endpoint_id)
    assert (after["failing_since"], after["active"]) == (None, True)


async def test_a_success_at_a_healthy_endpoint_leaves_its_row_untouched(engine: AsyncEngine) -> None:
    client_id = a_client()
    endpoint_id = await an_endpoint(engine, client_id, new_secret())
    before = await endpoint(engine, endpoint_id)
    [the_id] = await fanned(engine, [await finished(engine, client_id)])
    [send] = await sends(engine, [the_id])
    assert send.failing is False

    with statements(engine) as sent:
        assert await record(engine, [recording(send, answered(200), None)]) == [True]

    assert sent and not [sql for sql in sent if "webhook_endpoints" in sql]  # not even a no-op UPDATE
    after = await endpoint(engine, endpoint_id)
    assert after == before and after["updated_at"] == before["updated_at"]
    assert (await deliveries(engine, [the_id]))[the_id]["status"] == "succeeded"  # recorded all the same


# ---------------------------------------------------------------- MSSQL, rendered

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
BOOLEAN_IS = re.compile(r"\bIS\s+(NOT\s+)?(1|0|true|false)\b", re.IGNORECASE)


def _mssql(statement: Any) -> str:
    return str(statement.compile(dialect=mssql.dialect(), compile_kwargs={"render_postcompile": True}))


def _mssql_params(statement: Any) -> dict[str, Any]:
    return dict(statement.compile(dialect=mssql.dialect(), compile_kwargs={"render_postcompile": True}).params)


def claimed_row(attempt_count: int, updated_at: datetime = NOW) -> dict[str, Any]:
    delivery = {"id": "msg_" + uuid.uuid4().hex, "attempt_count": attempt_count, "updated_at": updated_at}
    return {**delivery, "job_id": None, "endpoint_id": None}


def test_the_claim_renders_for_mssql_with_output_instead_of_returning() -> None:
    # Its values are bound at execution, so the IN list is expanded the way execution does, not by rendering.
    expanded = CLAIM.compile(dialect=mssql.dialect()).construct_expanded_state(
        {"ids": ["msg_a", "msg_b"], "now": NOW, "lease": NOW}
    )
    claim = expanded.statement
    assert "OUTPUT inserted.id, inserted.event_id" in claim and "RETURNING" not in claim
    assert "deliveries.id IN (:ids_1, :ids_2)" in claim
    assert expanded.parameters == {"ids_1": "msg_a", "ids_2": "msg_b", "now": NOW, "lease": NOW, "status_1": "pending"}
    assert "deliveries.lease_until IS NULL OR deliveries.lease_until <" in claim
    assert not BOOLEAN_IS.search(claim), claim


def test_the_record_and_release_statements_render_for_mssql() -> None:
    ok, retried = claimed_row(0), claimed_row(2)
    plans = {
        ok["id"]: recording(Send(ok, []), answered(200), None),
        retried["id"]: recording(Send(retried, []), answered(503), Retry(Tier(1, 0.2), 200, NOW)),
    }
    record = _mssql(recorded_update(plans, NOW))
    assert "OUTPUT inserted.id WHERE" in record and "RETURNING" not in record
    assert record.count("CASE deliveries.id") == 4  # the per-row status, budget, next attempt and fencing count
    # A retry keeps an operator's reset made while it was in flight (the row's updated_at moved since the claim);
    # a success does not ask.
    assert record.count("CASE WHEN (deliveries.updated_at = ") == 4
    assert "attempt_count=(deliveries.attempt_count + :attempt_count_1)" in record
    assert "deliveries.attempt_count = CASE deliveries.id WHEN :param_15 THEN :param_16" in record
    assert not BOOLEAN_IS.search(record), record
    values = _mssql_params(recorded_update(plans, NOW))
    assert [values[f"param_{n}"] for n in range(1, 19)] == [
        *(ok["id"], "succeeded", retried["id"], NOW, "pending"),
        *(ok["id"], NOW, retried["id"], NOW),
        *(ok["id"], None, retried["id"], NOW, NOW),
        *(ok["id"], 0, retried["id"], 2),
    ]
    assert (values["lease_until"], values["updated_at"]) == (None, NOW)
    retries = [claimed_row(1) for _ in range(DeliveryBatches.max_batch)]
    full = {d["id"]: recording(Send(d, []), answered(503), Retry(Tier(1, 0.2), 200, NOW)) for d in retries}
    assert len(_mssql_params(recorded_update(full, NOW))) < 2100  # a whole record batch in one MSSQL statement

    release = _mssql(released([ok, retried]))
    assert release.startswith("UPDATE deliveries SET lease_until=:lease_until WHERE deliveries.id IN (")
    assert "deliveries.attempt_count = CASE deliveries.id" in release
    assert "OUTPUT" not in release and "RETURNING" not in release
    assert not BOOLEAN_IS.search(release), release
    assert _mssql_params(released([ok, retried]))["lease_until"] is None


def test_a_chunk_of_the_delivery_insert_stays_under_mssqls_2100_parameters() -> None:
    # Every column of the table: no staged row can be wider, so no chunk can need more parameters.
    row = {column.name: None for column in DELIVERIES.c}
    chunk = insert(DELIVERIES).values([dict(row, id=f"msg_{n}") for n in range(ROWS_PER_INSERT)])
    compiled = chunk.compile(dialect=mssql.dialect())
    assert len(compiled.params) == ROWS_PER_INSERT * len(DELIVERIES.c) < 2100
    assert str(compiled).count("), (") == ROWS_PER_INSERT - 1  # one statement for the whole chunk
