"""`POST /api/v1/jobs` served without FastAPI's per-request work.

Submitting is the service's hottest request, and FastAPI's share of it was about a quarter of the API's CPU: it
matches the route among all the others, solves the route's dependencies and parameters, and validates the answer
once more against its response model. This layer, the innermost of the app's own middleware (so the request id,
the body deadline and the HTTP metrics apply as to any route), answers the requests it can tell are plain submits
before reading anything: the route's path and method, no query string, and an `Idempotency-Key` header FastAPI
would take. It runs the route's own code (`submit_one`) with the same authentication, answers with the same JSON
serialised by pydantic as FastAPI does, and raises the same errors into the app's own exception handlers, through
Starlette's ExceptionMiddleware as FastAPI's routes have them. Everything else, `?wait=` included, goes on to
FastAPI, where the route stays declared for the OpenAPI document and for those requests.
"""

from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.routing import APIRoute
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.deps import get_principal, get_state
from app.api.routes import jobs

PATH = "/api/v1/jobs"
IDEMPOTENCY_HEADER = "idempotency-key"
RAW_IDEMPOTENCY_HEADER = IDEMPOTENCY_HEADER.encode()  # as the ASGI scope holds it


class SubmitPath:
    def __init__(self, app: ASGIApp, api: FastAPI) -> None:
        self.app = app
        self.api = api
        self.route = _submit_route(jobs.router.routes)
        self.taken = 0  # submits answered here, errors included, rather than by FastAPI
        self._handled: ASGIApp | None = None
        api.state.submit_path = self  # for the tests: which path answered

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _plain_submit(scope):
            await self.app(scope, receive, send)
            return
        if self._handled is None:  # built at the first submit: every exception handler is registered by then
            self._handled = ExceptionMiddleware(self._serve, handlers=_item_handlers(self.api))
        scope["route"] = self.route  # as FastAPI's router sets it: the HTTP metrics label requests by its path
        self.taken += 1
        await self._handled(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        principal = await get_principal(request)
        response = Response()  # what the route's `response` parameter is: the status and headers to answer with
        del response.headers["content-length"]
        idempotency_key = request.headers.get(IDEMPOTENCY_HEADER)
        job = await jobs.submit_one(request, response, await get_state(request), principal, idempotency_key, None)
        answer = Response(job.model_dump_json(by_alias=True), response.status_code, media_type="application/json")
        answer.headers.raw.extend(response.headers.raw)
        await answer(scope, receive, send)


def _plain_submit(scope: Scope) -> bool:
    """A submit FastAPI would hand to the route with no `wait` and an `Idempotency-Key` it accepts."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope["query_string"]:
        return False
    path, root = scope["path"], scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    if path != PATH:
        return False
    for name, value in scope["headers"]:
        if name == RAW_IDEMPOTENCY_HEADER:  # the first one is the one read, here as there
            return len(value.decode("latin-1")) <= jobs.IDEMPOTENCY_KEY_MAX
    return True


def _submit_route(routes: Iterable[object]) -> APIRoute:
    for route in routes:
        if isinstance(route, APIRoute) and route.endpoint is jobs.submit_job:
            return route
    raise LookupError("the jobs router has no submit route")


def _item_handlers(api: FastAPI) -> dict[Any, Any]:
    """The handlers FastAPI's ExceptionMiddleware has: all but the one for any Exception, which Starlette gives
    the outermost ServerErrorMiddleware (an unexpected error answers 500 there, for this path as for the others)."""
    return {key: handler for key, handler in api.exception_handlers.items() if key not in (500, Exception)}
