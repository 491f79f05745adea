"""`/dashboard` and its static files, every answer with a strict Content-Security-Policy and no framing."""

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, JSONResponse
from starlette.exceptions import HTTPException
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STATIC = Path(__file__).parent / "static"

# Scripts and styles only from the files below (no inline script, no eval); the API is the only thing fetched;
# artifacts open as blob: URLs the page made itself.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


@router.get("/dashboard")
async def dashboard() -> FileResponse:
    """The single page; it signs in with an API key and draws every view from the JSON API."""
    return FileResponse(STATIC / "index.html", headers=SECURITY_HEADERS)


class Secured:
    """An ASGI app with the dashboard's security headers added to every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(name.lower().encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        try:
            await self.app(scope, receive, send_secured)
        except HTTPException as exc:  # a file that is not there: answered here, so it carries the headers too
            code = "not_found" if exc.status_code == 404 else "http_error"
            body = {"detail": f"{exc.detail}: {scope['path']}", "code": code}
            await JSONResponse(body, exc.status_code, headers=SECURITY_HEADERS)(scope, receive, send)


def mount(app: FastAPI) -> None:
    """Serve the dashboard from `app`: the page at /dashboard, its modules and styles under /dashboard/static."""
    app.include_router(router)
    app.mount("/dashboard/static", Secured(StaticFiles(directory=STATIC)), name="dashboard-static")
