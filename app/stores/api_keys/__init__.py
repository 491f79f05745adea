"""The API keys' rows (rule 13): a key's SHA-256 hash, never the key; revoked, never deleted.

One implementation, `sql.SqlApiKeys`, serves every database (PostgreSQL, SQLite, MSSQL by rendering): a request
reads a key here only when its process has none cached, so no statement is hot enough for a PostgreSQL twin."""

from typing import Protocol

from app.models.rows import ApiKeyRow


class ApiKeyStore(Protocol):
    async def add(self, key: ApiKeyRow) -> None:
        """A new key, every column given."""

    async def live(self, key_hash: str) -> ApiKeyRow | None:
        """The key with this hash, unless it is revoked."""

    async def live_among(self, key_ids: set[str]) -> set[str]:
        """Those of `key_ids` that are neither revoked nor gone."""

    async def newest_first(self) -> list[ApiKeyRow]:
        """Every key, revoked ones too, newest first."""

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key now; False when there is no such live key."""
