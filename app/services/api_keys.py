"""API keys: random, long, stored as SHA-256 hashes, revocable at once (rule 13)."""

import asyncio
import contextlib
import hashlib
import hmac
import secrets
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from loguru import logger
from redis.exceptions import RedisError

from app.core.redis_batch import RedisBatch
from app.models.rows import ApiKeyRow
from app.models.types import utcnow
from app.services.tenancy import Principal
from app.stores.api_keys import ApiKeyStore

KEY_PREFIX = "tq_"
ADMIN_CLIENT = "admin"
CACHED_KEYS = 10_000
BUMP_WAIT_SECONDS = 2.0
BUMP_RETRY_SECONDS = 1.0


def new_key() -> str:
    """A fresh key: 32 random bytes, URL-safe."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class ApiKeyService:
    """Keys looked up in the database once, then served from memory while no key anywhere has been revoked
    since: every request asks Redis for the revocation generation (one GET, much cheaper than a query), and a
    revocation bumps it after its commit, so a revoked key gets 401 at once in every process. Without Redis,
    every request asks the database."""

    store: ApiKeyStore
    admin_key: str | None
    redis: RedisBatch | None = None  # requests asking at the same time share one GET
    generation_key: str = ""
    _cache: "OrderedDict[str, tuple[Principal, bytes]]" = field(default_factory=OrderedDict)
    _pending_bump: "asyncio.Task[None] | None" = None

    async def authenticate(self, key: str) -> Principal | None:
        """The principal a bearer key stands for, or None for an unknown or revoked key."""
        if self.admin_key and hmac.compare_digest(key.encode(), self.admin_key.encode()):
            return Principal(key_id=None, client_id=ADMIN_CLIENT, admin=True)
        digest = hash_key(key)
        generation = await self.generation()
        cached = self._cache.get(digest)
        if cached is not None and generation is not None and cached[1] == generation:
            self._cache.move_to_end(digest)
            return cached[0]
        principal = await self._lookup(digest)
        if principal is not None and generation is not None:
            self._remember(digest, principal, generation)
        return principal

    async def _lookup(self, digest: str) -> Principal | None:
        row = await self.store.live(digest)
        return Principal(key_id=row["id"], client_id=row["client_id"], admin=row["admin"]) if row else None

    def _remember(self, digest: str, principal: Principal, generation: bytes) -> None:
        self._cache[digest] = (principal, generation)
        if len(self._cache) > CACHED_KEYS:
            self._cache.popitem(last=False)

    async def generation(self) -> bytes | None:
        """The revocation generation, a random token (a Redis that lost it gets a new one, so no stale cache
        survives a Redis restart); None (trust nothing cached) when Redis cannot say."""
        if self.redis is None:
            return None
        try:
            value = await self.redis.call("GET", self.generation_key, share=("GET", self.generation_key))
            if value is None:
                await self.redis.call("SET", self.generation_key, secrets.token_hex(8), "NX")
                value = await self.redis.call("GET", self.generation_key)
        except (RedisError, OSError):
            return None
        return value.encode() if isinstance(value, str) else value

    async def revoked_among(self, key_ids: set[str]) -> set[str]:
        """Those of `key_ids` that are revoked (or gone)."""
        return key_ids - await self.store.live_among(key_ids)

    async def _bump(self) -> None:
        """A new generation, so every process stops trusting its cache; retried until Redis takes it."""
        assert self.redis is not None
        while True:
            try:
                await self.redis.call("SET", self.generation_key, secrets.token_hex(8))
                return
            except (RedisError, OSError) as exc:
                logger.warning("a key was revoked but Redis is unreachable ({}); cached keys wait for it", exc)
                await asyncio.sleep(BUMP_RETRY_SECONDS)

    async def create(self, client_id: str, admin: bool) -> tuple[ApiKeyRow, str]:
        """Create a key; the plain key is returned this once and never stored."""
        key = new_key()
        row: ApiKeyRow = {
            "id": str(uuid.uuid4()),
            "client_id": client_id,
            "key_hash": hash_key(key),
            "prefix": key[:10],
            "admin": admin,
            "created_at": utcnow(),
            "revoked_at": None,
        }
        await self.store.add(row)
        return row, key

    async def list(self) -> list[ApiKeyRow]:
        return await self.store.newest_first()

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key; False when there is no such live key."""
        revoked = await self.store.revoke(key_id)
        self._cache.clear()
        if self.redis is not None:
            # While Redis is down no process trusts its cache anyway; the bump must land before it is back.
            self._pending_bump = asyncio.create_task(self._bump(), name="api-keys-generation")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._pending_bump), BUMP_WAIT_SECONDS)
        return revoked
