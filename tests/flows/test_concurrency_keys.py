"""A concurrency key across worker processes, one of them killed with SIGKILL midway: its runs never overlap more
than the key's limit, every job succeeds once, and no slot or hold is left on the key once they are done (the
dead worker's slots free as its leases run out). A rate key of 10 a second over 100 jobs: no more than 10 start
in any second, none fails."""

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import JOBS
from tests.api.test_flow_control import most_at_once, runs_of
from tests.conftest import make_settings, settings_env
from tests.support import Api, app_process, trail, until_status, wait_for

pytestmark = pytest.mark.slow

JOBS_N = 200
LIMIT = 3


async def test_a_keys_limit_holds_across_two_workers_one_killed_midway(
    api: Api, db: AsyncEngine, tmp_path: Path
) -> None:
    headers = await api.new_client("flow-kill")
    item = {"job_type": "sleep", "payload": {"seconds": 0.02}, "concurrency": {"key": "export", "limit": LIMIT}}
    answer = await api.client.post("/api/v1/jobs/batch", json={"jobs": [item] * JOBS_N}, headers=headers)
    assert answer.status_code in (200, 201), answer.text
    jobs = [entry["job"] for entry in answer.json()["items"]]
    env = settings_env(make_settings(job_consumers_default=4))

    async def succeeded() -> int:
        query = select(func.count()).where(JOBS.c.id.in_([j["id"] for j in jobs]), JOBS.c.status == "succeeded")
        async with db.connect() as conn:
            return int((await conn.execute(query)).scalar_one())

    async def quarter_done() -> bool:
        return await succeeded() >= JOBS_N // 4

    with (
        app_process(["worker", "jobs"], env, tmp_path / "a.log") as first,
        app_process(["worker", "jobs"], env, tmp_path / "b.log") as second,
    ):
        await wait_for(quarter_done, within=60)
        first.kill()
        done = [await until_status(api, headers, job["id"], 120) for job in jobs]
        assert [job["status"] for job in done] == ["succeeded"] * JOBS_N, second.output()

    spans = [span for job in jobs for span in await runs_of(api, headers, job["id"])]
    assert len(spans) == JOBS_N  # a run the kill cut short has no end: each job's one finished run
    assert most_at_once(spans) <= LIMIT
    for job in jobs:
        events = [entry["event"] for entry in await trail(api, headers, job["id"])]
        assert events.count("succeeded") == 1
    async with db.connect() as conn:
        left = select(func.count()).where(JOBS.c.id.in_([j["id"] for j in jobs]), JOBS.c.held.is_not(None))
        assert (await conn.execute(left)).scalar_one() == 0


RATE_JOBS, RATE = 100, 10


def most_in_a_window(stamps: list[datetime], seconds: float) -> int:
    """The most of `stamps` in any half-open window of `seconds`."""
    stamps = sorted(stamps)
    width = timedelta(seconds=seconds)
    return max(sum(1 for later in stamps[i:] if later - first < width) for i, first in enumerate(stamps))


async def test_a_rate_key_of_ten_a_second_starts_at_most_ten_in_any_second_and_fails_none(
    api: Api, db: AsyncEngine, tmp_path: Path
) -> None:
    headers = await api.new_client("flow-rate-100")
    item = {
        "job_type": "echo",
        "payload": {"n": 1},
        "rate_limit": {"key": "partner", "limit": RATE, "period_seconds": 1},
    }
    answer = await api.client.post("/api/v1/jobs/batch", json={"jobs": [item] * RATE_JOBS}, headers=headers)
    assert answer.status_code in (200, 201), answer.text
    jobs = [entry["job"] for entry in answer.json()["items"]]

    with app_process(["worker", "jobs"], settings_env(make_settings(job_consumers_default=8)), tmp_path / "w.log"):
        done = [await until_status(api, headers, job["id"], 120) for job in jobs]
    assert [job["status"] for job in done] == ["succeeded"] * RATE_JOBS

    async with db.connect() as conn:
        query = select(JOBS.c.granted_at, JOBS.c.started_at).where(JOBS.c.client_id == "flow-rate-100")
        rows = (await conn.execute(query)).all()
    granted, started = [row.granted_at for row in rows], [row.started_at for row in rows]
    # The window's own record: each job's grant, stamped in the transaction that counted its window.
    assert None not in granted and most_in_a_window(granted, 1.0) == RATE
    # The window spreads the grants over the whole span, and no job starts before its grant. (Its start is stamped at
    # its claim, a moment after the grant; on a busy machine that moment varies, so starts may bunch where grants
    # did not: the window's record is the grants'.)
    assert (max(granted) - min(granted)).total_seconds() >= (RATE_JOBS / RATE - 1) * 0.9
    assert all(start >= grant for grant, start in zip(granted, started, strict=True))
