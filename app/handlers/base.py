"""What a job type is: a payload spec and an async handler, and what a handler may use while it runs."""

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from app.schemas.payloads.base import PayloadSpec

T = TypeVar("T")

MAX_PROGRESS_MESSAGE = 500  # characters of a progress message kept; the rest is cut

# Where a run's progress reports go (the worker's, throttled): a fraction in 0..1 and a message.
ProgressSink = Callable[[float, str | None], None]


@dataclass(frozen=True)
class HttpAnswer:
    status_code: int
    body: str
    duration_ms: float
    retry_after: str | None = None  # the answer's Retry-After header, as it came


class JobTools(Protocol):
    """The worker's services a handler may call; all of them safe to use from any job type."""

    async def cpu(self, fn: Callable[..., T], *args: Any, progress: ProgressSink | None = None) -> T:
        """Run a module-level function in the CPU process pool; a timed-out job's process is killed. What it reports
        with `app.core.cpu_reports.report` goes to `progress` (a run's: `ctx.progress_sink`)."""
        ...

    async def save_artifact(self, job_id: str, data: bytes, content_type: str, filename: str) -> str:
        """Store the job's file (one per job; a rerun replaces it) and return its URL path."""
        ...

    async def fetch(self, url: str, max_bytes: int) -> tuple[bytes, str]:
        """GET through the SSRF guard: the body (at most `max_bytes`) and its content type."""
        ...

    async def call(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, seconds: float, max_bytes: int = 4096
    ) -> HttpAnswer:
        """Any HTTP call through the SSRF guard within `seconds`; no redirects, `max_bytes` of the answer read."""
        ...


@dataclass(frozen=True)
class JobContext:
    """What a handler may know about the run it is part of, and the tools it may use."""

    job_id: str
    job_type: str
    attempt: int
    runs: int
    request_id: str | None
    tools: JobTools | None = None
    # A workflow's job: the results of the jobs it depends on, by their refs (docs/workflows.md), read once
    # before the run; empty for any other job.
    dependencies: Mapping[str, Any] = field(default_factory=dict)
    progress_sink: ProgressSink | None = None  # None: reports go nowhere (a context built outside a worker)

    async def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far this run is: `fraction` from 0 to 1, and a short message. Cheap to call often: the
        worker stores at most one report a second per job, and the last one with the outcome."""
        if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 <= fraction <= 1:
            raise ValueError(f"ctx.progress takes a fraction from 0 to 1 (0.5 is half done), not {fraction!r}")
        if message is not None and not isinstance(message, str):
            raise TypeError(f"ctx.progress takes a message as a string or None, not {type(message).__name__}")
        if self.progress_sink is not None:
            self.progress_sink(float(fraction), message[:MAX_PROGRESS_MESSAGE] if message else message)

    def require_tools(self) -> JobTools:
        if self.tools is None:
            raise RuntimeError(f"job type {self.job_type} needs the worker's tools, and this context has none")
        return self.tools


Handler = Callable[[JobContext, Any], Awaitable[Any]]


@dataclass(frozen=True)
class JobType:
    """A job type: what it accepts (its payload spec, all the API knows of it) and the handler that runs it."""

    spec: PayloadSpec
    handler: Handler

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def payload_model(self) -> type[BaseModel]:
        return self.spec.model
