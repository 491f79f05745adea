"""Single submits in group commits: concurrent submits share transactions, idempotency stays exact per request,
and a submit that fails in the database fails only its own request."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import event, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.group_commit import GroupCommit
from app.models.tables import JOBS
from app.schemas.job import JOB_REQUEST
from app.services.submit import Draft, new_drafts, plan
from tests.support import Api, make_job, trail, until_status, wait_for


def submits(api: Api) -> GroupCommit[Any, Any]:
    commit: GroupCommit[Any, Any] = api.app.state.api.jobs.submitter.commit
    return commit


async def count_jobs(db: AsyncEngine, client_id: str) -> int:
    async with db.connect() as conn:
        query = select(func.count()).select_from(JOBS).where(JOBS.c.client_id == client_id)
        return int((await conn.execute(query)).scalar_one())


async def forget_key(api: Api, client_id: str, key: str) -> None:
    """Drop a key from Redis, as its TTL would: only the database's unique index still knows it."""
    state = api.app.state.api
    assert await state.resources.redis.delete(state.resources.names.idempotency_key(client_id, key)) == 1


@contextlib.asynccontextmanager
async def jobs_locked(db: AsyncEngine) -> AsyncIterator[None]:
    """Make every INSERT INTO jobs wait (a PostgreSQL table lock), so submits pile up behind one flush."""
    async with db.begin() as conn:
        await conn.execute(text("LOCK TABLE jobs IN SHARE MODE"))
        yield


async def pile_up(
    api: Api,
    db: AsyncEngine,
    headers: dict[str, str],
    bodies: list[dict[str, Any]],
    after_each: Callable[[int], Awaitable[None]] | None = None,
) -> list[httpx.Response]:
    """One submit whose flush a lock holds, and `bodies` submitted one by one while it waits (`after_each` runs
    once each has joined): they flush together. Returns every answer, the holder's first."""
    commit = submits(api)
    async with jobs_locked(db):
        batches = commit.batches
        holder = asyncio.create_task(api.submit(headers, payload={"holder": True}))

        async def flushing() -> bool:
            return commit.batches == batches + 1 and commit.waiting == 0

        await wait_for(flushing, within=10)
        piled: list[asyncio.Task[httpx.Response]] = []
        for index, body in enumerate(bodies):
            piled.append(asyncio.create_task(api.submit(headers, **body)))

            async def joined() -> bool:
                return commit.waiting == len(piled)

            await wait_for(joined, within=10)
            if after_each is not None:
                await after_each(index)
    return [await holder, *[await answer for answer in piled]]


async def test_concurrent_single_submits_share_transactions(api: Api) -> None:
    headers = await api.new_client("grouped")
    commit = submits(api)
    batches, items = commit.batches, commit.items
    engine = api.app.state.api.resources.engine
    sent: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        answers = await asyncio.gather(*(api.submit(headers, payload={"n": n}) for n in range(50)))
        jobs = [answer.json() for answer in answers]
        for job in jobs:
            await until_status(api, headers, job["id"], 10, "queued")
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)
    assert [answer.status_code for answer in answers] == [201] * 50
    assert len({job["id"] for job in jobs}) == 50
    flushes = commit.batches - batches
    assert commit.items - items == 50
    assert flushes < 50  # items > batches: submits shared transactions
    assert sum("INSERT INTO jobs " in s for s in sent) == flushes
    # The confirmations were group-committed too: fewer pending -> queued UPDATEs than submits.
    assert 1 <= sum("UPDATE jobs SET status" in s for s in sent) <= flushes
    assert [e["event"] for e in await trail(api, headers, jobs[0]["id"])] == ["created", "queued"]


async def test_concurrent_singles_with_one_key_make_exactly_one_job(api: Api, db: AsyncEngine) -> None:
    headers = await api.new_client("same-key")
    answers = await asyncio.gather(*(api.submit(headers, idempotency_key="once") for _ in range(20)))
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [200] * 19 + [201], [a.text for a in answers if a.status_code not in (200, 201)]
    assert len({answer.json()["id"] for answer in answers}) == 1
    assert await count_jobs(db, "same-key") == 1


@pytest.mark.parametrize(
    "bodies",
    [
        [{"idempotency_key": "k"}, {"idempotency_key": "k"}],
        [{"unique": {"key": "u"}, "payload": {"n": 1}}, {"unique": {"key": "u"}, "payload": {"n": 2}}],
    ],
    ids=["idempotency-key", "unique-key"],
)
async def test_two_submits_with_one_key_in_one_flush_insert_once(
    api: Api, db: AsyncEngine, bodies: list[dict[str, Any]]
) -> None:
    client_id = "one-flush-" + next(iter(bodies[0]))
    headers = await api.new_client(client_id)
    commit = submits(api)
    batches, items = commit.batches, commit.items
    holder, first, second = await pile_up(api, db, headers, bodies)
    assert (holder.status_code, first.status_code, second.status_code) == (201, 201, 200)
    assert second.json()["id"] == first.json()["id"] and second.json()["payload"] == first.json()["payload"]
    assert (commit.batches - batches, commit.items - items) == (2, 3)  # the holder, then both together
    assert await count_jobs(db, client_id) == 2


