"""Fixtures of the store tests that more than one module uses."""

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import FLOW_KEYS, JOBS
from tests.support import drop_jobs


@pytest.fixture
async def client(db: AsyncEngine) -> AsyncIterator[str]:
    """A client whose concurrency key `k` has its row already (its first admission made it)."""
    client_id = f"admit-{uuid.uuid4().hex[:12]}"
    async with db.begin() as conn:
        await conn.execute(insert(FLOW_KEYS).values(client_id=client_id, kind="concurrency", key="k", version=0))
    yield client_id
    await drop_jobs(db, JOBS.c.client_id == client_id)
    async with db.begin() as conn:
        await conn.execute(FLOW_KEYS.delete().where(FLOW_KEYS.c.client_id == client_id))
