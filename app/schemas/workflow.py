"""Workflow requests and answers as clients see them (CONTRACT.md "Workflows")."""

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.core.statuses import OnFailure, WorkflowStatus
from app.schemas.job import JobOptions, JobOut
from app.schemas.page import Page
from app.schemas.requests import REQUEST_CONFIG

REF = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class WorkflowEnvelope(BaseModel):
    """The workflow around its items; each item is checked on its own (a job request plus `ref`, `depends_on`)."""

    model_config = REQUEST_CONFIG

    name: str | None = Field(default=None, max_length=200, description="Yours to name it by; not unique.")
    on_failure: Literal["cancel_dependents", "continue"] = Field(
        default="cancel_dependents",
        description="`cancel_dependents`: a job dead-lettered or cancelled cancels every job downstream of it; "
        "`continue`: a dependent runs once all of its dependencies have ended, however they ended.",
    )
    jobs: list[Any] = Field(min_length=1)


@dataclass(frozen=True)
class WorkflowItem:
    """One job of a workflow request: its ref, the refs it depends on, and the job request."""

    ref: str
    depends_on: list[str]
    request: JobOptions


class ItemError(Exception):
    """One item of a workflow is not valid: its index, the field and why (a 422 names them)."""

    def __init__(self, index: int, field: str, message: str, kind: str) -> None:
        super().__init__(message)
        self.index, self.field, self.kind = index, field, kind

    def as_error(self) -> dict[str, Any]:
        return {"type": self.kind, "loc": ["body", "jobs", self.index, self.field], "msg": str(self)}


def check_graph(items: list[WorkflowItem]) -> None:
    """Refs unique, dependencies known, no job depending on itself, no cycle: ItemError names the first item at
    fault (for a cycle, one of its jobs)."""
    _check_acyclic(items, _checked_refs(items))


def _checked_refs(items: list[WorkflowItem]) -> dict[str, int]:
    """Each ref's item, once every ref is unique and every dependency a ref of another item."""
    index: dict[str, int] = {}
    for i, item in enumerate(items):
        if item.ref in index:
            raise ItemError(i, "ref", f"ref {item.ref!r} is also item {index[item.ref]}'s: refs are unique", "ref")
        index[item.ref] = i
    for i, item in enumerate(items):
        for ref in item.depends_on:
            if ref not in index:
                raise ItemError(i, "depends_on", f"depends on {ref!r}, which no job of this workflow is", "depends_on")
            if ref == item.ref:
                raise ItemError(i, "depends_on", f"job {ref!r} depends on itself", "cycle")
    return index


def _check_acyclic(items: list[WorkflowItem], index: dict[str, int]) -> None:
    """Kahn's order over the graph: what it never reaches is on a cycle, or downstream of one."""
    waiting = {item.ref: len(item.depends_on) for item in items}
    dependents: dict[str, list[str]] = {item.ref: [] for item in items}
    for item in items:
        for ref in item.depends_on:
            dependents[ref].append(item.ref)
    ready = [ref for ref, n in waiting.items() if n == 0]
    while ready:
        for child in dependents[ready.pop()]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if stuck := [ref for ref, n in waiting.items() if n > 0]:
        first = min(index[ref] for ref in stuck if _on_cycle(ref, items, index))
        path = " -> ".join(_cycle_from(items[first].ref, items, index))
        raise ItemError(first, "depends_on", f"these jobs depend on each other in a cycle: {path}", "cycle")


def _on_cycle(ref: str, items: list[WorkflowItem], index: dict[str, int]) -> bool:
    """Whether `ref` can reach itself by its dependencies."""
    seen: set[str] = set()
    frontier = list(items[index[ref]].depends_on)
    while frontier:
        current = frontier.pop()
        if current == ref:
            return True
        if current not in seen:
            seen.add(current)
            frontier += items[index[current]].depends_on
    return False


def _cycle_from(ref: str, items: list[WorkflowItem], index: dict[str, int]) -> list[str]:
    """A cycle through `ref` (on one), as the refs along it and back to `ref`."""
    trail = {ref: [ref]}
    frontier = [ref]
    while frontier:
        current = frontier.pop(0)
        for dep in items[index[current]].depends_on:
            if dep == ref:
                return [*trail[current], ref]
            if dep not in trail:
                trail[dep] = [*trail[current], dep]
                frontier.append(dep)
    return [ref]


class WorkflowJobOut(BaseModel):
    """One job of a workflow: its ref, the job, and the refs it depends on."""

    ref: str
    job: JobOut
    depends_on: list[str]


class WorkflowOut(BaseModel):
    """A workflow: its status from its jobs', its jobs' counts by status, and (one workflow) its jobs."""

    id: str
    client_id: str
    name: str | None
    status: WorkflowStatus
    on_failure: OnFailure
    counts: dict[str, int] = Field(description="Its jobs by status.")
    jobs: list[WorkflowJobOut] = Field(
        default_factory=list, description="Every job, in the order submitted (empty in a list of workflows)."
    )
    created_at: datetime
    finished_at: datetime | None


class WorkflowPage(Page[WorkflowOut]):
    pass
