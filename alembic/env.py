"""Alembic environment: async online migrations, and offline SQL rendering for any dialect."""

import asyncio

from sqlalchemy.engine import Connection

from alembic import context
from app.core.config import get_settings
from app.core.database import make_engine
from app.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("url")
    return str(url) if url else get_settings().database_url


def run_offline() -> None:
    """Render the migrations as SQL (`alembic upgrade head --sql`), e.g. to check the MSSQL dialect."""
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def _run_sync(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


async def _run_online() -> None:
    engine = make_engine(_url(), pool_size=1)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_sync)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    asyncio.run(_run_online())
