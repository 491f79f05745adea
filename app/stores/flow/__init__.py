"""Concurrency keys and rate limits (docs/flow-control.md, DESIGN.md rules 18 and 19): a keyed job is admitted
in its claim's transaction, before the claim, under its keys' row locks: granted a slot (and a start of its rate
window) it is claimed; otherwise it is held in the database with its reason, its message acked, and released,
oldest first, as a slot or its window frees. One SQL implementation serves every database."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.names import Lane
from app.models.rows import JobRow
from app.stores.flow.fair import LaneRef, LaneState
from app.stores.outbox import Pending


class KeyRef(NamedTuple):
    """One client's concurrency key."""

    client_id: str
    key: str

    @classmethod
    def of(cls, job: Mapping[str, Any]) -> "KeyRef":
        """The concurrency key of a job's row ("" for a job without one)."""
        return cls(job["client_id"], job["concurrency_key"] or "")


@dataclass(frozen=True)
class Admission:
    """What one admission batch did: the jobs it held (their messages are acked), and the lane messages of the jobs
    it released meanwhile (older ones of the same keys), staged in its transaction, to publish."""

    held: set[str] = field(default_factory=set)
    staged: list[Pending] = field(default_factory=list)
    next_window: datetime | None = None  # the earliest time a job it held for its rate window may start
    held_keys: set["KeyRef"] = field(default_factory=set)  # the concurrency keys of the jobs it held

    def merged(self, later: "Admission") -> "Admission":
        """This admission and a later one of the same claim, as one."""
        windows = [w for w in (self.next_window, later.next_window) if w is not None]
        return Admission(
            self.held | later.held,
            [*self.staged, *later.staged],
            min(windows, default=None),
            self.held_keys | later.held_keys,
        )


class Looked(NamedTuple):
    """What a release of some keys starts from, read ahead of it: whether a held job's rate window has passed, and
    the oldest jobs held for each key (as many as its limit could let start)."""

    window_due: bool
    jobs: list[JobRow]


@dataclass(frozen=True)
class KeyCounts:
    """A concurrency key as the job page shows it: its jobs running (or granted a slot) and waiting for one."""

    running: int
    waiting: int


class FlowStore(Protocol):
    async def admit(self, job_ids: list[str]) -> Admission:
        """`admit_in` in a transaction of its own."""

    async def admit_in(self, conn: AsyncConnection, job_ids: list[str]) -> Admission:
        """Admit the keyed jobs among `job_ids` that are ready to start, in `conn`'s transaction (the claim's): each
        granted a slot of its concurrency key (and a start of its rate window) or held with its reason and a
        `throttled` audit row the first time. A job that is not ready (running, finished, not due, held already) is
        left to the claim."""

    async def look(self, keys: Sequence[KeyRef], limit: int) -> Looked | None:
        """What a release of these keys would start from, read now, so that a release once a run of theirs ends
        need not (None: this store reads nothing ahead)."""

    async def release(
        self, keys: Sequence[KeyRef] | None, limit: int, looked: Looked | None = None
    ) -> tuple[int, list[Pending]]:
        """Release held jobs whose slot or window has come, oldest first: of `keys`' concurrency (None: of every
        key with held jobs), and those held for a window that has passed, up to `limit` of each; each granted with
        its lane message staged in the same transaction. How many, and the messages to publish. `looked`: what
        `look` read of these keys a moment ago (whatever changed since is found and decided as ever)."""

    async def next_window(self) -> datetime | None:
        """The earliest time a job held for its rate window may start (None: none is)."""

    async def counts(self, client_id: str, key: str) -> KeyCounts:
        """One client's concurrency key: how many of its jobs run (or hold a slot) and how many wait for one."""


class FairStore(Protocol):
    async def lanes(self, refs: Sequence[LaneRef], cap: int) -> dict[LaneRef, LaneState]:
        """Each client's jobs in a lane now (counted up to `cap`), and whether others wait their turn."""

    async def release(
        self, refs: Sequence[LaneRef] | None, share: Callable[[Lane], int], least: float = 0.0
    ) -> list[Pending]:
        """Release, oldest first, as many of each client's jobs waiting their turn in a lane as its `share` of the
        lane has room for (None: every client with jobs waiting their turn), when the room is at least `least` of
        the share, their lane messages staged in the same transaction, to publish."""