async def test_a_submit_without_a_unique_key_sends_no_statement_for_one(api: Api) -> None:
    headers = await api.new_client("not-unique")
    engine = api.app.state.api.resources.engine
    sent: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    await api.submit(headers)  # the first submit's one-off reads (its key, the client) are not counted
    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        plain = await api.submit(headers, payload={"n": 2})
        unique = await api.submit(headers, payload={"n": 3}, unique={"key": "u"})
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)
    assert (plain.status_code, unique.status_code) == (201, 201)
    looks = [s for s in sent if "unique_live IN" in s]
    assert len(looks) == 1, sent  # the keyed submit's look for a holder; the plain one sent none


async def test_a_key_for_another_request_in_the_same_flush_is_409_for_that_submit_only(
    api: Api, db: AsyncEngine
) -> None:
    headers = await api.new_client("flush-conflict")
    commit = submits(api)
    batches = commit.batches

    async def forget_the_first(index: int) -> None:
        if index == 0:
            await forget_key(api, "flush-conflict", "k")  # so Redis cannot tell the second submit apart

    bodies = [{"idempotency_key": "k", "payload": {"n": 1}}, {"idempotency_key": "k", "payload": {"n": 2}}]
    answers = await pile_up(api, db, headers, bodies, forget_the_first)
    assert [a.status_code for a in answers] == [201, 201, 409]
    assert answers[2].json()["code"] == "idempotency_conflict"
    assert commit.batches - batches == 2  # decided inside the flush: no failed batch, no retries
    assert await count_jobs(db, "flush-conflict") == 2


async def test_a_submit_that_fails_in_the_database_fails_only_its_own_request(api: Api, db: AsyncEngine) -> None:
    headers = await api.new_client("db-net")
    for key, n in (("old-a", 1), ("old-b", 2)):
        assert (await api.submit(headers, idempotency_key=key, payload={"n": n})).status_code == 201
        await forget_key(api, "db-net", key)
    commit = submits(api)
    batches, items = commit.batches, commit.items
    bodies = [
        {"payload": {"n": 3}},
        {"idempotency_key": "old-a", "payload": {"n": 99}},  # another request under an old key
        {"idempotency_key": "old-b", "payload": {"n": 2}},  # the same request under an old key
    ]
    holder, fresh, conflict, repeat = await pile_up(api, db, headers, bodies)
    assert [a.status_code for a in (holder, fresh, conflict, repeat)] == [201, 201, 409, 200]
    assert conflict.json()["code"] == "idempotency_conflict"
    # The holder; the three together, which the unique index failed; then each of them alone.
    assert (commit.batches - batches, commit.items - items) == (5, 7)
    assert await count_jobs(db, "db-net") == 4
    await until_status(api, headers, fresh.json()["id"], 10, "queued")


def test_the_plan_of_a_flush_gives_each_key_to_its_first_request() -> None:
    def draft(client: str, key: str | None, digest: str) -> Draft:
        job = make_job(client_id=client, idempotency_key=key, request_hash=digest)
        return Draft(0, job, None)  # type: ignore[arg-type]

    first, same, other, elsewhere, keyless = (
        draft("a", "k", "d1"),
        draft("a", "k", "d1"),
        draft("a", "k", "d2"),
        draft("b", "k", "d2"),
        draft("a", None, "d3"),
    )
    filed = plan([[first], [same], [other], [elsewhere], [keyless]])
    assert [f.inserted for f in filed] == [[first], [], [], [elsewhere], [keyless]]
    assert filed[1].repeats == {0: first.job}
    assert filed[2].conflict is other and filed[2].inserted == []


def test_the_plan_of_a_flush_gives_each_unique_key_to_its_first_request_whatever_the_others_ask() -> None:
    def draft(client: str, unique: str | None, digest: str, key: str | None = None) -> Draft:
        job = make_job(client_id=client, unique_live=unique, request_hash=digest, idempotency_key=key)
        return Draft(0, job, None)  # type: ignore[arg-type]

    first, other, keyed, elsewhere, plain = (
        draft("a", "u", "d1"),
        draft("a", "u", "d2"),
        draft("a", "u", "d3", key="i"),
        draft("b", "u", "d2"),
        draft("a", None, "d2"),
    )
    filed = plan([[first], [other], [keyed], [elsewhere], [plain]])
    assert [f.inserted for f in filed] == [[first], [], [], [elsewhere], [plain]]
    assert filed[1].repeats == filed[2].repeats == {0: first.job}
    assert all(f.conflict is None for f in filed)


async def test_a_request_that_leaves_while_its_flush_publishes_leaves_the_others_their_answer(api: Api) -> None:
    """Requests of one flush wait for the same publish; one that goes away (its client hung up) takes only its own
    wait with it: the publish goes on, and the others get its confirms."""
    state = api.app.state.api
    submitter = state.jobs.submitter
    requests = [JOB_REQUEST.validate_python({"job_type": "echo", "payload": {"n": n}}) for n in range(3)]
    drafts = [new_drafts(state.resources.names, "leaving-client", [request], None) for request in requests]
    filed = await asyncio.gather(*(submitter.file(one) for one in drafts))
    waits = [asyncio.create_task(one.published()) for one in filed]
    await asyncio.sleep(0)  # every request waiting
    assert not any(wait.done() for wait in waits)
    waits[0].cancel()
    answers = await asyncio.gather(*waits, return_exceptions=True)
    assert isinstance(answers[0], asyncio.CancelledError)
    for one, answer in zip(filed[1:], answers[1:], strict=True):
        assert isinstance(answer, dict)
        assert answer[one.inserted[0].job["id"]] is True  # confirmed by the broker
