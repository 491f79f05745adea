"""Flow control's sweep and views (docs/flow-control.md): the level-triggered release every process runs beside
its workers, and a concurrency key's counts as the job page shows them."""

from loguru import logger

from app.services.outbox import Outbox
from app.stores.flow import FlowStore, KeyCounts

RELEASE_BATCH = 200  # jobs per key (and held for a window) a pass releases: its outbox rows within MSSQL's limits


async def release_throttled(flow: FlowStore, outbox: Outbox) -> int:
    """One pass: every key with held jobs and a free slot, every job whose rate window has room now, released
    oldest first with their lane messages, then published (what the broker does not confirm, the relay sends).
    The workers release at once as runs finish and windows pass; this pass catches what they could not (a slot
    freed by a lease that ran out, a worker that died before its release)."""
    released, staged = await flow.release(None, RELEASE_BATCH)
    await outbox.publish(staged)
    if released:
        logger.info("released {} throttled job(s) to their lanes", released)
    return released


async def key_counts(flow: FlowStore, client_id: str, key: str) -> KeyCounts:
    """A client's concurrency key: its jobs running (or granted a slot) and waiting for one."""
    return await flow.counts(client_id, key)
