"""The event bodies' fields as docs/webhooks.md shows them, rendered from the catalogue's JSON Schemas (so the page
says what the schemas say). `python -m app.services.event_docs` writes them between the page's two markers;
tests/repo/test_event_docs.py checks that the page holds what this renders."""

import sys
from pathlib import Path
from typing import Any

from app.core.event_bodies import JobEventBody, TestEventBody, WorkflowEventBody, event_schema

PAGE = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
START, END = "<!-- event-bodies: start -->", "<!-- event-bodies: end -->"
OBJECTS = {"EventError": "Error", "EventProgress": "Progress", "EventJob": "Job", "EventWorkflow": "Workflow"}


def type_of(node: dict[str, Any], defs: dict[str, Any]) -> str:
    """A property's JSON type in a few words: `string`, `date-time`, `Job`, `string or null`, one of an enum."""
    if "anyOf" in node:
        return " or ".join(type_of(option, defs) for option in node["anyOf"])
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return OBJECTS[name] if name in OBJECTS else type_of(defs[name], defs)
    if "enum" in node:
        return "one of " + ", ".join(f"`{value}`" for value in node["enum"])
    kind = node.get("type")
    if kind == "array":
        return f"array of {type_of(node['items'], defs)}"
    if kind == "object" and "additionalProperties" in node:
        return f"object of {type_of(node['additionalProperties'], defs)}"
    if kind is None:
        return "any JSON"
    return str(node.get("format", kind))


def table(title: str, schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", ()))
    lines = [f"**{title}**", "", "| field | type |", "|---|---|"]
    for name, node in schema["properties"].items():
        shown = type_of(node, defs) + ("" if name in required else " (may be absent)")
        lines.append(f"| `{name}` | {shown} |")
    return [*lines, ""]


def render() -> str:
    """The section: the body every event has, then each object it carries, field by field."""
    test = event_schema(TestEventBody, "webhook.test")
    body = {**test, "properties": {**test["properties"], "type": {"type": "string"}, "data": {"type": "object"}}}
    lines = table("Every event's body", body, {})
    lines[-1:] = [
        "",
        '`type` is the event type; `data` is `{"job": Job}` for `job.*` (`job.progress` too), `{"workflow": Workflow}`'
        ' for `workflow.*`, and `{"webhook_id": string}` for `webhook.test`.',
        "",
    ]
    jobs = event_schema(JobEventBody, "job")["$defs"]
    for name in ("EventJob", "EventError", "EventProgress"):
        lines += table(OBJECTS[name], jobs[name], jobs)
    workflows = event_schema(WorkflowEventBody, "workflow")["$defs"]
    lines += table("Workflow", workflows["EventWorkflow"], workflows)
    return "\n".join([START, "", *lines, END])


def written(page: str) -> str:
    """`page` with the section between its markers rendered anew."""
    head, rest = page.split(START, 1)
    return head + render() + rest.split(END, 1)[1]


if __name__ == "__main__":
    PAGE.write_text(written(PAGE.read_text()))
    sys.exit(0)
