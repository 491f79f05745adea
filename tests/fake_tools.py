"""The worker's tools (JobTools) in memory, for handler unit tests: CPU work runs inline, artifacts land in a
dict, and fetch/call give the canned answer they were handed (or raise it)."""

from collections.abc import Callable
from typing import Any, TypeVar

from app.handlers.base import HttpAnswer, ProgressSink

T = TypeVar("T")
Canned = Any  # an answer, or an exception to raise


class FakeTools:
    def __init__(self, fetched: Canned = None, answer: Canned = None) -> None:
        self.fetch_answer = fetched
        self.call_answer = answer
        self.fetched: list[tuple[str, int]] = []
        self.calls: list[dict[str, Any]] = []
        self.artifacts: dict[str, tuple[bytes, str, str]] = {}

    async def cpu(self, fn: Callable[..., T], *args: Any, progress: ProgressSink | None = None) -> T:
        return fn(*args)

    async def save_artifact(self, job_id: str, data: bytes, content_type: str, filename: str) -> str:
        self.artifacts[job_id] = (data, content_type, filename)
        return f"/api/v1/jobs/{job_id}/artifact"

    async def fetch(self, url: str, max_bytes: int) -> tuple[bytes, str]:
        self.fetched.append((url, max_bytes))
        result: tuple[bytes, str] = _canned(self.fetch_answer, "fetch")
        return result

    async def call(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, seconds: float, max_bytes: int = 4096
    ) -> HttpAnswer:
        self.calls.append(
            {
                "method": method,
                "url": url,
                "headers": headers,
                "body": body,
                "timeout": seconds,
                "max": max_bytes,
            }
        )
        result: HttpAnswer = _canned(self.call_answer, "call")
        return result


def _canned(answer: Canned, what: str) -> Any:
    if answer is None:
        raise AssertionError(f"this handler was not expected to {what}")
    if isinstance(answer, Exception):
        raise answer
    return answer
