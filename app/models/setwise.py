"""Set-based statements, portable (DESIGN.md rule 14): the one place that shapes portable SQL for many rows at
once. (PostgreSQL's one-statement forms of the hot path, beside these, are the other marked place:
app/stores/*/postgres*.py.)

Per-row values travel as `CASE id WHEN … THEN … END`, standard SQL on PostgreSQL, SQLite and MSSQL, so one
UPDATE changes a batch of rows, each to its own values, with a per-row guard in its WHERE. `RETURNING` (which
SQLAlchemy renders as `OUTPUT inserted.…` for MSSQL) tells which rows the compare-and-set took.
"""

from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, case, literal
from sqlalchemy.sql.schema import Column

_UNSET = object()


def per_row(key: Column[Any], column: Column[Any], values: Mapping[Any, Any]) -> ColumnElement[Any]:
    """`column`'s new value for each row, chosen by `key`; a plain value when every row gets the same one."""
    distinct = _same(values.values())
    if distinct is not _UNSET:
        return literal(distinct, column.type)
    return case({k: literal(v, column.type) for k, v in values.items()}, value=key)


def per_row_of(key: Column[Any], expressions: Mapping[Any, ColumnElement[Any]]) -> ColumnElement[Any]:
    """A column's new value for each row, chosen by `key`, when each row's is an SQL expression of its own (a
    CASE on the row's current values, say) rather than a plain value."""
    return case(dict(expressions), value=key)


def _same(values: Any) -> Any:
    first: Any = _UNSET
    for value in values:
        if first is _UNSET:
            first = value
        elif value != first or type(value) is not type(first):
            return _UNSET
    return first
