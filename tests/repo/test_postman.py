"""The Postman collection covers the API's endpoints, one request (or more) per endpoint."""

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.main import create_app
from tests.conftest import make_settings

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_V21 = "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"


def api_endpoints() -> set[tuple[str, str]]:
    """Every (method, path) the application documents, path parameters as `{}`."""
    paths = create_app(make_settings()).openapi()["paths"]
    return {(method.upper(), re.sub(r"\{\w+\}", "{}", path)) for path, ops in paths.items() for method in ops}


def load_collection() -> dict[str, Any]:
    return json.loads((ROOT / "postman_collection.json").read_text())


def requests(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for item in items:
        if "item" in item:
            yield from requests(item["item"])
        else:
            yield item


def endpoint(request: dict[str, Any]) -> tuple[str, str]:
    url = request["url"]
    path = (url["raw"] if isinstance(url, dict) else url).removeprefix("{{base_url}}").split("?")[0]
    return request["method"], re.sub(r"\{\{\w+\}\}", "{}", path)


def test_collection_is_postman_v21_with_its_variables() -> None:
    collection = load_collection()
    variables = {v["key"]: v["value"] for v in collection["variable"]}
    assert collection["info"]["schema"] == SCHEMA_V21
    assert set(variables) == {
        "base_url",
        "admin_key",
        "receiver_url",
        "worker_name",
        "api_key",
        "api_key_id",
        "client_id",
        "run_id",
        "run_started_at",
        "job_id",
        "workflow_id",
        "webhook_id",
        "webhook_secret",
        "delivery_id",
        "rate_limit",
        "polls",
        "schedule_id",
        "job_type",
        "redrive_id",
        "group_id",
    }
    assert variables["base_url"] == "http://127.0.0.1:8000"
    assert collection["auth"]["bearer"] == [{"key": "token", "value": "{{api_key}}", "type": "string"}]


def test_collection_covers_exactly_the_endpoints() -> None:
    items = list(requests(load_collection()["item"]))
    assert {endpoint(item["request"]) for item in items} == api_endpoints()


def script(item: dict[str, Any], listen: str = "test") -> str:
    return "\n".join(
        line for event in item.get("event", []) if event["listen"] == listen for line in event["script"]["exec"]
    )


def test_every_request_asserts_its_status_and_the_request_id() -> None:
    for item in requests(load_collection()["item"]):
        assert "pm.response.to.have.status(" in script(item), item["name"]
        assert 'pm.response.to.have.header("X-Request-ID")' in script(item), item["name"]


def test_every_created_job_is_saved_for_the_requests_that_follow() -> None:
    items = list(requests(load_collection()["item"]))
    creates = [item for item in items if endpoint(item["request"]) == ("POST", "/api/v1/jobs")]
    assert len(creates) == 13
    for item in creates:
        saves = 'pm.collectionVariables.set("job_id", ' in script(item)
        assert saves == ("have.status(201)" in script(item)), item["name"]
    keys = {h["value"] for item in creates for h in item["request"]["header"] if h["key"] == "Idempotency-Key"}
    assert keys == {"{{run_id}}-order-123"}


def test_every_next_request_names_a_request_and_every_poll_is_bounded() -> None:
    items = list(requests(load_collection()["item"]))
    names = [item["name"] for item in items]
    assert len(names) == len(set(names))
    for item in items:
        for target in re.findall(r'setNextRequest\("([^"]+)"\)', script(item)):
            assert target in names, item["name"]
        if "setNextRequest(pm.info.requestName)" in script(item):
            assert "polls < 50" in script(item), item["name"]


def test_structured_urls_agree_with_raw() -> None:
    # Newman builds the URL from host/path, the Postman app shows raw: both must name the same endpoint.
    for item in requests(load_collection()["item"]):
        url = item["request"]["url"]
        assert url["host"] == ["{{base_url}}"]
        assert "/" + "/".join(url["path"]) == url["raw"].removeprefix("{{base_url}}").split("?")[0]
