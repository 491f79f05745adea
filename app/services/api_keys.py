"""API keys: random, long, stored as SHA-256 hashes, revocable at once (rule 13)."""

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import API_KEYS
from app.models.types import utcnow
from app.services.tenancy import Principal
from app.services.transitions import Row

KEYS = API_KEYS
KEY_PREFIX = "tq_"
ADMIN_CLIENT = "admin"


def new_key() -> str:
    """A fresh key: 32 random bytes, URL-safe."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class ApiKeyService:
    engine: AsyncEngine
    admin_key: str | None

    async def authenticate(self, key: str) -> Principal | None:
        """The principal a bearer key stands for, or None for an unknown or revoked key."""
        if self.admin_key and hmac.compare_digest(key.encode(), self.admin_key.encode()):
            return Principal(key_id=None, client_id=ADMIN_CLIENT, admin=True)
        query = select(KEYS.c.id, KEYS.c.client_id, KEYS.c.admin).where(
            KEYS.c.key_hash == hash_key(key), KEYS.c.revoked_at.is_(None)
        )
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return Principal(key_id=row.id, client_id=row.client_id, admin=row.admin) if row else None

    async def create(self, client_id: str, admin: bool) -> tuple[Row, str]:
        """Create a key; the plain key is returned this once and never stored."""
        key = new_key()
        row: Row = {
            "id": str(uuid.uuid4()),
            "client_id": client_id,
            "key_hash": hash_key(key),
            "prefix": key[:10],
            "admin": admin,
            "created_at": utcnow(),
            "revoked_at": None,
        }
        async with self.engine.begin() as conn:
            await conn.execute(insert(KEYS).values(**row))
        return row, key

    async def list(self) -> list[Row]:
        query = select(KEYS).order_by(KEYS.c.created_at.desc(), KEYS.c.id)
        async with self.engine.connect() as conn:
            return [dict(r._mapping) for r in await conn.execute(query)]

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key; False when there is no such live key."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(KEYS).where(KEYS.c.id == key_id, KEYS.c.revoked_at.is_(None)).values(revoked_at=utcnow())
            )
        return result.rowcount == 1
