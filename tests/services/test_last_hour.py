"""The last hour is read incrementally: a settled minute is kept as first read, the current one read again."""

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import JOBS
from app.services.last_hour import LastHour
from tests.support import make_job


async def test_settled_minutes_are_kept_and_the_current_one_is_read_again(engine: AsyncEngine) -> None:
    client = f"lh-{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC).replace(second=45)  # minutes up to the one before last have settled (30 s)
    settled, current = now - timedelta(minutes=5), now - timedelta(seconds=10)

    async def finish(at: datetime) -> None:
        row = make_job(at, client_id=client, status="succeeded", started_at=at, finished_at=at)
        async with engine.begin() as conn:
            await conn.execute(insert(JOBS).values(**row))

    last_hour = LastHour()

    async def read() -> dict[str, int]:
        async with engine.connect() as conn:
            minutes = await last_hour.read(conn, client, now)
        assert len(minutes) == 60
        return {m["at"].strftime("%H:%M"): m["succeeded"] for m in minutes if m["succeeded"]}

    await finish(settled)
    await finish(current)
    assert await read() == {settled.strftime("%H:%M"): 1, current.strftime("%H:%M"): 1}
    await finish(settled)  # too late for a settled minute: it is not read again
    await finish(current)
    assert await read() == {settled.strftime("%H:%M"): 1, current.strftime("%H:%M"): 2}
    last_hour = LastHour()  # another process: it reads the hour
    assert await read() == {settled.strftime("%H:%M"): 2, current.strftime("%H:%M"): 2}
