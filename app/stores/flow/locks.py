"""The rows of `flow_keys` that flow control's decisions are taken under: a concurrency key's, a rate key's, and a
client's lane for its fair turns. Locked in one order (client, kind, key) by every caller, so two transactions never
wait for each other in a circle."""

from collections.abc import Iterable

from sqlalchemy import and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.models.claims import insert_missing, locked_in_order
from app.models.tables import FLOW_KEYS

Lock = tuple[str, str, str]  # (kind, client_id, key): a flow_keys row


async def lock_keys(conn: AsyncConnection, locks: Iterable[Lock]) -> None:
    """Lock these keys' rows until the transaction ends (each made the first time): one read that locks them in one
    order on every database that has row locks, then one UPDATE that takes SQLite's write lock (and makes each
    lock a write on every database)."""
    wanted = sorted(set(locks))
    if not wanted:
        return
    keys = FLOW_KEYS.c
    match = or_(*(and_(keys.kind == kind, keys.client_id == client, keys.key == key) for kind, client, key in wanted))
    ordered = select(keys.kind, keys.client_id, keys.key).where(match).order_by(keys.client_id, keys.kind, keys.key)
    found = {(row.kind, row.client_id, row.key) for row in await conn.execute(locked_in_order(ordered, FLOW_KEYS))}
    for kind, client_id, key in wanted:
        if (kind, client_id, key) not in found:  # the key's first admission: its row made (and locked by it)
            row = {"client_id": client_id, "kind": kind, "key": key, "version": 0}
            await conn.execute(insert_missing(conn.dialect.name, FLOW_KEYS, row))
    await conn.execute(update(FLOW_KEYS).where(match).values(version=keys.version + 1))
