"""What a worker says about itself: the CONTRACT.md "Workers" fields this process knows on its own."""

from dataclasses import asdict, dataclass, field
from typing import Any

from app.core.breaker import BreakerState
from app.core.recent_logs import process_name
from app.core.statuses import WorkerKind, WorkerState


@dataclass(frozen=True)
class WorkerReport:
    """One worker of this process; rates and heartbeats are worked out where the processes' reports meet."""

    name: str
    kind: WorkerKind
    state: WorkerState
    consumers: int = 0
    in_flight: int = 0
    processed: int = 0
    failed: int = 0
    last_cycle_duration_ms: float | None = None  # background loops only
    circuit_breaker_state: BreakerState = BreakerState.CLOSED
    next_delay_seconds: float | None = None  # background loops only: the wait before the next cycle
    process: str = field(default_factory=process_name)  # "host:pid", as the recent logs name it

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
