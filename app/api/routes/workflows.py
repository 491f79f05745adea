"""The workflows API: submit a DAG of jobs, read it, list, cancel (CONTRACT.md "Workflows")."""

from typing import Any

from asgi_correlation_id import correlation_id
from fastapi import APIRouter, Request, Response

from app.api.admission import admit, json_object, rate_limit
from app.api.deps import PAGE_SIZE, CursorQuery, LimitQuery, PrincipalDep, StateDep
from app.api.errors import ApiError, not_found
from app.api.workflow_request import workflow_request
from app.core.statuses import WorkflowStatus
from app.schemas.workflow import WorkflowOut, WorkflowPage
from app.services.idempotency import IdempotencyConflict
from app.services.uniqueness import UniqueHeld
from app.services.workflows import CancelRaced

router = APIRouter(prefix="/api/v1/workflows", tags=["workflows"])

WORKFLOW_REQUEST_SCHEMA: dict[str, Any] = {
    "title": "WorkflowRequest",
    "type": "object",
    "additionalProperties": False,
    "required": ["jobs"],
    "properties": {
        "name": {"type": ["string", "null"], "maxLength": 200},
        "on_failure": {"type": "string", "enum": ["cancel_dependents", "continue"], "default": "cancel_dependents"},
        "jobs": {
            "type": "array",
            "minItems": 1,
            "description": "Each item a job request (as the body of POST /api/v1/jobs) with `ref` and `depends_on`; "
            "at most MAX_WORKFLOW_JOBS items (500 unless the service sets another number).",
            "items": {
                "type": "object",
                "required": ["ref", "job_type", "payload"],
                "properties": {
                    "ref": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
                    "depends_on": {"type": "array", "items": {"type": "string"}, "default": []},
                    "job_type": {"type": "string"},
                    "payload": {},
                },
                "additionalProperties": True,
                "description": "A job request (JobRequest: `job_type`, `payload` and its options) with `ref`, "
                "unique in the workflow, and `depends_on`, refs of the same workflow.",
            },
        },
    },
}


@router.post(
    "",
    response_model=WorkflowOut,
    status_code=201,
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": WORKFLOW_REQUEST_SCHEMA}}}
    },
    responses={
        409: {
            "description": "An item's idempotency key was used before, or its unique key is held (`index` names "
            "it); nothing was saved."
        },
        413: {"description": "The body is over the batch size limit (`MAX_BATCH_BODY_BYTES`)."},
        422: {
            "description": "Empty, over MAX_WORKFLOW_JOBS jobs, an invalid item, a ref that is unknown or not "
            "unique, or a cycle: `index` and each error's `loc` (body.jobs.<index>) name the item."
        },
        429: {"description": "The workflow would take the client over its rate limit now (every job counts)."},
        503: {"description": "The database is unreachable, or an item's job type has its circuit open."},
    },
)
async def submit_workflow(request: Request, response: Response, state: StateDep, principal: PrincipalDep) -> Any:
    """Submit 1-500 jobs that depend on one another, all or nothing. Jobs without dependencies start at once; the
    others are `waiting` until every one of their dependencies has succeeded."""
    data = json_object(request)
    jobs = data.get("jobs")
    await rate_limit(state, principal.client_id, response, len(jobs) if isinstance(jobs, list) and jobs else 1)
    envelope, items = workflow_request(data, state.resources.settings.max_workflow_jobs)
    await admit(state, [item.request for item in items], batch=True)
    try:
        workflow = await state.workflows.submit(principal, envelope, items, correlation_id.get())
    except IdempotencyConflict as exc:
        detail = (
            f"Item {exc.index}'s idempotency key {exc.key} was already used, so nothing in this workflow was saved; "
            "give that item a new key."
        )
        raise ApiError(409, "idempotency_conflict", detail, index=exc.index) from exc
    except UniqueHeld as exc:
        detail = (
            f"Item {exc.index}'s unique key {exc.key} is held by {exc.holder}, so nothing in this workflow was "
            "saved; a workflow's job cannot be one made before. Submit it once that job is finished, or without "
            "the key."
        )
        raise ApiError(409, "unique_held", detail, index=exc.index) from exc
    return WorkflowOut.model_validate(workflow)


@router.get("", response_model=WorkflowPage)
async def list_workflows(
    state: StateDep,
    principal: PrincipalDep,
    status: WorkflowStatus | None = None,
    limit: LimitQuery = PAGE_SIZE,
    cursor: CursorQuery = None,
) -> WorkflowPage:
    """The caller's workflows, newest first, each with its jobs' counts by status (not its jobs)."""
    rows, next_cursor = await state.workflows.page(principal, status, limit, cursor)
    return WorkflowPage(items=[WorkflowOut.model_validate(r) for r in rows], next_cursor=next_cursor)


@router.get("/{workflow_id}", response_model=WorkflowOut, responses={404: {"description": "No such workflow."}})
async def get_workflow(workflow_id: str, state: StateDep, principal: PrincipalDep) -> WorkflowOut:
    """One workflow with its jobs, each with the refs it depends on."""
    workflow = await state.workflows.get(principal, workflow_id)
    if workflow is None:
        raise not_found("workflow")
    return WorkflowOut.model_validate(workflow)


@router.post(
    "/{workflow_id}/cancel",
    response_model=WorkflowOut,
    responses={404: {"description": "No such workflow."}, 409: {"description": "Its jobs kept changing."}},
)
async def cancel_workflow(workflow_id: str, state: StateDep, principal: PrincipalDep) -> WorkflowOut:
    """Cancel every job of the workflow that has not started, and stop every running one (it ends `cancelled`
    within seconds, unless it finished first); the workflow ends (`cancelled`, or `failed` if a job was
    dead-lettered) once they have."""
    try:
        workflow = await state.workflows.cancel(principal, workflow_id)
    except CancelRaced as exc:
        raise ApiError(409, "not_cancellable", "The workflow's jobs kept changing; try the cancel again.") from exc
    if workflow is None:
        raise not_found("workflow")
    return WorkflowOut.model_validate(workflow)
