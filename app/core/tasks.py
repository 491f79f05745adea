"""Ending a background task without waiting on it for ever."""

import asyncio
from typing import Any


async def cancelled(task: "asyncio.Task[Any]", within: float) -> bool:
    """Cancel `task` and wait up to `within` seconds for it to end: whether it did (its error, if any, is taken:
    the caller stops it and does not want it). On Python 3.11 a cancel that reaches `asyncio.wait_for` just as the
    awaitable inside it finishes is lost, and a loop that ends only when cancelled goes on; so such a loop also
    checks a flag of its own, and its stop waits for it this long at most."""
    task.cancel()
    _, pending = await asyncio.wait({task}, timeout=within)
    if not pending and not task.cancelled():
        task.exception()
    return not pending
