"""Claims that two schedulers cannot both win and that never make one wait for the other: DESIGN.md rule 14's
one marked place for the row-lock SQL that differs by dialect.

PostgreSQL takes `FOR UPDATE SKIP LOCKED`; MSSQL the table hint `WITH (UPDLOCK, READPAST, ROWLOCK)` (SQLAlchemy
renders no FOR UPDATE for it); SQLite neither, as its write transactions are serial. On every dialect the caller's
UPDATE keeps the guard it selected by (a status, a version), so the claim is a compare-and-set as well.
"""

from typing import Any

from sqlalchemy import Executable, Select, Table, and_, insert, literal, select
from sqlalchemy.dialects import postgresql, sqlite

MSSQL_SKIP_LOCKED = "WITH (UPDLOCK, READPAST, ROWLOCK)"


def skip_locked(query: Select[Any], table: Table) -> Select[Any]:
    """`query` locking the rows of `table` it reads, passing over rows another transaction holds."""
    return query.with_for_update(skip_locked=True).with_hint(table, MSSQL_SKIP_LOCKED, "mssql")


MSSQL_KEY_RANGE_LOCK = "WITH (UPDLOCK, HOLDLOCK)"


def insert_missing(dialect: str, table: Table, row: dict[str, Any]) -> Executable:
    """Insert `row` unless a row with its primary key exists, never failing for a twin inserted meanwhile:
    `ON CONFLICT DO NOTHING` on PostgreSQL and SQLite; on MSSQL an INSERT ... SELECT ... WHERE NOT EXISTS whose read
    locks the key's range until the transaction ends, so two cannot both insert it."""
    if dialect == "postgresql":
        return postgresql.insert(table).values(row).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(table).values(row).on_conflict_do_nothing()
    same = and_(*(column == row[column.name] for column in table.primary_key.columns))
    there = select(literal(1)).select_from(table).where(same).with_hint(table, MSSQL_KEY_RANGE_LOCK, "mssql")
    values = select(*(literal(value, table.c[name].type).label(name) for name, value in row.items()))
    return insert(table).from_select(list(row), values.where(~there.exists()))


MSSQL_LOCK_ROWS = "WITH (UPDLOCK, ROWLOCK)"


def locked_in_order(query: Select[Any], table: Table) -> Select[Any]:
    """`query` locking the rows of `table` it reads, in its ORDER BY, waiting for rows another transaction holds:
    every caller that orders the same way takes the same rows in the same order, so none waits in a circle."""
    return query.with_for_update().with_hint(table, MSSQL_LOCK_ROWS, "mssql")
