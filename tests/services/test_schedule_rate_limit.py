"""A schedule's firings count against its client's rate limit like submits: a firing over the limit waits in the
database (its schedule stays due) and runs once the window allows, under its own fire time, never twice."""

from datetime import UTC, datetime
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.names import Names
from app.models.tables import JOBS, SCHEDULES
from tests.api.test_schedules import EVERY_SECOND, SCHEDULES_URL, create, firings
from tests.conftest import NS, make_settings
from tests.support import Api, wait_for

LIMIT = 4  # jobs per client per minute


@pytest.fixture
def settings() -> Settings:
    return make_settings(rate_limit_per_minute=LIMIT, scheduler_interval_seconds=0.2)


async def jobs_of(db: AsyncEngine, client_id: str) -> int:
    async with db.connect() as conn:
        return int((await conn.execute(select(func.count()).where(JOBS.c.client_id == client_id))).scalar_one())


async def due_since(db: AsyncEngine, schedule_ids: list[str]) -> dict[str, datetime]:
    """The firing each schedule owes (its `next_run_at`), by schedule."""
    query = select(SCHEDULES.c.id, SCHEDULES.c.next_run_at).where(SCHEDULES.c.id.in_(schedule_ids))
    async with db.connect() as conn:
        return {row.id: row.next_run_at for row in await conn.execute(query)}


async def test_firings_over_the_rate_limit_wait_and_then_run_once_each(api: Api, db: AsyncEngine, redis: Redis) -> None:
    client_id = "sched-rate-" + datetime.now(UTC).strftime("%H%M%S%f")
    headers = await api.new_client(client_id)
    made: list[dict[str, Any]] = []
    try:
        for _ in range(3):
            made.append(await create(api, headers, cron=EVERY_SECOND, timezone="UTC"))
        ids = [m["id"] for m in made]

        async def held() -> dict[str, datetime] | None:
            """Every schedule owing a firing two seconds old or more: the limit holds them."""
            owed = await due_since(db, ids)
            late = all((datetime.now(UTC) - at).total_seconds() >= 2 for at in owed.values())
            return owed if late else None

        owed = await wait_for(held, within=20, interval=0.2)
        assert await jobs_of(db, client_id) == LIMIT  # the firings took the minute's allowance, no more
        refused = await api.submit(headers)
        assert refused.status_code == 429, refused.text  # ...which a submit shares
        triggered = await api.client.post(f"{SCHEDULES_URL}/{ids[0]}/trigger", headers=headers)
        assert triggered.status_code == 429 and "Retry-After" in triggered.headers, triggered.text  # and a trigger

        await redis.delete(Names(NS).rate_limit_key(client_id))  # the window slides on: room again

        async def ran() -> list[str] | None:
            keys = [key for i in ids for key in await firings(db, i)]
            wanted = {f"schedule:{i}:{at.strftime('%Y-%m-%dT%H:%M:%SZ')}" for i, at in owed.items()}
            return keys if wanted <= set(keys) else None

        keys = await wait_for(ran, within=20, interval=0.2)  # each held firing ran, late, under its own time
        assert len(keys) == len(set(keys))
    finally:
        for item in made:
            await api.client.delete(f"{SCHEDULES_URL}/{item['id']}", headers=headers)
