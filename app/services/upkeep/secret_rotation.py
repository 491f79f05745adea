"""Re-sealing every stored secret (webhook secrets, the credentials of notification jobs and of schedules' jobs)
with the first key of SECRET_ENCRYPTION_KEY, a batch at a time, so an older key can then be dropped. Idempotent: a
secret already sealed with the first key is left as it is."""

from sqlalchemy import Table, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.secret_box import SecretBox
from app.models.tables import CLIENT_SECRETS, ENDPOINTS, JOBS, SCHEDULES

BATCH_ROWS = 500
# Each table that holds sealed secrets: its key column and its sealed columns. Deleted endpoints too: no row
# may be left that only an old key opens.
SEALED: tuple[tuple[Table, str, tuple[str, ...]], ...] = (
    (ENDPOINTS, "id", ("secret", "previous_secret")),
    (CLIENT_SECRETS, "client_id", ("secret",)),
    (JOBS, "id", ("sealed",)),
    (SCHEDULES, "id", ("sealed",)),
)


async def rotate_secrets(engine: AsyncEngine, box: SecretBox, batch_rows: int = BATCH_ROWS) -> int:
    """Re-seal each stored secret that is not sealed with the first key; how many were."""
    count = 0
    for table, key, columns in SEALED:
        count += await _rotate_table(engine, box, table, key, columns, batch_rows)
    return count


async def _rotate_table(
    engine: AsyncEngine, box: SecretBox, table: Table, key: str, columns: tuple[str, ...], batch_rows: int
) -> int:
    count, after = 0, None
    while True:
        query = (
            select(table.c[key], *(table.c[name] for name in columns))
            .where(or_(*(table.c[name].is_not(None) for name in columns)))  # most jobs have nothing sealed
            .order_by(table.c[key])
            .limit(batch_rows)
        )
        if after is not None:
            query = query.where(table.c[key] > after)
        async with engine.begin() as conn:
            rows = [dict(row._mapping) for row in await conn.execute(query)]
            for row in rows:
                count += await _reseal_row(conn, box, table, key, row)
        if len(rows) < batch_rows:
            return count
        after = rows[-1][key]


async def _reseal_row(conn: AsyncConnection, box: SecretBox, table: Table, key: str, row: dict[str, str]) -> int:
    changes = {name: new for name, old in row.items() if name != key and old and (new := box.reseal(old))}
    if not changes:
        return 0
    # Only over what was read: a secret rotated meanwhile is already sealed with the first key.
    unchanged = [table.c[name] == row[name] for name in changes]
    result = await conn.execute(update(table).where(table.c[key] == row[key], *unchanged).values(**changes))
    return len(changes) if result.rowcount == 1 else 0
