"""The OpenAPI document, finished in one place: readable operation ids, a summary and the error answers of every
operation (in the one error shape), so a route added anywhere gets them without saying so."""

import re
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts

from app.api.deps import get_admin, get_principal
from app.core.event_bodies import inlined
from app.core.names import Names
from app.schemas.errors import ErrorOut
from app.schemas.job import JOB_OUT_EXAMPLE, JOB_REQUEST, JOB_REQUEST_EXAMPLES
from app.services.event_catalogue import catalogue

MAX_SUMMARY = 80
# How every authenticated operation is called: get_principal reads this header itself.
SECURITY_SCHEME = "HTTPBearer"
BEARER = {"type": "http", "scheme": "bearer", "description": "An API key: `Authorization: Bearer <key>`."}
ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}
FASTAPI_422 = {"$ref": "#/components/schemas/HTTPValidationError"}  # not our shape: replaced by ErrorOut
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}
# What each error answer means when a route does not say more, with an example body in the one error shape.
ERRORS: dict[int, tuple[str, str, str]] = {
    401: ("No API key, or an unknown or revoked one.", "unauthorized", "That API key is unknown or revoked."),
    403: ("The call needs an admin API key.", "forbidden", "This call needs an admin API key."),
    413: (
        "The body is over the route's size limit (`MAX_BODY_BYTES`; `MAX_BATCH_BODY_BYTES` for a batch).",
        "body_too_large",
        "The body is over the limit of 262144 bytes; send less in one request.",
    ),
    415: (
        "The body's declared Content-Type is not JSON; send application/json (or no Content-Type).",
        "unsupported_media_type",
        "A body of type text/plain cannot be read; send JSON as application/json (or no Content-Type).",
    ),
    404: ("Nothing with that id for this client.", "not_found", "No job with that id."),
    422: ("A field is missing or out of range; `errors` names each one.", "validation_error", ""),
    429: ("Over the client's rate limit; see Retry-After.", "rate_limited", "Over the limit of 100 jobs a minute."),
    500: (
        "A fault of the service's own, never the request's; quote the X-Request-ID header when you report it.",
        "internal_error",
        "Something went wrong on our side; quote the X-Request-ID header when you report it.",
    ),
    503: (
        "The database is unreachable, so nothing was saved; retry after Retry-After.",
        "database_unavailable",
        "The database is unreachable, so nothing was saved; retry in a few seconds.",
    ),
}
DB_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again (on `database_unavailable`).",
        "schema": {"type": "integer"},
    }
}
# The headers every delivery carries that a receiver verifies it by (the Standard Webhooks scheme).
SIGNATURE_HEADERS = [
    {"name": name, "in": "header", "required": True, "description": text, "schema": {"type": "string"}}
    for name, text in (
        ("webhook-id", "The delivery id (`msg_…`), the same on every retry: deduplicate on it."),
        ("webhook-timestamp", "Unix seconds at this attempt."),
        ("webhook-signature", "`v1,<base64 HMAC-SHA256>` of `{webhook-id}.{webhook-timestamp}.{body}`."),
    )
]
VALIDATION_EXAMPLE = {
    "detail": "The request is not valid: query.limit.",
    "code": "validation_error",
    "errors": [
        {"type": "less_than_equal", "loc": ["query", "limit"], "msg": "Input should be less than or equal to 200"}
    ],
}


def operation_id(route: APIRoute) -> str:
    """The route's function name (`submit_job`, `list_webhooks`): stable, readable, and what generated clients call."""
    return route.name


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema, with the job request union and every operation's summary and error answers."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    schema.setdefault("components", {})["securitySchemes"] = {SECURITY_SCHEME: BEARER}
    components = schema["components"].setdefault("schemas", {})
    request = JOB_REQUEST.json_schema(ref_template="#/components/schemas/{model}")
    components.update(request.pop("$defs", {}))
    components["JobRequest"] = request | {"examples": JOB_REQUEST_EXAMPLES}
    components["JobOut"]["examples"] = [JOB_OUT_EXAMPLE]
    components["ErrorOut"] = ErrorOut.model_json_schema() | {"examples": [VALIDATION_EXAMPLE]}
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if isinstance(route, APIRoute) and route.include_in_schema and context.path_format:
            for method in route.methods or ():
                _finish(schema["paths"][context.path_format][method.lower()], route)
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    schema["webhooks"] = event_webhooks()
    app.openapi_schema = schema
    return schema


def event_webhooks() -> dict[str, Any]:
    """The events a receiver gets, as OpenAPI 3.1 `webhooks`: for each type of the catalogue, the POST it receives,
    its body's schema (inlined), an example, and the headers that sign it (docs/webhooks.md)."""
    return {
        kind.type: {
            "post": {
                "operationId": "on_" + kind.type.replace(".", "_"),
                "summary": kind.description,
                "parameters": SIGNATURE_HEADERS,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": inlined(kind.schema), "example": kind.example}},
                },
                "responses": {
                    "2XX": {"description": "Received. Any other answer (or none within the timeout) is retried."}
                },
            }
        }
        for kind in catalogue(Names("example"))
    }


def _finish(operation: dict[str, Any], route: APIRoute) -> None:
    if _needs(route.dependant, get_principal):
        operation["security"] = [{SECURITY_SCHEME: []}]
    if not route.summary:
        operation["summary"] = _first_sentence(route.description) or operation.get("summary", route.name)
    responses = operation.setdefault("responses", {})
    for status in _error_statuses(operation, route):
        responses.setdefault(str(status), {})
    for status, response in responses.items():
        if int(status) >= 400:
            _error_response(int(status), response)


def _error_statuses(operation: dict[str, Any], route: APIRoute) -> list[int]:
    statuses = []
    if operation.get("security"):
        statuses.append(401)
    if _needs(route.dependant, get_admin):
        statuses.append(403)
    if "{" in route.path_format:  # the router's own path: its parameters are the whole path's
        statuses.append(404)
    if operation.get("requestBody"):
        statuses += [413, 415]  # app/api/request_body.py, on every route that takes a body
    if operation.get("parameters") or operation.get("requestBody"):
        statuses.append(422)
    statuses.append(500)  # any operation, for a fault of ours
    if operation.get("security"):  # the key is looked up in the database, and the route's work is there too
        statuses.append(503)
    return statuses


def _error_response(status: int, response: dict[str, Any]) -> None:
    meaning, code, detail = ERRORS.get(status, ("The request could not be served.", "", ""))
    if response.get("description") in (None, "Validation Error"):
        response["description"] = meaning
    content = response.get("content", {}).get("application/json", {})
    if content.get("schema", ERROR_REF) not in (ERROR_REF, FASTAPI_422):
        return  # an answer of its own shape, such as /ready's 503
    media: dict[str, Any] = {"schema": ERROR_REF}
    if code:
        media["example"] = VALIDATION_EXAMPLE if status == 422 else {"detail": detail, "code": code}
    response["content"] = {"application/json": media}
    if status == 429:
        response.setdefault("headers", RETRY_AFTER)
    if status == 503:
        response.setdefault("headers", DB_RETRY_AFTER)


def _needs(dependant: Dependant, call: Any) -> bool:
    return any(dep.call is call or _needs(dep, call) for dep in dependant.dependencies)


def _first_sentence(text: str | None) -> str:
    """The docstring's opening clause, when it is short enough to be a summary."""
    first = re.split(r"\. |; |: ", " ".join((text or "").split()), maxsplit=1)[0].rstrip(".")
    whole = first.count("(") == first.count(")")  # not cut inside a parenthesis
    return first if whole and len(first) <= MAX_SUMMARY else ""
