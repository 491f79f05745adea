"""What a search of the jobs list may ask, and the WHERE clauses it makes: exact ids and keys (each read through an
index), and payload fields (read row by row along the newest-first scan of the caller's jobs)."""

import re
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, or_

from app.models.tables import JOBS

# A field of the payload is named by plain identifiers, `order_id` or `customer.id`: no quoting, no array index.
FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MAX_PAYLOAD_FILTERS = 3
MAX_FIELD_DEPTH = 4
# The exact-match filters: the column each one reads; `q` matches any of them.
KEYED = {
    "id": JOBS.c.id,
    "request_id": JOBS.c.request_id,
    "idempotency_key": JOBS.c.idempotency_key,
    "unique_key": JOBS.c.unique_key,
    "concurrency_key": JOBS.c.concurrency_key,
}


class BadPayloadFilter(ValueError):
    """A `payload.<field>` parameter that names no plain field, or too many of them."""


@dataclass(frozen=True)
class PayloadFilter:
    """A payload field, as its path of names, and the value's text: a number or a string stored there matches."""

    path: tuple[str, ...]
    value: str


@dataclass(frozen=True)
class JobSearch:
    """The filters of one list call; an empty one lists every job the caller may see."""

    status: str | None = None
    job_type: str | None = None
    keys: dict[str, str] = field(default_factory=dict)  # KEYED name -> the exact value
    q: str | None = None
    payload: tuple[PayloadFilter, ...] = ()


def payload_filter(name: str, value: str) -> PayloadFilter:
    """`payload.<field>[.<field>...]` and its value as a filter; BadPayloadFilter says what is wrong with the name."""
    path = tuple(name.split("."))[1:]
    if not path or not all(FIELD_NAME.fullmatch(part) for part in path):
        raise BadPayloadFilter(
            f"{name!r} is not a payload filter: write payload.<field>=<value>, each field a plain name "
            "(letters, digits and _, not starting with a digit), such as payload.order_id=123."
        )
    if len(path) > MAX_FIELD_DEPTH:
        raise BadPayloadFilter(f"{name!r} goes deeper than {MAX_FIELD_DEPTH} fields; filter on a field nearer the top.")
    return PayloadFilter(path, value)


def payload_filters(pairs: list[tuple[str, str]]) -> tuple[PayloadFilter, ...]:
    """Every `payload.*` query parameter as a filter: at most MAX_PAYLOAD_FILTERS, each field once."""
    filters = tuple(payload_filter(name, value) for name, value in pairs if value != "")
    if len(filters) > MAX_PAYLOAD_FILTERS:
        raise BadPayloadFilter(f"At most {MAX_PAYLOAD_FILTERS} payload filters at once; drop one.")
    if len({f.path for f in filters}) < len(filters):
        raise BadPayloadFilter("A payload field is named twice; give each field one value.")
    return filters


def conditions(search: JobSearch) -> list[ColumnElement[bool]]:
    """The WHERE clauses of `search`, to be ANDed with the caller's tenancy."""
    where: list[ColumnElement[bool]] = []
    if search.status:
        where.append(JOBS.c.status == search.status)
    if search.job_type:
        where.append(JOBS.c.job_type == search.job_type)
    where += [KEYED[name] == value for name, value in search.keys.items()]
    if search.q:
        where.append(or_(*(column == search.q for column in KEYED.values())))
    where += [_payload_matches(f) for f in search.payload]
    return where


def _payload_matches(wanted: PayloadFilter) -> ColumnElement[bool]:
    """The field's scalar value as text equals the value: PostgreSQL's `->>`/`#>>` and MSSQL's JSON_VALUE give a
    number and a string alike as their text, and SQLite's JSON_EXTRACT is cast to text, so `123` finds 123 and
    "123"; a missing field, or a payload that is not an object, finds nothing."""
    element = JOBS.c.payload[wanted.path[0] if len(wanted.path) == 1 else wanted.path]
    text: ColumnElement[str] = element.as_string()
    return text == wanted.value
