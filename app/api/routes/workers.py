"""Workers of every process, from their heartbeats in Redis; stop and start them through the control exchange."""

from typing import Any

from fastapi import APIRouter
from loguru import logger
from redis.exceptions import RedisError

from app.api.deps import AdminDep, StateDep
from app.api.errors import ApiError
from app.api.state import ApiState
from app.core.broker import PublishError
from app.core.statuses import Action
from app.schemas.worker import AcceptedOut, WorkerOut, WorkersOut
from app.services.worker_directory import RUNNABLE, Command, send_command

router = APIRouter(prefix="/api/v1/workers", tags=["operations"])

Responses = dict[int | str, dict[str, Any]]
ADMIN_ONLY: Responses = {403: {"description": "The key is not an admin key."}}
UNKNOWN: Responses = {404: {"description": "No process runs a worker of that name, and this service has none."}}
UNREACHABLE: dict[int | str, dict[str, Any]] = {
    503: {"description": "Redis, which holds the heartbeats and the choice, is unreachable."}
}


async def _live(state: ApiState) -> list[dict[str, Any]]:
    try:
        return await state.directory.workers()
    except RedisError as exc:
        raise ApiError(503, "redis_unavailable", "Redis is unreachable, so the heartbeats cannot be read.") from exc


async def _known(state: ApiState, name: str) -> list[dict[str, Any]]:
    """The live entries of `name`; a 404 unless some process reports it or this service can run it."""
    entries = [worker for worker in await _live(state) if worker["name"] == name]
    if not entries and name not in RUNNABLE:
        raise ApiError(404, "worker_not_found", f"No worker is named {name!r}.")
    return entries


@router.get(
    "", response_model=WorkersOut, summary="Every worker of every live process", responses=ADMIN_ONLY | UNREACHABLE
)
async def list_workers(state: StateDep, _: AdminDep) -> WorkersOut:
    """Each worker of each process that heartbeats (embedded in an API process or on its own); a process that
    stops heartbeating drops out once its heartbeat's TTL (three beats) passes."""
    return WorkersOut(items=[WorkerOut.model_validate(worker) for worker in await _live(state)])


@router.get(
    "/{name}",
    response_model=WorkersOut,
    summary="One worker's entries, one per process",
    responses=ADMIN_ONLY | UNKNOWN | UNREACHABLE,
)
async def get_worker(name: str, state: StateDep, _: AdminDep) -> WorkersOut:
    """The entries of the worker `name`: one per live process that runs it."""
    return WorkersOut(items=[WorkerOut.model_validate(worker) for worker in await _known(state, name)])


async def _command(state: ApiState, name: str, action: Action) -> AcceptedOut:
    await _known(state, name)
    try:
        await state.directory.desire(name, action)
        await send_command(state.resources.broker, state.resources.names, Command(name, action))
    except RedisError as exc:
        raise ApiError(503, "redis_unavailable", "Redis is unreachable, so the choice cannot be kept.") from exc
    except PublishError as exc:  # kept in Redis all the same: each process applies it on its next heartbeat
        logger.warning(
            "worker command {} {} not published ({}); processes apply it on their heartbeat", action, name, exc
        )
    return AcceptedOut(name=name, action=action)


@router.post(
    "/{name}/stop",
    status_code=202,
    response_model=AcceptedOut,
    summary="Stop a worker in every process",
    responses=ADMIN_ONLY | UNKNOWN | UNREACHABLE,
)
async def stop_worker(name: str, state: StateDep, _: AdminDep) -> AcceptedOut:
    """Every process that runs `name` stops it within a few seconds: it takes no new message and lets its
    in-flight ones finish (the shutdown grace); nothing it did not finish is acked. The choice is kept, so a
    process that starts later leaves it stopped until `start`."""
    return await _command(state, name, Action.STOP)


@router.post(
    "/{name}/start",
    status_code=202,
    response_model=AcceptedOut,
    summary="Start a stopped worker in every process",
    responses=ADMIN_ONLY | UNKNOWN | UNREACHABLE,
)
async def start_worker(name: str, state: StateDep, _: AdminDep) -> AcceptedOut:
    """Every process that runs `name` starts it again within a few seconds, and so do processes started later."""
    return await _command(state, name, Action.START)
