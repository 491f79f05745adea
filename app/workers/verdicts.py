"""What a delivered message means for the row it names (rule 4), for the job and the webhook workers alike:
matched with `match` by the consumer that settles the message."""

from dataclasses import dataclass, field

from app.models.rows import JobRow
from app.stores.outbox import Pending


@dataclass(frozen=True)
class Claimed:
    """Ours to run: the job as claimed (its `runs` is our fencing token), and the events to publish."""

    job: JobRow
    events: list[Pending]


@dataclass(frozen=True)
class Drop:
    """Finished or gone: ack the message and forget it (and publish `events`: a job cancelled just now)."""

    why: str
    events: list[Pending] = field(default_factory=list)


@dataclass(frozen=True)
class ToDeadLetters:
    """Dead-lettered already, or just now (events to publish, and the job as `buried`): reject the message into
    the DLQ."""

    events: list[Pending]
    buried: JobRow | None = None


@dataclass(frozen=True)
class Defer:
    """Leased by another worker, or not due yet: send the message back through a tier. `in_flight`: due, but
    leased by an attempt in flight (a webhook delivery's; an operator's message waits for that alone)."""

    seconds: float
    in_flight: bool = False


@dataclass(frozen=True)
class Raced:
    """Someone changed the row between our read and our compare-and-set: decide again."""


Verdict = Claimed | Drop | ToDeadLetters | Defer | Raced
