"""The tools a running handler may use (JobTools): the CPU pool, the artifacts, and HTTP through the
SSRF guard. Shared per worker; bound to one job per run."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from app.core import safe_http
from app.handlers.base import HttpAnswer, ProgressSink
from app.services.artifacts import ArtifactService
from app.workers.jobs.cpu_pool import CpuPool

T = TypeVar("T")
FETCH_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class SharedTools:
    """One per worker process."""

    pool: CpuPool
    artifacts: ArtifactService
    http: safe_http.SafeClient  # the SSRF guard checks each connection as it is dialled

    def bind(self, client_id: str) -> "JobToolsImpl":
        return JobToolsImpl(self, client_id)


@dataclass(frozen=True)
class JobToolsImpl:
    shared: SharedTools
    client_id: str

    async def cpu(self, fn: Callable[..., T], *args: Any, progress: ProgressSink | None = None) -> T:
        return await self.shared.pool.run(fn, *args, progress=progress)

    async def save_artifact(self, job_id: str, data: bytes, content_type: str, filename: str) -> str:
        return await self.shared.artifacts.save(job_id, self.client_id, data, content_type, filename)

    async def fetch(self, url: str, max_bytes: int) -> tuple[bytes, str]:
        return await safe_http.download(self.shared.http, url, {}, FETCH_TIMEOUT_SECONDS, max_bytes)

    async def call(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, seconds: float, max_bytes: int = 4096
    ) -> HttpAnswer:
        answer = await safe_http.send(self.shared.http, method, url, body, headers, seconds, max_bytes)
        return HttpAnswer(answer.status_code, answer.body, answer.duration_ms, answer.retry_after)
