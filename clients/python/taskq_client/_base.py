"""How a request is sent and its answer read, for the sync and the async client alike: the API key, the path and
query, the body as JSON, the answer into its model, and an error answer as `ApiError`."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class Op:
    """One operation: its method, its path with `{name}` for each path parameter, and what its answer is read as
    (None, `str`, `bytes`, a model or a list of one)."""

    method: str
    template: str
    answer: Any


TIMEOUT = 30.0  # seconds; a request with `wait` gets its wait on top
_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


@dataclass
class ApiError(Exception):
    """An error answer of the API, in its one error shape: the HTTP status, the stable `code` to branch on, the
    sentence `detail`, the fields at fault (`errors`, on a 422), `retry_after` in seconds (a 429 or a 503) and the
    request id to quote."""

    status: int
    code: str
    detail: str
    errors: list[dict[str, Any]] = field(default_factory=list)
    retry_after: float | None = None
    request_id: str | None = None

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.detail}"

    @classmethod
    def of(cls, answer: httpx.Response) -> "ApiError":
        try:
            body = answer.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        retry = answer.headers.get("Retry-After")
        return cls(
            answer.status_code,
            str(body.get("code") or "http_error"),
            str(body.get("detail") or answer.reason_phrase),
            list(body.get("errors") or []),
            float(retry) if retry and retry.replace(".", "", 1).isdigit() else None,
            answer.headers.get("X-Request-ID"),
        )


def body_json(body: Any) -> Any:
    """A request body as JSON: a model as the API reads it (by alias, only the fields set), a mapping as it is."""
    if isinstance(body, BaseModel):
        return body.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return to_jsonable_python(body)


def read(answer: httpx.Response, kind: Any) -> Any:
    """The answer read as `kind`: None, `str` (text), `bytes` or a model (or a list of one)."""
    if answer.status_code >= 400:
        raise ApiError.of(answer)
    if kind is None:
        return None
    if kind is str:
        return answer.text
    if kind is bytes:
        return answer.content
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        adapter = _ADAPTERS[kind] = TypeAdapter(kind)
    return adapter.validate_json(answer.content)


Params = list[tuple[str, str | int | float | bool | None]]


def request_of(
    template: str,
    path: Mapping[str, Any],
    query: Mapping[str, Any],
    headers: Mapping[str, Any],
    body: Any,
    extra_query: Mapping[str, str] | None,
) -> tuple[str, dict[str, Any]]:
    """The URL of one request, and what else httpx sends: its query, headers, JSON body and (with a `wait`) a
    timeout that outlasts the wait."""
    url = template.format(**{name: quote(str(value), safe="") for name, value in path.items()})
    params: Params = []
    for name, value in [*query.items(), *(extra_query or {}).items()]:
        for one in value if isinstance(value, list | tuple) else [value]:
            if one is not None:
                params.append((name, str(one).lower() if isinstance(one, bool) else str(one)))
    sent: dict[str, Any] = {
        "params": params,
        "headers": {name: str(value) for name, value in headers.items() if value is not None},
        "json": body_json(body) if body is not None else None,
    }
    if query.get("wait") is not None:
        sent["timeout"] = TIMEOUT + float(query["wait"])
    return url, sent


def auth_headers(api_key: str | None, headers: Mapping[str, str] | None) -> dict[str, str]:
    found = dict(headers or {})
    if api_key:
        found["Authorization"] = f"Bearer {api_key}"
    return found


class SyncTransport:
    """The sync client's connection: an `httpx.Client` (its own, or one given) with the API key."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: float = TIMEOUT,
        http: httpx.Client | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self.http.headers.update(auth_headers(api_key, headers))
        self._own = http is None

    def _call(
        self,
        op: Op,
        path: Mapping[str, Any],
        query: Mapping[str, Any],
        headers: Mapping[str, Any],
        body: Any,
        extra_query: Mapping[str, str] | None,
    ) -> Any:
        url, sent = request_of(op.template, path, query, headers, body, extra_query)
        return read(self.http.request(op.method, url, **sent), op.answer)

    def close(self) -> None:
        if self._own:
            self.http.close()

    def __enter__(self) -> "SyncTransport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncTransport:
    """The async client's connection: an `httpx.AsyncClient` (its own, or one given) with the API key."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: float = TIMEOUT,
        http: httpx.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self.http.headers.update(auth_headers(api_key, headers))
        self._own = http is None

    async def _call(
        self,
        op: Op,
        path: Mapping[str, Any],
        query: Mapping[str, Any],
        headers: Mapping[str, Any],
        body: Any,
        extra_query: Mapping[str, str] | None,
    ) -> Any:
        url, sent = request_of(op.template, path, query, headers, body, extra_query)
        return read(await self.http.request(op.method, url, **sent), op.answer)

    async def aclose(self) -> None:
        if self._own:
            await self.http.aclose()

    async def __aenter__(self) -> "AsyncTransport":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
