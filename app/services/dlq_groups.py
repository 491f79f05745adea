"""The DLQ's failure groups: the caller's dead jobs counted by what they died of (core/failure_groups.py), biggest
group first, each with one of its jobs as an example (docs/dlq.md).

Two statements a page: one GROUP BY over the partial index `ix_jobs_failure_group` (client_id, failure_group,
job_type, finished_at, id, dead jobs only), which PostgreSQL answers by an index-only scan, and one read of the
examples by primary key. Jobs dead-lettered before migration 0015 on a database upgraded by rendered SQL (MSSQL)
may have no group: those make one group per job type whose id is null (they are replayed by type, not by group).
"""

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.cursors import MAX_CURSOR_LENGTH, BadCursor
from app.core.failure_groups import MESSAGE_CHARS, error_class, masked
from app.core.statuses import JobStatus
from app.models.tables import JOBS
from app.services.tenancy import Principal, visible_to

LISTING = "dlq-groups"
GROUP_ID_LENGTH = 16

group_count = func.count().label("count")
group_first = func.min(JOBS.c.finished_at).label("first_seen")
group_last = func.max(JOBS.c.finished_at).label("last_seen")
group_example = func.max(JOBS.c.id).label("example_id")  # any one of its jobs; max(id) is in the index
# The tie-break after the count and the last time seen: a NULL group sorts as '' on every database.
group_key = func.coalesce(JOBS.c.failure_group, "")

Position = tuple[int, datetime, str, str]  # count, last_seen, job_type, group key of the last group served


def is_group_id(text: str) -> bool:
    """Whether `text` could be a group's id (16 lowercase hex digits): anything else names no group."""
    return len(text) == GROUP_ID_LENGTH and all(c in "0123456789abcdef" for c in text)


@dataclass(frozen=True)
class DlqGroups:
    engine: AsyncEngine

    async def page(
        self, principal: Principal, job_type: str | None, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Groups of the caller's dead jobs, biggest first (ties: seen last, latest first), and the cursor to
        the next page when more may follow."""
        groups = await self._with_examples(principal, page_query(principal, job_type, limit + 1, cursor))
        if len(groups) <= limit:
            return groups, None
        last = groups[limit - 1]
        return groups[:limit], _encode((last["count"], last["last_seen"], last["job_type"], last["id"] or ""))

    async def one(self, principal: Principal, group_id: str) -> dict[str, Any] | None:
        """The caller's group with this id, or None when none of the caller's dead jobs is in it."""
        if not is_group_id(group_id):
            return None
        groups = await self._with_examples(principal, _counted(principal).where(JOBS.c.failure_group == group_id))
        return groups[0] if groups else None

    async def _with_examples(self, principal: Principal, query: Select[Any]) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            counted = [row._mapping for row in await conn.execute(query)]
            ids = [row["example_id"] for row in counted]
            examples_query = select(JOBS.c.id, JOBS.c.error, JOBS.c.dead_reason, JOBS.c.attempts).where(
                JOBS.c.id.in_(ids), visible_to(JOBS, principal)
            )
            examples = {row.id: row._mapping for row in await conn.execute(examples_query)} if ids else {}
        return [_group(row, examples.get(row["example_id"])) for row in counted]


def page_query(principal: Principal, job_type: str | None, limit: int, cursor: str | None) -> Select[Any]:
    """The GROUP BY of one page: `limit` groups after `cursor`'s, in the page order (bench/dlq_groups.py explains
    it)."""
    query = _counted(principal)
    if job_type:
        query = query.where(JOBS.c.job_type == job_type)
    if cursor:
        query = query.having(_after(_decode(cursor)))
    return query.order_by(group_count.desc(), group_last.desc(), JOBS.c.job_type, group_key).limit(limit)


def _counted(principal: Principal) -> Select[Any]:
    """The caller's dead jobs counted by failure group (and job type, which a NULL group is split by)."""
    return (
        select(JOBS.c.failure_group, JOBS.c.job_type, group_count, group_first, group_last, group_example)
        .where(visible_to(JOBS, principal), JOBS.c.status == JobStatus.DEAD_LETTERED)
        .group_by(JOBS.c.failure_group, JOBS.c.job_type)
    )


def _group(row: Any, example: Any) -> dict[str, Any]:
    error = example["error"] if example is not None else None
    message = masked(str((error or {}).get("message") or ""))[:MESSAGE_CHARS]
    return {
        "id": row["failure_group"],
        "job_type": row["job_type"],
        "error_class": error_class(error),
        "message": message,
        "count": row["count"],
        "first_seen": row["first_seen"],
        "last_seen": row["last_seen"],
        "example": {
            "job_id": row["example_id"],
            "error": error,
            "reason": example["dead_reason"] if example is not None else None,
            "attempts": example["attempts"] if example is not None else 0,
        },
    }


def _after(position: Position) -> ColumnElement[bool]:
    """Groups after `position` in the page order, spelled out (row values are not T-SQL)."""
    count, last_seen, job_type, key = position
    same_count = group_count == count
    same_seen = and_(same_count, group_last == last_seen)
    same_type = and_(same_seen, JOBS.c.job_type == job_type)
    return or_(
        group_count < count,
        and_(same_count, group_last < last_seen),
        and_(same_seen, JOBS.c.job_type > job_type),
        and_(same_type, group_key > key),
    )


def _encode(position: Position) -> str:
    count, last_seen, job_type, key = position
    raw = json.dumps([LISTING, count, last_seen.isoformat(), job_type, key]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str) -> Position:
    """The position a cursor of this list names; BadCursor for any text `_encode` would not have made."""
    try:
        if len(cursor) > 2 * MAX_CURSOR_LENGTH:  # room for a 64-character job type
            raise ValueError("too long")
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        named, count, stamp, job_type, key = json.loads(raw)
        position = (int(count), datetime.fromisoformat(stamp), str(job_type), str(key))
        if named != LISTING or position[1].tzinfo is None or _encode(position) != cursor:
            raise ValueError("not a cursor of this list")
        return position
    except (binascii.Error, ValueError, TypeError, AttributeError) as exc:
        raise BadCursor("cursor is not one this list returned; start again without it") from exc
