"""The API keys' store, on PostgreSQL and SQLite (one implementation serves both): a key is found by its hash until
it is revoked, revoked once, and listed newest first, revoked ones too."""

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.models.rows import ApiKeyRow
from app.services.api_keys import hash_key, new_key
from app.stores.api_keys import ApiKeyStore
from app.stores.api_keys.sql import SqlApiKeys
from tests.conftest import NS
from tests.support import stores_for

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def api_keys(engine: AsyncEngine) -> ApiKeyStore:
    return stores_for(engine, Names(NS)).api_keys


def a_key(at: datetime = AT, admin: bool = False) -> ApiKeyRow:
    key = new_key()
    return {
        "id": str(uuid.uuid4()),
        "client_id": "c_" + uuid.uuid4().hex[:12],
        "key_hash": hash_key(key),
        "prefix": key[:10],
        "admin": admin,
        "created_at": at,
        "revoked_at": None,
    }


async def test_every_database_gets_the_one_sql_implementation(engine: AsyncEngine) -> None:
    assert isinstance(api_keys(engine), SqlApiKeys)


async def test_a_key_is_found_by_its_hash_until_it_is_revoked(engine: AsyncEngine) -> None:
    store, key, other = api_keys(engine), a_key(admin=True), a_key()
    await store.add(key)
    await store.add(other)
    assert await store.live(key["key_hash"]) == key
    assert await store.live(hash_key(new_key())) is None
    assert await store.revoke(key["id"])
    assert not await store.revoke(key["id"])  # no live key left to revoke
    assert not await store.revoke(str(uuid.uuid4()))
    assert await store.live(key["key_hash"]) is None
    assert await store.live(other["key_hash"]) == other


async def test_live_among_leaves_out_the_revoked_and_the_unknown(engine: AsyncEngine) -> None:
    store, live, revoked = api_keys(engine), a_key(), a_key()
    for key in (live, revoked):
        await store.add(key)
    await store.revoke(revoked["id"])
    unknown = str(uuid.uuid4())
    assert await store.live_among({live["id"], revoked["id"], unknown}) == {live["id"]}


async def test_keys_are_listed_newest_first_revoked_ones_too(engine: AsyncEngine) -> None:
    store = api_keys(engine)
    older, newer = a_key(AT), a_key(AT + timedelta(seconds=1))
    for key in (older, newer):
        await store.add(key)
    await store.revoke(older["id"])
    ours = [k for k in await store.newest_first() if k["id"] in (older["id"], newer["id"])]
    assert [k["id"] for k in ours] == [newer["id"], older["id"]]
    assert ours[0]["revoked_at"] is None and ours[1]["revoked_at"] is not None
