"""Every API request that carries a body passes here before anything reads it, in this order: the API key (401,
and not a byte of the body read), the declared type (415 unless JSON), the declared size and then the bytes as
they stream (413 past the route's limit), and the JSON itself (422 for what RFC 8259 does not allow).

One mechanism for every route: FastAPI reads a route's body before it solves the route's dependencies (the key
among them), so a limit or a key check in a route comes too late. The body read here, whole and bounded, is handed
on as it came; the parsed value waits in the scope for a route that reads it itself (`parsed`), and the caller in
the scope for `get_principal`, which need not look the key up twice.
"""

from collections.abc import Awaitable, Callable
from typing import cast

from fastapi.routing import APIRoute, iter_route_contexts
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api import strict_json
from app.api.deps import PRINCIPAL_SCOPE_KEY, get_principal
from app.api.errors import ApiError
from app.core.config import Settings

API_PREFIX = "/api/"
BATCH_PATH = "/api/v1/jobs/batch"
WORKFLOWS_PATH = "/api/v1/workflows"
BATCH_PATHS = (BATCH_PATH, WORKFLOWS_PATH)  # many jobs in one body: the batch limit
JSON_SCOPE_KEY = "app.json_body"
REFUSAL_SCOPE_KEY = "app.body_refused"
# The submit routes read the body themselves (`parsed`), within the client's rate limit: every submit a client
# sends counts against it, a refused body too, so its refusal is theirs to raise, after the limit is judged.
READ_BY_ROUTE = {("POST", "/api/v1/jobs"), ("POST", BATCH_PATH)}
BODY_HEADERS = (b"content-length", b"transfer-encoding")
Handler = Callable[[Request, Exception], Awaitable[Response]]


class RequestBody:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.limit, self.batch_limit = settings.max_body_bytes, settings.max_batch_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _route_path(scope).startswith(API_PREFIX) or not _carries_body(scope):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            scope[PRINCIPAL_SCOPE_KEY] = await get_principal(request)
            body = await self._read(request)
            if body is None:
                return  # the client went away: nobody to answer
            scope[JSON_SCOPE_KEY] = strict_json.loads(body)
        except ApiError as exc:
            if PRINCIPAL_SCOPE_KEY in scope and (scope["method"], _route_path(scope)) in READ_BY_ROUTE:
                scope[REFUSAL_SCOPE_KEY] = exc  # answered where the route reads the body, after its rate limit
                await self.app(scope, receive, send)
                return
            await _answer(request, send, exc)
            return
        except Exception as exc:
            await _answer(request, send, exc)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, request: Request) -> bytes | None:
        _json_type(request.headers.get("content-type"))
        limit = self.batch_limit if _route_path(request.scope) in BATCH_PATHS else self.limit
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        body = bytearray()
        while True:
            message = await request.receive()
            if message["type"] != "http.request":
                return None
            body += message.get("body", b"")
            if len(body) > limit:
                raise _too_large(limit)
            if not message.get("more_body", False):
                return bytes(body)


async def _answer(request: Request, send: Send, exc: Exception) -> None:
    """Answer `exc` as the app's routes would, with the app's own handler for it; raise it when there is none."""
    handler = _handler(request.scope["app"], exc)
    if handler is None:
        raise exc
    _name_route(request.scope)
    await (await handler(request, exc))(request.scope, request.receive, send)


def parsed(request: Request) -> object:
    """The body's JSON value as read here; the refusal of it (413, 415, 422) for a route in READ_BY_ROUTE; a 422
    when the request came without a body."""
    if REFUSAL_SCOPE_KEY in request.scope:
        raise request.scope[REFUSAL_SCOPE_KEY]
    if JSON_SCOPE_KEY not in request.scope:
        raise ApiError(422, "invalid_json", "The request has no body; send a JSON object.")
    return request.scope[JSON_SCOPE_KEY]


def _handler(app: Starlette, exc: Exception) -> Handler | None:
    """The app's own handler for `exc`, as FastAPI's routes have them: an ApiError, a 408 from the body deadline,
    a database that does not answer while the key is looked up. The one for any Exception is left to Starlette,
    which answers it outside every middleware."""
    for kind in type(exc).__mro__[:-2]:  # Exception and object aside
        if kind in app.exception_handlers:
            return cast(Handler, app.exception_handlers[kind])  # app/api/errors.py: each async, for HTTP
    return None


def _name_route(scope: Scope) -> None:
    """The route a refused request was for, as the router would note it, so the HTTP metrics count the refusal
    under its route (asked only on the way to an error)."""
    for context in iter_route_contexts(scope["app"].routes):
        route = context.original_route
        if isinstance(route, APIRoute) and route.matches(scope)[0] is Match.FULL:
            scope["route"] = route
            return


def _route_path(scope: Scope) -> str:
    """The path the routes match, without the `root_path` a proxy serving the API under a prefix gives it."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _carries_body(scope: Scope) -> bool:
    return any(name in BODY_HEADERS and value != b"0" for name, value in scope["headers"])


def _json_type(declared: str | None) -> None:
    """No type, `application/json` or `application/<anything>+json`, parameters aside; else a 415."""
    media = (declared or "application/json").partition(";")[0].strip().lower()
    kind, _, subtype = media.partition("/")
    if kind != "application" or not (subtype == "json" or subtype.endswith("+json")):
        detail = f"A body of type {declared} cannot be read; send JSON as application/json (or no Content-Type)."
        raise ApiError(415, "unsupported_media_type", detail)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "body_too_large", f"The body is over the limit of {limit} bytes; send less in one request.")


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body as one message, then whatever the client sends next (its going away, say)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
