"""A job type's circuit breaker as clients see it."""

from pydantic import BaseModel


class CircuitOut(BaseModel):
    job_type: str
    state: str
    calls: int
    failures: int
    retry_after: float
