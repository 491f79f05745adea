"""What a job type is: a payload model and an async handler."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class JobContext:
    """What a handler may know about the run it is part of."""

    job_id: str
    job_type: str
    attempt: int
    runs: int
    request_id: str | None


Handler = Callable[[JobContext, Any], Awaitable[Any]]


@dataclass(frozen=True)
class JobType:
    """A job type: its name, the model its payload must fit, and the handler that runs it."""

    name: str
    payload_model: type[BaseModel]
    handler: Handler
    description: str
