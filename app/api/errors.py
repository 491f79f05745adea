"""Every error a client can get, in one shape: {"detail": sentence, "code": word, ...}."""

import re
from typing import Any

from asgi_correlation_id import correlation_id
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from loguru import logger
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.cursors import BadCursor
from app.core.database import is_unreachable, sqlstate
from app.core.masking import mask_urls
from app.core.secret_box import SecretsUnavailable
from app.core.ssrf import UnsafeURL
from app.schemas.payloads.registry import PAYLOADS

DB_RETRY_AFTER = 5
MAX_NAMED_FIELDS = 10  # in a 422's sentence; `errors` lists them all


class ApiError(Exception):
    """An answer other than success, raised anywhere below a route."""

    def __init__(self, status: int, code: str, detail: str, headers: dict[str, str] | None = None, **extra: Any):
        super().__init__(detail)
        self.status, self.code, self.detail, self.headers, self.extra = status, code, detail, headers or {}, extra


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"No {what} with that id.")


Loc = tuple[str | int, ...]


def validation_errors(errors: list[Any], prefix: Loc = ("body",)) -> ApiError:
    """A 422 that names each bad field, keeping FastAPI's field list under `errors`."""
    return invalid(clean_errors(errors, prefix))


def invalid(cleaned: list[dict[str, Any]]) -> ApiError:
    """A 422 from errors already in our shape (see `clean_errors`)."""
    named = [".".join(str(p) for p in e["loc"]) for e in cleaned]
    fields = ", ".join(named[:MAX_NAMED_FIELDS])
    if len(named) > MAX_NAMED_FIELDS:
        fields += f" and {len(named) - MAX_NAMED_FIELDS} more (see `errors`)"
    return ApiError(422, "validation_error", f"The request is not valid: {fields}.", errors=cleaned)


def clean_errors(errors: list[Any], prefix: Loc) -> list[dict[str, Any]]:
    """Pydantic's errors as clients see them: each `loc` from `prefix` down, without the union's tags."""
    return [_clean(error, prefix) for error in errors]


def _clean(error: Any, prefix: Loc) -> dict[str, Any]:
    loc = list(error.get("loc", ()))
    if not loc and error.get("type") in ("union_tag_invalid", "union_tag_not_found"):
        loc = ["job_type"]  # the request's own discriminator, not one inside the payload
    elif loc and loc[0] in PAYLOADS:
        # A discriminated union puts the job type first, and a union payload its own tag after `payload`;
        # the client's path has neither.
        tags = PAYLOADS[loc[0]].union_tags
        loc = loc[1:2] + loc[3:] if loc[1:2] == ["payload"] and len(loc) > 2 and loc[2] in tags else loc[1:]
    # No `input`: a 422 never echoes what was sent; and a URL a message quotes shows no credentials.
    msg = error.get("msg")
    cleaned = {
        "type": error.get("type"),
        "loc": [*prefix, *loc],
        "msg": mask_urls(msg) if isinstance(msg, str) else msg,
    }
    if error.get("ctx"):
        cleaned["ctx"] = {key: mask_urls(str(value)) for key, value in error["ctx"].items()}
    return cleaned


def _body(code: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"detail": detail, "code": code, **extra}


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse(_body(exc.code, exc.detail, **exc.extra), exc.status, headers=exc.headers)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:  # FastAPI could not read the body as JSON: the answer the contract gives for that
        detail = "The body is not valid JSON (UTF-8); send a JSON object."
        return JSONResponse(_body("invalid_json", detail), 422)
    code = {404: "not_found", 405: "method_not_allowed", 408: "body_timeout"}.get(exc.status_code, "http_error")
    headers = exc.headers
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": ", ".join(_allowed(request))}
    return JSONResponse(_body(code, str(exc.detail)), exc.status_code, headers=headers)


def _allowed(request: Request) -> list[str]:
    """Every method the OpenAPI document lists at this path (Starlette's own answer names one route's only)."""
    for template, operations in request.app.openapi()["paths"].items():
        if re.fullmatch(re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)), request.url.path):
            return sorted(method.upper() for method in operations)
    return []


async def _request_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    error = validation_errors(list(exc.errors()), prefix=())
    return JSONResponse(_body(error.code, error.detail, **error.extra), 422)


# PostgreSQL's text holds no NUL: an id or a field with one is refused there (SQLite and MSSQL store it).
UNSTORABLE_TEXT = {"22021", "22P05"}  # character_not_in_repertoire, untranslatable_character


DATABASE_MODULES = ("sqlalchemy.", "asyncpg.", "aiosqlite.", "aioodbc.", "pyodbc.")


def _from_the_database(exc: BaseException) -> bool:
    """Whether the database said it (a DBAPIError), or its driver raised it (a bare OSError while connecting):
    an OSError from anywhere else, say a file read, is our bug, never an "unreachable database" to retry."""
    if isinstance(exc, DBAPIError):
        return True
    frame = exc.__traceback__
    while frame is not None:
        if frame.tb_frame.f_globals.get("__name__", "").startswith(DATABASE_MODULES):
            return True
        frame = frame.tb_next
    return False


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # DBAPIError and OSError come here through ExceptionMiddleware (a clean answer, nothing re-raised);
    # anything else through ServerErrorMiddleware, which logs it again after this answer.
    if is_unreachable(exc) and _from_the_database(exc):
        logger.warning("database unreachable during {} {}: {}", request.method, request.url.path, exc)
        detail = "The database is unreachable, so nothing was saved; retry in a few seconds."
        headers = {"Retry-After": str(DB_RETRY_AFTER)}
        return JSONResponse(_body("database_unavailable", detail), 503, headers=headers)
    if sqlstate(exc) in UNSTORABLE_TEXT:
        detail = "A text value holds a character the database cannot store (NUL, U+0000); remove it and retry."
        return JSONResponse(_body("invalid_text", detail), 422)
    logger.exception("unhandled error in {} {}", request.method, request.url.path)
    detail = "Something went wrong on our side; quote the X-Request-ID header when you report it."
    return JSONResponse(_body("internal_error", detail), 500)


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    """`_unexpected` for what no inner handler took: Starlette answers it outside every middleware, so the request
    id middleware never sees this answer and it carries the id itself (the inner ones get it there, once)."""
    answer = await _unexpected(request, exc)
    if request_id := correlation_id.get():
        answer.headers["X-Request-ID"] = request_id
    return answer


async def _bad_cursor(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(_body("bad_cursor", str(exc)), 422)


async def _unsafe_url(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(_body("unsafe_url", mask_urls(str(exc))), 422)


async def _secrets_unavailable(_: Request, exc: Exception) -> JSONResponse:
    logger.error("{}", exc)
    return JSONResponse(_body("secrets_unavailable", str(exc)), 503)


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the one shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(BadCursor, _bad_cursor)
    app.add_exception_handler(UnsafeURL, _unsafe_url)
    app.add_exception_handler(SecretsUnavailable, _secrets_unavailable)
    for kind in (DBAPIError, OSError):
        app.add_exception_handler(kind, _unexpected)
    app.add_exception_handler(Exception, _server_error)
