"""Time buckets in SQL: the one marked place where the overview's GROUP BY on a time column differs by dialect.

`EpochBucket(column, 60)` is the whole number of minutes from 1970-01-01 UTC to the column's time (its floor), an
integer on every dialect, so the statements that count per minute or per hour stay the same everywhere."""

from typing import Any

from sqlalchemy import BigInteger, ColumnElement, literal_column
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


class EpochBucket(FunctionElement[int]):
    """floor(seconds since the epoch / width) of a UTC time column."""

    type = BigInteger()
    inherit_cache = True
    name = "epoch_bucket"

    def __init__(self, column: ColumnElement[Any], seconds: int) -> None:
        # A literal, not a bound parameter: the same expression then reads alike in SELECT and GROUP BY.
        super().__init__(column, literal_column(str(int(seconds))))


def _parts(element: EpochBucket, compiler: SQLCompiler, **kw: Any) -> tuple[str, str]:
    column, seconds = element.clauses
    return compiler.process(column, **kw), compiler.process(seconds, **kw)


@compiles(EpochBucket, "postgresql")
def _postgresql(element: EpochBucket, compiler: SQLCompiler, **kw: Any) -> str:
    column, seconds = _parts(element, compiler, **kw)
    return f"CAST(floor(extract(epoch FROM {column}) / {seconds}) AS BIGINT)"


@compiles(EpochBucket, "sqlite")
def _sqlite(element: EpochBucket, compiler: SQLCompiler, **kw: Any) -> str:
    column, seconds = _parts(element, compiler, **kw)  # naive UTC text, which strftime reads as UTC
    return f"(CAST(strftime('%s', {column}) AS INTEGER) / {seconds})"


@compiles(EpochBucket, "mssql")
def _mssql(element: EpochBucket, compiler: SQLCompiler, **kw: Any) -> str:
    column, seconds = _parts(element, compiler, **kw)
    return f"(DATEDIFF_BIG(second, '1970-01-01', {column}) / {seconds})"
