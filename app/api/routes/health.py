"""Liveness and readiness, without auth."""

import asyncio
import contextlib

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from app.api.deps import StateDep
from app.api.state import ApiState
from app.core.resources import Resources
from app.core.statuses import WorkerState
from app.schemas.health import ReadyOut
from app.services.worker_directory import deployment_state

router = APIRouter(tags=["operations"])
CHECK_TIMEOUT = 2.0
# Without these the service cannot take or move jobs; Redis only speeds it up (it fails open).
CRITICAL = ("database", "rabbitmq")


@router.get("/health")
async def health() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get(
    "/ready",
    responses={
        200: {"model": ReadyOut, "description": "The process can serve."},
        503: {"model": ReadyOut, "description": "A dependency or an enabled worker is down."},
    },
)
async def ready(state: StateDep) -> JSONResponse:
    """Each dependency and worker, and whether this process can serve."""
    database, redis = await asyncio.gather(_database(state.resources), _redis(state.resources))
    components = {
        "database": database,
        "redis": redis,
        "rabbitmq": "healthy" if state.resources.broker.is_up else "unhealthy",
    }
    workers, held = await _workers(state)
    components.update(workers)
    down = [name for name in CRITICAL if components[name] != "healthy"]
    # A worker an operator stopped is stopped on purpose: the process still serves.
    down += [name for name, report in workers.items() if report == WorkerState.STOPPED and name not in held]
    status = "unavailable" if down else ("degraded" if redis != "healthy" else "ok")
    return JSONResponse({"status": status, "components": components}, status_code=503 if down else 200)


async def _workers(state: ApiState) -> tuple[dict[str, str], set[str]]:
    """Each worker's state across every process of the deployment (their heartbeats, and this process's own
    report), and the workers an operator stopped. Without Redis, this process's alone."""
    reports = {name: [report()] for name, report in state.workers.items()}
    held = set(state.held)
    with contextlib.suppress(Exception):  # Redis down or slow: /ready says so under "redis"
        async with asyncio.timeout(CHECK_TIMEOUT):
            for entry in await state.directory.workers():
                if entry["name"] in reports:
                    reports[entry["name"]].append(entry["state"])
            held |= await state.directory.stopped()
    return {name: deployment_state(states) for name, states in reports.items()}, held


async def _database(resources: Resources) -> str:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT), resources.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception:
        return "unhealthy"
    return "healthy"


async def _redis(resources: Resources) -> str:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):
            await resources.redis.ping()
    except Exception:
        return "unhealthy"
    return "healthy"
