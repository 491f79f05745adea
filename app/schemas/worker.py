"""Workers of every process, and the answer to an operator's stop or start."""

from pydantic import BaseModel

from app.core.statuses import Action


class WorkerOut(BaseModel):
    name: str
    kind: str
    process: str
    state: str
    consumers: int
    in_flight: int
    processed: int
    failed: int
    processing_rate: float
    error_rate: float
    last_heartbeat: str
    last_cycle_duration_ms: float | None
    circuit_breaker_state: str
    next_delay_seconds: float | None = None


class WorkersOut(BaseModel):
    items: list[WorkerOut]


class AcceptedOut(BaseModel):
    name: str
    action: Action
