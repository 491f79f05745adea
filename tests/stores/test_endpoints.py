"""The webhook endpoints' store, on PostgreSQL and SQLite (one implementation serves both): a client sees its own
endpoints and an admin (no client) every one, a deleted endpoint reads as missing, changes stamp `updated_at`, and
the health statements track and disable endpoints in the caller's transaction."""

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.models.rows import EndpointRow
from app.stores.endpoints import EndpointStore
from app.stores.endpoints.sql import SqlEndpoints
from tests.conftest import NS
from tests.support import stores_for

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def endpoints(engine: AsyncEngine) -> EndpointStore:
    return stores_for(engine, Names(NS)).endpoints


def a_client() -> str:
    return "c_" + uuid.uuid4().hex[:12]


def an_endpoint(client_id: str, at: datetime = AT, **overrides: Any) -> EndpointRow:
    row = {
        "id": str(uuid.uuid4()),
        "client_id": client_id,
        "url": "https://example.com/hook",
        "events": ["job.succeeded"],
        "job_type": None,
        "job_id": None,
        "description": None,
        "active": True,
        "disabled_reason": None,
        "failing_since": None,
        "secret": "sealed",
        "previous_secret": None,
        "previous_expires_at": None,
        "created_at": at,
        "updated_at": at,
        "deleted_at": None,
    }
    return cast(EndpointRow, {**row, **overrides})


async def test_every_database_gets_the_one_sql_implementation(engine: AsyncEngine) -> None:
    assert isinstance(endpoints(engine), SqlEndpoints)


async def test_a_client_sees_its_own_endpoints_and_an_admin_every_ones(engine: AsyncEngine) -> None:
    store, mine, theirs = endpoints(engine), a_client(), a_client()
    first, second = an_endpoint(mine), an_endpoint(mine, AT + timedelta(seconds=1))
    other, deleted = an_endpoint(theirs), an_endpoint(mine, deleted_at=AT, active=False)
    for row in (second, other, first, deleted):
        await store.add(row)
    assert [e["id"] for e in await store.live(mine)] == [first["id"], second["id"]]
    assert await store.get(first["id"], mine) == first
    assert await store.get(other["id"], mine) is None  # another client's reads as missing
    assert await store.get(other["id"], None) == other  # an admin's read
    assert await store.get(deleted["id"], None) is None
    everyone = [e["id"] for e in await store.live(None)]
    assert {first["id"], second["id"], other["id"]} <= set(everyone) and deleted["id"] not in everyone


async def test_read_sees_the_callers_transaction(engine: AsyncEngine) -> None:
    store, client = endpoints(engine), a_client()
    endpoint = an_endpoint(client)
    await store.add(endpoint)
    async with engine.begin() as conn:
        assert await store.read(conn, endpoint["id"], client) == endpoint
        assert await store.read(conn, endpoint["id"], a_client()) is None


async def test_change_sets_the_columns_and_reads_the_endpoint_back(engine: AsyncEngine) -> None:
    store, client = endpoints(engine), a_client()
    endpoint = an_endpoint(client, active=False, disabled_reason="gone")
    await store.add(endpoint)
    changed = await store.change(endpoint["id"], client, {"active": True, "disabled_reason": None})
    assert changed is not None
    assert (changed["active"], changed["disabled_reason"]) == (True, None)
    assert changed["updated_at"] > AT
    assert await store.change(endpoint["id"], a_client(), {"active": False}) is None
    assert (await store.get(endpoint["id"], client) or {}).get("active") is True


async def test_update_live_leaves_a_deleted_or_anothers_endpoint_alone(engine: AsyncEngine) -> None:
    store, client = endpoints(engine), a_client()
    endpoint = an_endpoint(client)
    await store.add(endpoint)
    assert not await store.update_live(endpoint["id"], a_client(), {"description": "not yours"})
    assert await store.update_live(endpoint["id"], None, {"deleted_at": AT, "active": False})
    assert not await store.update_live(endpoint["id"], client, {"description": "too late"})
    assert await store.get(endpoint["id"], None) is None
    assert await store.change(endpoint["id"], None, {"active": True}) is None


async def test_the_health_statements_track_and_disable_in_the_callers_transaction(engine: AsyncEngine) -> None:
    store, client, now = endpoints(engine), a_client(), datetime.now(UTC).replace(microsecond=0)
    long_ago, cutoff = now - timedelta(hours=2), now - timedelta(hours=1)
    healthy, failing = an_endpoint(client, failing_since=long_ago), an_endpoint(client, failing_since=long_ago)
    new, gone = an_endpoint(client), an_endpoint(client)
    for row in (healthy, failing, new, gone):
        await store.add(row)
    async with engine.begin() as conn:
        await store.clear_failing(conn, [healthy["id"]])
        await store.mark_failing(conn, [failing["id"], new["id"]], now)
        found = await store.failing_since(conn, [healthy["id"], failing["id"], new["id"]], cutoff)
        assert found == [(failing["id"], long_ago)]  # its failing period was running: not restarted
        reasons = {failing["id"]: "failing", new["id"]: "failing", gone["id"]: "410"}
        assert await store.disable(conn, reasons, [gone["id"]], cutoff, now) == {failing["id"], gone["id"]}
    rows = {e["id"]: e for e in await store.live(client)}
    assert rows[healthy["id"]]["failing_since"] is None
    assert (rows[new["id"]]["active"], rows[new["id"]]["failing_since"]) == (True, now)  # not failing long enough
    disabled = [rows[e] for e in (failing["id"], gone["id"])]
    assert [(e["active"], e["disabled_reason"], e["updated_at"]) for e in disabled] == [
        (False, "failing", now),
        (False, "410", now),
    ]
