"""`python -m bench.flow_off <the service's arguments>`: the service with flow control's code path off, the other
arm of the flow scenario's no-cost row (bench/flow.py).

A job message is never checked for a paused type, a key or its client's turn (`Holds.held` answers False at once,
a claim is never told its job is keyed, `Turns.claimed` does nothing), and a submit never reads its lanes
(`Fairness.admit` passes the drafts through), so what remains is the job path without flow control.
"""

import sys
from collections.abc import Sequence
from typing import Any

from app.core.messages import JobMessage
from app.services.fairness import Fairness
from app.services.submit import Draft
from app.workers.jobs.batches import ClaimOutcome, JobBatches
from app.workers.jobs.holds import Holds
from app.workers.jobs.turns import Turns


async def _never_held(self: Holds, message: JobMessage) -> bool:
    return False


_claim = JobBatches.claim


async def _unkeyed(self: JobBatches, job_id: str, keyed: bool = False) -> ClaimOutcome:
    return await _claim(self, job_id)


def _no_turn(self: Turns, message: JobMessage) -> None:
    return None


async def _as_they_are(self: Fairness, drafts: Sequence[Draft]) -> tuple[list[Draft], list[Any]]:
    return list(drafts), []


Holds.held = _never_held  # type: ignore[method-assign]
JobBatches.claim = _unkeyed  # type: ignore[method-assign]
Turns.claimed = _no_turn  # type: ignore[method-assign]
Fairness.admit = _as_they_are  # type: ignore[method-assign]

if __name__ == "__main__":
    from app.__main__ import main

    sys.exit(main(sys.argv[1:]))
