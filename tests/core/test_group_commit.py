"""The group-commit primitive on its own: batches that grow with load, a lone item flushed at once, a size cap,
one bad item failing only itself, and a close that flushes what waits."""

import asyncio

import pytest

from app.core.group_commit import GATHER_TURNS, GroupCommit, GroupCommitClosed
from tests.support import wait_for


class Recorder:
    """A flush that remembers each batch it saw and can be held while a test lets items pile up."""

    def __init__(self, bad: frozenset[int] = frozenset()) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.bad = bad

    async def flush(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        await self.gate.wait()
        if self.bad & set(items):
            raise ValueError(f"bad item among {items}")
        return [item * 10 for item in items]

    async def held(self) -> None:
        """Until a flush has started and waits at the gate."""

        async def started() -> bool:
            return bool(self.batches)

        await wait_for(started, within=5, interval=0.001)


async def test_a_lone_item_is_flushed_at_once_and_gets_its_own_outcome() -> None:
    recorder = Recorder()
    batcher = GroupCommit("t", recorder.flush)
    assert await asyncio.wait_for(batcher.run(7), timeout=1) == 70
    assert recorder.batches == [[7]]


async def test_callers_woken_one_by_another_join_the_first_callers_batch() -> None:
    """A caller woken by I/O often wakes another before that one adds its item (a future handed on, a second
    answer read): the batch waits that many turns of the loop, and no fixed time, before it flushes."""
    recorder = Recorder()
    batcher = GroupCommit("t", recorder.flush)
    loop = asyncio.get_running_loop()
    handed = [loop.create_future() for _ in range(GATHER_TURNS)]

    async def caller(n: int) -> int:
        if n > 0:
            await handed[n - 1]  # woken by the caller before it
        else:
            await asyncio.sleep(0)  # the others are waiting by now
        outcome = batcher.submit(n)
        if n < GATHER_TURNS:
            handed[n].set_result(None)  # wakes the next one, which adds its item a turn later
        return await outcome

    assert await asyncio.gather(*(caller(n) for n in range(GATHER_TURNS + 1))) == [
        n * 10 for n in range(GATHER_TURNS + 1)
    ]
    assert recorder.batches == [list(range(GATHER_TURNS + 1))]


async def test_items_that_arrive_during_a_flush_share_the_next_one() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    batcher = GroupCommit("t", recorder.flush)
    first = asyncio.create_task(batcher.run(1))
    await recorder.held()  # the first flush is in flight, held at the gate
    rest = [asyncio.create_task(batcher.run(n)) for n in range(2, 12)]

    async def all_waiting() -> bool:
        return batcher.waiting == 10

    await wait_for(all_waiting, within=5, interval=0.001)
    recorder.gate.set()
    assert await first == 10
    assert [await task for task in rest] == [n * 10 for n in range(2, 12)]
    assert recorder.batches == [[1], list(range(2, 12))]
    assert (batcher.batches, batcher.items) == (2, 11)


async def test_a_batch_never_exceeds_its_cap() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    batcher = GroupCommit("t", recorder.flush, max_batch=4)
    tasks = [asyncio.create_task(batcher.run(n)) for n in range(10)]
    await recorder.held()
    recorder.gate.set()
    assert await asyncio.gather(*tasks) == [n * 10 for n in range(10)]
    assert [len(batch) for batch in recorder.batches] == [4, 4, 2]


async def test_a_failing_batch_is_retried_item_by_item_so_only_the_bad_item_fails() -> None:
    recorder = Recorder(bad=frozenset({3}))
    recorder.gate.clear()
    batcher = GroupCommit("t", recorder.flush)
    tasks = [asyncio.create_task(batcher.run(n)) for n in range(1, 6)]
    await recorder.held()
    recorder.gate.set()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert outcomes[:2] == [10, 20] and outcomes[3:] == [40, 50]
    assert isinstance(outcomes[2], ValueError)
    assert recorder.batches == [[1, 2, 3, 4, 5], [1], [2], [3], [4], [5]]


async def test_a_systemic_error_fails_the_whole_batch_without_retrying_each_item() -> None:
    recorder = Recorder(bad=frozenset({1}))
    recorder.gate.clear()
    batcher = GroupCommit("t", recorder.flush, systemic=lambda exc: isinstance(exc, ValueError))
    tasks = [asyncio.create_task(batcher.run(n)) for n in range(1, 4)]
    await recorder.held()
    recorder.gate.set()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(outcome, ValueError) for outcome in outcomes)
    assert recorder.batches == [[1, 2, 3]]


async def test_close_flushes_what_waits_then_refuses_more_until_reopened() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    batcher = GroupCommit("t", recorder.flush)
    tasks = [asyncio.create_task(batcher.run(n)) for n in range(3)]
    await recorder.held()
    closing = asyncio.create_task(batcher.close())
    recorder.gate.set()
    await closing
    assert [task.result() for task in tasks] == [0, 10, 20]
    with pytest.raises(GroupCommitClosed):
        await batcher.run(9)
    batcher.reopen()
    assert await batcher.run(9) == 90


async def test_submit_puts_an_item_in_line_before_it_returns_so_later_items_follow_it() -> None:
    """What the webhook worker relies on: an outcome put in line with `submit` goes before any admission added
    after the call, in the same batch or an earlier one, before the caller awaits anything."""
    recorder = Recorder()
    recorder.gate.clear()
    batcher = GroupCommit("t", recorder.flush)
    first = asyncio.ensure_future(batcher.run(1))
    await recorder.held()  # [1] is in flight
    outcome = batcher.submit(2)
    assert batcher.waiting == 1  # in line already, before anything was awaited
    later = asyncio.ensure_future(batcher.run(3))
    assert not outcome.done()
    recorder.gate.set()
    assert await asyncio.gather(first, outcome, later) == [10, 20, 30]
    assert recorder.batches == [[1], [2, 3]]


async def test_submit_refuses_an_item_once_closed() -> None:
    batcher = GroupCommit("t", Recorder().flush)
    await batcher.close()
    with pytest.raises(GroupCommitClosed):
        batcher.submit(1)
