"""Recent warnings and errors of every process, from the capped list each one writes to in Redis."""

from typing import Annotated

from fastapi import APIRouter, Query
from redis.exceptions import RedisError

from app.api.deps import AdminDep, StateDep
from app.api.errors import ApiError
from app.core.recent_logs import KEPT, LogLevel, recent
from app.schemas.log import LogRecordOut

router = APIRouter(prefix="/api/v1/logs", tags=["operations"])


@router.get(
    "",
    response_model=list[LogRecordOut],
    summary="Recent warnings and errors of every process",
    responses={
        403: {"description": "The key is not an admin key."},
        503: {"description": "Redis, which holds the records, is unreachable."},
    },
)
async def recent_logs(
    state: StateDep,
    _: AdminDep,
    level: LogLevel = LogLevel.WARNING,
    limit: Annotated[int, Query(ge=1, le=KEPT)] = 100,
) -> list[LogRecordOut]:
    """The latest log records of every API and worker process at `level` or above, newest first. Each process
    keeps its records at WARNING and above in one list shared by all (the newest 1,000 are kept), and those below
    WARNING that its LOG_LEVEL lets through (one INFO line per finished job, with its request id) in another of
    the same size. API keys, webhook secrets, `Authorization` values and
    SECRET_ENCRYPTION_KEY are redacted before a record is written anywhere."""
    names = state.resources.names
    try:
        keys = (names.recent_logs_key, names.recent_info_logs_key)
        records = await recent(state.resources.redis, keys, level, limit)
    except RedisError as exc:
        raise ApiError(503, "redis_unavailable", "Redis is unreachable, so recent logs cannot be read.") from exc
    return [LogRecordOut.model_validate(record) for record in records]
