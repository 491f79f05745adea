"""Kept answers: FreshFor serves one per key while fresh and computes once for callers asking together;
KeptAndRefreshed serves the last one at once and recomputes it in the background once it is old."""

import asyncio

from app.services.fresh_for import FreshFor, KeptAndRefreshed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_an_answer_is_computed_once_for_callers_together_and_kept_while_fresh() -> None:
    clock, calls = Clock(), []

    async def compute() -> int:
        calls.append(clock.now)
        await asyncio.sleep(0.01)
        return len(calls)

    fresh: FreshFor[int] = FreshFor(5, clock=clock)
    assert await asyncio.gather(*(fresh.get("a", compute) for _ in range(3))) == [1, 1, 1]
    clock.now = 4.9
    assert await fresh.get("a", compute) == 1 and await fresh.get("b", compute) == 2
    clock.now = 5.0
    assert await fresh.get("a", compute) == 3


async def test_a_kept_answer_is_served_at_once_and_refreshed_behind_it() -> None:
    clock, calls, release = Clock(), [], asyncio.Event()

    async def compute() -> int:
        calls.append(clock.now)
        if len(calls) > 1:
            await release.wait()
        return len(calls)

    kept: KeptAndRefreshed[int] = KeptAndRefreshed(30, clock=clock)
    assert await kept.get("a", compute) == (1, 0.0)  # the first call waits for it
    clock.now = 29
    assert await kept.get("a", compute) == (1, 0.0) and calls == [0.0]
    clock.now = 30
    assert await kept.get("a", compute) == (1, 0.0)  # old: served, and a recount started
    assert await kept.get("a", compute) == (1, 0.0)
    await asyncio.sleep(0)  # the recount's task starts
    assert calls == [0.0, 30] and len(kept.running) == 1  # one recount at a time
    release.set()
    await asyncio.wait_for(asyncio.gather(*kept.running.values()), 5)
    assert await kept.get("a", compute) == (2, 30)
