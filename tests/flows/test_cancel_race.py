"""A cancel that races with another change of a still-cancellable job reads the job again and cancels it.

No job worker runs here, so every job stays pending or queued until it is cancelled.
"""

import asyncio
from typing import Any

import httpx
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.state import ApiState
from app.core.statuses import JobStatus
from app.models.tables import JOBS
from tests.support import Api, make_job, trail, wait_for, waiting_on_a_row_lock


async def test_cancelling_right_after_submitting_always_cancels(api: Api, db: AsyncEngine) -> None:
    """The submit's pending -> queued confirmation commits in the background just after the answer; a cancel
    sent at once often loses its compare-and-set to it, and used to answer 409 for a job that was queued."""
    headers = await api.new_client("cancel-at-once")

    async def submit_and_cancel() -> tuple[str, httpx.Response]:
        submitted = await api.submit(headers)
        # 202 when the broker's confirm is slow (a loaded machine): the relay then queues it, racing the same way.
        assert submitted.status_code in (201, 202), submitted.text
        job_id: str = submitted.json()["id"]
        return job_id, await api.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=headers)

    results = await asyncio.gather(*(submit_and_cancel() for _ in range(50)))
    answers = [(answer.status_code, answer.json().get("status", answer.text)) for _, answer in results]
    assert answers == [(200, "cancelled")] * 50
    ids = [job_id for job_id, _ in results]
    async with db.connect() as conn:
        statuses = dict((await conn.execute(select(JOBS.c.id, JOBS.c.status).where(JOBS.c.id.in_(ids)))).all())
    assert statuses == dict.fromkeys(ids, "cancelled")
    for job_id in ids:
        events = [e["event"] for e in await trail(api, headers, job_id)]
        # Cancelled from pending (before the confirmation), from queued (after it), or while it waited its turn
        # (50 jobs of one client and no worker: all but its share of the lane): never anything after.
        turns = (["created"], ["created", "queued"], ["created", "queued", "held"])
        assert events in [[*before, "cancelled"] for before in turns], events


async def test_a_cancel_that_loses_its_compare_and_set_to_the_confirmation_reads_again(
    api: Api, db: AsyncEngine
) -> None:
    """Deterministic form of the race: the confirmation's pending -> queued holds the row while the cancel's
    compare-and-set (on the pending row it read) waits for it; once the confirmation commits, the cancel finds
    the row changed, reads it again (queued, still cancellable) and cancels that."""
    headers = await api.new_client("cancel-cas")
    job_id = await _insert(db, client_id="cancel-cas", status="pending")
    state: ApiState = api.app.state.api
    async with db.connect() as confirming:
        transaction = await confirming.begin()
        jobs = state.resources.stores.jobs
        assert len(await jobs.queue_published(confirming, [job_id], [])) == 1  # locked until commit
        cancel = asyncio.create_task(api.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=headers))
        await wait_for(lambda: waiting_on_a_row_lock(db), within=10)
        await transaction.commit()
    answer = await cancel
    assert (answer.status_code, answer.json().get("status")) == (200, "cancelled"), answer.text
    row = await _row(db, job_id)
    assert (row["status"], row["seq"]) == ("cancelled", 2)
    events = await trail(api, headers, job_id)
    assert [(e["event"], e["detail"]["from"]) for e in events] == [("queued", "pending"), ("cancelled", "queued")]


async def test_a_job_that_keeps_changing_while_cancellable_still_ends_cancelled(api: Api, db: AsyncEngine) -> None:
    """Another writer bumps the queued job's seq as fast as it can (a stand-in for any change that leaves it
    cancellable) before and during the cancel: the cancel still ends with the job cancelled, not a 409."""
    headers = await api.new_client("cancel-churn")
    job_id = await _insert(db, client_id="cancel-churn", status="queued")
    bumps = 0
    answered = asyncio.Event()

    async def churn() -> None:
        nonlocal bumps
        async with db.connect() as conn:
            while not answered.is_set():
                async with conn.begin():
                    bumped = await conn.execute(
                        update(JOBS)
                        .where(JOBS.c.id == job_id, JOBS.c.status == JobStatus.QUEUED)
                        .values(seq=JOBS.c.seq + 1)
                    )
                if bumped.rowcount == 0:
                    return  # the cancel won: the job is no longer queued
                bumps += 1
                await asyncio.sleep(0)

    async def churning() -> bool:
        return bumps >= 20

    churner = asyncio.create_task(churn())
    try:
        await wait_for(churning, within=10)
        before = bumps
        answer = await api.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=headers)
    finally:
        answered.set()
        await asyncio.wait_for(churner, timeout=10)
    assert (answer.status_code, answer.json().get("status")) == (200, "cancelled"), answer.text
    assert bumps > before  # the job did change while the cancel was under way
    row = await _row(db, job_id)
    assert (row["status"], row["seq"]) == ("cancelled", bumps + 1)
    events = await trail(api, headers, job_id)
    assert [(e["event"], e["detail"]["from"]) for e in events] == [("cancelled", "queued")]


async def _insert(db: AsyncEngine, **overrides: Any) -> str:
    job = make_job(**overrides)
    async with db.begin() as conn:
        await conn.execute(insert(JOBS), job)
    job_id: str = job["id"]
    return job_id


async def _row(db: AsyncEngine, job_id: str) -> dict[str, Any]:
    async with db.connect() as conn:
        return dict((await conn.execute(select(JOBS).where(JOBS.c.id == job_id))).one()._mapping)
