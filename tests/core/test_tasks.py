"""A stop that cancels a background task waits for it a bounded time (app/core/tasks.py)."""

import asyncio
import contextlib

from app.core.tasks import cancelled


async def test_a_task_that_ends_when_cancelled_is_waited_for() -> None:
    task = asyncio.create_task(asyncio.sleep(60))
    await asyncio.sleep(0)

    assert await cancelled(task, within=5) is True
    assert task.cancelled()


async def test_a_task_that_swallows_its_cancel_is_given_up_on_after_the_bound() -> None:
    """As a loop does whose cancel met `asyncio.wait_for` just as its inner await finished (Python 3.11)."""
    stop = asyncio.Event()

    async def deaf() -> None:
        while not stop.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.01)

    task = asyncio.create_task(deaf())
    await asyncio.sleep(0)

    assert await cancelled(task, within=0.2) is False
    assert not task.done()
    stop.set()
    await task


async def test_a_task_that_failed_before_its_stop_is_done_with_its_error_taken() -> None:
    async def failing() -> None:
        raise RuntimeError("gone")

    task = asyncio.create_task(failing())
    await asyncio.sleep(0)

    assert await cancelled(task, within=1) is True
