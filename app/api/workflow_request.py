"""A workflow's body read and checked before anything is saved: each item a job request plus `ref` and
`depends_on`, then the graph (unknown or duplicate refs, cycles); a 422 names the item at fault."""

from typing import Any

from pydantic import ValidationError

from app.api.errors import ApiError, clean_errors, invalid, validation_errors
from app.schemas.job import JOB_REQUEST
from app.schemas.workflow import REF, ItemError, WorkflowEnvelope, WorkflowItem, check_graph

ITEM_FIELDS = ("ref", "depends_on")  # what a workflow's item holds besides a job request


def workflow_request(data: dict[str, Any], max_jobs: int) -> tuple[WorkflowEnvelope, list[WorkflowItem]]:
    """The workflow a body asks for, every item checked, then its graph; one 422 names every bad field."""
    try:
        envelope = WorkflowEnvelope.model_validate(data)
    except ValidationError as exc:
        raise validation_errors(list(exc.errors())) from exc
    if len(envelope.jobs) > max_jobs:
        detail = f"A workflow holds at most {max_jobs} jobs; this one has {len(envelope.jobs)}. Split it."
        errors = [{"type": "too_long", "loc": ["body", "jobs"], "msg": detail}]
        raise ApiError(422, "validation_error", detail, errors=errors)
    items: list[WorkflowItem] = []
    errors = []
    for index, item in enumerate(envelope.jobs):
        parsed, wrong = parse_item(index, item)
        errors += wrong
        if parsed is not None:
            items.append(parsed)
    if errors:
        raise invalid(errors)
    try:
        check_graph(items)
    except ItemError as exc:
        detail = f"Item {exc.index}: {exc}"
        raise ApiError(422, "validation_error", detail, index=exc.index, errors=[exc.as_error()]) from None
    return envelope, items


def parse_item(index: int, item: Any) -> tuple[WorkflowItem | None, list[dict[str, Any]]]:
    """One item read: the item, or the errors that name its bad fields (`loc` from body.jobs.<index>)."""
    prefix: list[str | int] = ["body", "jobs", index]
    if not isinstance(item, dict):
        return None, [{"type": "model_type", "loc": prefix, "msg": "Input should be an object"}]
    errors: list[dict[str, Any]] = []
    ref, depends_on = item.get("ref"), item.get("depends_on", [])
    if not isinstance(ref, str) or not REF.fullmatch(ref):
        msg = "give each job a ref: 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-'"
        errors.append({"type": "ref", "loc": [*prefix, "ref"], "msg": msg})
    if not isinstance(depends_on, list) or not all(isinstance(r, str) for r in depends_on):
        msg = "depends_on is a list of the refs of jobs in the same workflow"
        errors.append({"type": "depends_on", "loc": [*prefix, "depends_on"], "msg": msg})
    request = {name: value for name, value in item.items() if name not in ITEM_FIELDS}
    try:
        parsed = JOB_REQUEST.validate_python(request)
    except ValidationError as exc:
        return None, errors + clean_errors(list(exc.errors()), tuple(prefix))
    if depends_on and (parsed.run_at is not None or parsed.delay_seconds is not None):
        msg = "a job with dependencies runs when they let it: give run_at or delay_seconds only to a job without"
        errors.append({"type": "depends_on", "loc": [*prefix, "depends_on"], "msg": msg})
    if errors:
        return None, errors
    assert isinstance(ref, str) and isinstance(depends_on, list)
    return WorkflowItem(ref, list(dict.fromkeys(depends_on)), parsed), []
