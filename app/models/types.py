"""Column types that behave the same on PostgreSQL, SQLite and MSSQL (rule 14)."""

from datetime import UTC, datetime

from sqlalchemy import VARBINARY, BigInteger, DateTime, Dialect, Integer, LargeBinary
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in, timezone-aware UTC out; SQLite stores naive UTC text."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column; use datetime.now(UTC)")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# Offline rendering for MSSQL would say IMAGE (deprecated); say what an online migration creates.
Blob = LargeBinary().with_variant(VARBINARY(None), "mssql")

# SQLite only autoincrements an INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    """Now, in UTC, from this process's clock (never the database server's local time)."""
    return datetime.now(UTC)
