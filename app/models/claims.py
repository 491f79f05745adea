"""Claims that two schedulers cannot both win and that never make one wait for the other: DESIGN.md rule 14's
one marked place for the row-lock SQL that differs by dialect.

PostgreSQL takes `FOR UPDATE SKIP LOCKED`; MSSQL the table hint `WITH (UPDLOCK, READPAST, ROWLOCK)` (SQLAlchemy
renders no FOR UPDATE for it); SQLite neither, as its write transactions are serial. On every dialect the caller's
UPDATE keeps the guard it selected by (a status, a version), so the claim is a compare-and-set as well.
"""

from typing import Any

from sqlalchemy import Select, Table

MSSQL_SKIP_LOCKED = "WITH (UPDLOCK, READPAST, ROWLOCK)"


def skip_locked(query: Select[Any], table: Table) -> Select[Any]:
    """`query` locking the rows of `table` it reads, passing over rows another transaction holds."""
    return query.with_for_update(skip_locked=True).with_hint(table, MSSQL_SKIP_LOCKED, "mssql")
