"""The OpenAPI document as tools read it: valid against the OpenAPI specification, every operation with a readable
unique operationId, a summary and its error answers in the one error shape, and every example valid."""

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import APIRouter
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from app.api.deps import AdminDep
from app.core.names import SUBSCRIBABLE_EVENTS, TEST_EVENT
from app.main import create_app
from tests.conftest import make_settings

ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}
ADMIN_PATHS = ("/api/v1/api-keys", "/api/v1/workers", "/api/v1/logs")
RATE_LIMITED = [("post", "/api/v1/jobs"), ("post", "/api/v1/jobs/batch")]
DOC = "urn:taskq:openapi"


def document(extra_router: APIRouter | None = None) -> dict[str, Any]:
    app = create_app(make_settings())
    if extra_router is not None:
        app.include_router(extra_router)
    schema: dict[str, Any] = app.openapi()
    return schema


def operations(schema: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    return document()


def test_the_document_is_valid_openapi(openapi: dict[str, Any]) -> None:
    assert openapi["openapi"].startswith("3.1")
    validate(openapi)


def test_every_event_type_is_a_webhook_with_its_body_schema_and_signature_headers(openapi: dict[str, Any]) -> None:
    hooks = openapi["webhooks"]
    assert list(hooks) == [*SUBSCRIBABLE_EVENTS, TEST_EVENT]
    for kind, item in hooks.items():
        media = item["post"]["requestBody"]["content"]["application/json"]
        assert media["schema"]["properties"]["type"] == {"const": kind, "title": "Type", "type": "string"}
        assert "$defs" not in json.dumps(media["schema"])  # inlined: no reference to resolve inside the document
        assert [p["name"] for p in item["post"]["parameters"]] == [
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
        ]
    job = hooks["job.dead_lettered"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert job["properties"]["data"]["properties"]["job"]["properties"]["status"]["const"] == "dead_lettered"


def test_every_operation_has_a_readable_unique_id_and_a_summary(openapi: dict[str, Any]) -> None:
    ids = [operation["operationId"] for _, _, operation in operations(openapi)]
    assert len(ids) == len(set(ids)), sorted(ids)
    assert [i for i in ids if not re.fullmatch(r"[a-z][a-z0-9_]*", i)] == []
    assert {"submit_job", "get_job", "list_webhooks", "replay"} <= set(ids)
    assert [(m, p) for m, p, op in operations(openapi) if not op.get("summary", "").strip()] == []


def expected_errors(method: str, path: str, operation: dict[str, Any]) -> set[int]:
    expected = set()
    if path.startswith("/api/v1/"):
        expected.add(401)
    if path.startswith(ADMIN_PATHS):
        expected.add(403)
    if "{" in path:
        expected.add(404)
    if operation.get("parameters") or operation.get("requestBody"):
        expected.add(422)
    if (method, path) in RATE_LIMITED:
        expected.add(429)
    expected.add(500)  # a fault of ours can happen anywhere
    if operation.get("security"):  # the key is looked up in the database
        expected.add(503)
    return expected


def test_every_operation_documents_its_errors_in_the_error_shape(openapi: dict[str, Any]) -> None:
    missing, wrong_shape = [], []
    for method, path, operation in operations(openapi):
        responses = operation["responses"]
        documented = {int(status) for status in responses}
        missing += [(method, path, s) for s in sorted(expected_errors(method, path, operation) - documented)]
        for status in documented & {401, 403, 404, 422, 429, 500} | (documented & {503} if path != "/ready" else set()):
            schema = responses[str(status)].get("content", {}).get("application/json", {}).get("schema")
            if schema != ERROR_REF:
                wrong_shape.append((method, path, status))
    assert missing == []
    assert wrong_shape == []
    assert "HTTPValidationError" not in openapi["components"]["schemas"]


def test_every_api_operation_and_only_those_declare_the_bearer_scheme(openapi: dict[str, Any]) -> None:
    scheme = openapi["components"]["securitySchemes"]["HTTPBearer"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    secured = {(m, p) for m, p, op in operations(openapi) if op.get("security") == [{"HTTPBearer": []}]}
    api = {(m, p) for m, p, _ in operations(openapi) if p.startswith("/api/v1/")}
    assert ("post", "/api/v1/jobs") in secured
    assert secured == api


def test_rate_limited_answers_document_retry_after(openapi: dict[str, Any]) -> None:
    for method, path in RATE_LIMITED:
        assert "Retry-After" in openapi["paths"][path][method]["responses"]["429"]["headers"]


def test_a_route_added_later_gets_an_id_a_summary_and_its_errors() -> None:
    router = APIRouter(prefix="/api/v1/gadgets")

    @router.post("/{gadget_id}/polish")
    async def polish_gadget(gadget_id: str, _: AdminDep) -> dict[str, str]:
        """Polish one gadget. It shines afterwards."""
        return {"id": gadget_id}

    operation = document(router)["paths"]["/api/v1/gadgets/{gadget_id}/polish"]["post"]

    assert (operation["operationId"], operation["summary"]) == ("polish_gadget", "Polish one gadget")
    assert operation["security"] == [{"HTTPBearer": []}]
    assert {"401", "403", "404", "422"} <= set(operation["responses"])
    assert operation["responses"]["403"]["content"]["application/json"]["schema"] == ERROR_REF


def examples(node: Any, pointer: str = "") -> Iterator[tuple[Any, str]]:
    """Every example in the document, with the JSON pointer of the schema it must fit."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from examples(item, f"{pointer}/{index}")
        return
    if not isinstance(node, dict):
        return
    if "schema" in node:  # a media type or a parameter: `example`, or `examples` as {name: {"value"}}
        if "example" in node:
            yield node["example"], f"{pointer}/schema"
        for named in node.get("examples", {}).values():
            yield named["value"], f"{pointer}/schema"
    elif isinstance(node.get("examples"), list):  # a schema: a list of instances
        yield from ((example, pointer) for example in node["examples"])
    for key, child in node.items():
        if key not in ("example", "examples"):
            escaped = key.replace("~", "~0").replace("/", "~1")
            yield from examples(child, f"{pointer}/{escaped}")


def validator_at(openapi: dict[str, Any], pointer: str) -> Draft202012Validator:
    registry: Registry[Any] = Registry().with_resource(DOC, Resource.from_contents(openapi, DRAFT202012))
    return Draft202012Validator({"$ref": f"{DOC}#{pointer}"}, registry=registry)


def test_every_example_fits_its_own_schema(openapi: dict[str, Any]) -> None:
    found = list(examples(openapi))
    pointers = {pointer for _, pointer in found}
    assert "/components/schemas/JobRequest" in pointers
    assert "/components/schemas/JobOut" in pointers
    assert "/components/schemas/DocumentPayload" in pointers
    assert "/components/schemas/ErrorOut" in pointers
    assert any(p.startswith("/paths/") and "/responses/401/" in p for p in pointers)
    problems = [
        (pointer, error.message)
        for example, pointer in found
        for error in validator_at(openapi, pointer).iter_errors(example)
    ]
    assert problems == []


def test_the_example_check_catches_a_wrong_example(openapi: dict[str, Any]) -> None:
    wrong = {"job_type": "document", "payload": {"template": "poster", "pages": 3}}
    assert not validator_at(openapi, "/components/schemas/JobRequest").is_valid(wrong)
    assert not validator_at(openapi, "/components/schemas/ErrorOut").is_valid({"detail": "no code"})


def test_a_database_outage_documents_when_to_retry(openapi: dict[str, Any]) -> None:
    unavailable = [op["responses"]["503"] for m, p, op in operations(openapi) if op.get("security")]
    assert unavailable and all("Retry-After" in response["headers"] for response in unavailable)


def nullable(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "null" or any(nullable(option) for option in schema.get("anyOf", []))


def test_a_schedule_change_documents_no_field_as_nullable(openapi: dict[str, Any]) -> None:
    """Leaving a field out keeps it; null is refused, so the schema offers none."""
    fields = openapi["components"]["schemas"]["ScheduleUpdate"]["properties"]
    assert set(fields) == {"name", "cron", "timezone", "job", "active"}
    assert [name for name, schema in fields.items() if nullable(schema)] == []
