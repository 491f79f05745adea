"""Crash points, for the crash tests: the process kills itself (SIGKILL, as `kill -9` would) at a named point.

Off unless the `FAILPOINTS` setting names a point; a production deployment never sets it.
"""

import os
import signal
from dataclasses import dataclass
from enum import StrEnum


class Failpoint(StrEnum):
    AFTER_CLAIM_COMMIT = "after_claim_commit"  # a claim batch committed, its handlers not yet started
    AFTER_FINISH_COMMIT = "after_finish_commit"  # a finish batch committed, its messages not yet acked
    AFTER_RECORD_COMMIT = "after_record_commit"  # a webhook attempt batch committed, its messages not yet acked
    AFTER_SUBMIT_COMMIT = "after_submit_commit"  # submitted jobs committed with their outbox rows, not yet published
    AFTER_REPLAY_COMMIT = "after_replay_commit"  # a DLQ replay of one job committed, its message not yet published


@dataclass(frozen=True)
class Failpoints:
    armed: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> "Failpoints":
        names = {name.strip() for name in text.split(",") if name.strip()}
        unknown = names - {str(point) for point in Failpoint}
        if unknown:
            raise ValueError(f"unknown failpoint(s) {sorted(unknown)}; known: {[str(p) for p in Failpoint]}")
        return cls(frozenset(names))

    def hit(self, point: Failpoint) -> None:
        if point in self.armed:
            os.kill(os.getpid(), signal.SIGKILL)
