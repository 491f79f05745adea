"""CONTRACT's "Limits and bad input", row by row, for the fields: every bad input is a 422 in the error shape,
and nothing is saved, half-saved or changed (the client's jobs, schedules, webhooks and deliveries, and the keys,
are read before and after each row), JSON that RFC 8259 does not allow, 64-bit integers and 64 levels of
nesting included."""

import base64
import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.database import make_engine
from app.main import create_app
from app.models.tables import API_KEYS, DELIVERIES, ENDPOINTS, JOBS, SCHEDULES
from tests.conftest import ADMIN_KEY, make_settings
from tests.support import Api, api_with

NEVER_FIRES = "0 0 31 2 *"
FORGED_CURSOR = "WyIyMDIwLTAxLTAxVDAwOjAwOjAwIiwieCJd"  # ["2020-01-01T00:00:00","x"]


@dataclass
class World:
    """A client of its own with one (paused) schedule and one webhook to change, and the cursors its lists hand
    out."""

    api: Api
    db: AsyncEngine
    client_id: str
    headers: dict[str, str]
    schedule_id: str
    webhook_id: str
    jobs_cursor: str
    schedules_cursor: str

    async def saved(self) -> dict[str, Any]:
        """Everything of this client's (and every key of the admin's client) that a request could have saved."""
        mine = self.client_id
        async with self.db.connect() as conn:
            return {
                "jobs": await _rows(conn, select(JOBS.c.id, JOBS.c.status).where(JOBS.c.client_id == mine)),
                "schedules": await _rows(conn, select(SCHEDULES).where(SCHEDULES.c.client_id == mine)),
                "webhooks": await _rows(conn, select(ENDPOINTS).where(ENDPOINTS.c.client_id == mine)),
                "deliveries": await _rows(conn, select(DELIVERIES.c.id).where(DELIVERIES.c.client_id == mine)),
                "keys": await _rows(conn, select(API_KEYS.c.id).where(API_KEYS.c.client_id.in_([mine, "admin"]))),
            }

    async def send(self, method: str, path: str, body: bytes | None = None, admin: bool = False) -> httpx.Response:
        headers = {**(self.api.admin if admin else self.headers), "Content-Type": "application/json"}
        return await self.api.client.request(method, path.format(w=self), content=body, headers=headers)


async def _rows(conn: Any, query: Any) -> list[dict[str, Any]]:
    return sorted((dict(row._mapping) for row in await conn.execute(query)), key=lambda row: str(row["id"]))


@pytest.fixture(scope="module")
async def world() -> AsyncIterator[World]:
    """One app and one client for the whole table: each row reads what is saved before and after itself."""
    settings = make_settings()
    engine = make_engine(settings.database_url)
    try:
        async with api_with(create_app(settings), ADMIN_KEY) as api:
            yield await _world(api, engine)
    finally:
        await engine.dispose()


async def _world(api: Api, db: AsyncEngine) -> World:
    client_id = "bad-" + uuid.uuid4().hex[:10]
    headers = await api.new_client(client_id)
    for _ in range(2):
        assert (await api.submit(headers, run_at=_in(days=1))).status_code == 201
    schedules = []
    for _ in range(2):
        made = await api.client.post("/api/v1/schedules", json=_schedule(active=False), headers=headers)
        assert made.status_code == 201, made.text
        schedules.append(made.json()["id"])
    hook = await api.client.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/hook"}, headers=headers)
    assert hook.status_code == 201, hook.text
    jobs_cursor = (await api.client.get("/api/v1/jobs?limit=1", headers=headers)).json()["next_cursor"]
    schedules_cursor = (await api.client.get("/api/v1/schedules?limit=1", headers=headers)).json()["next_cursor"]
    assert jobs_cursor and schedules_cursor
    return World(api, db, client_id, headers, schedules[0], hook.json()["id"], jobs_cursor, schedules_cursor)


def _in(**delta: float) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat()


def _schedule(**fields: Any) -> dict[str, Any]:
    return {"name": "nightly", "cron": "0 3 * * *", "job": {"job_type": "echo", "payload": {}}, **fields}


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


async def _refused(
    world: World, method: str, path: str, body: bytes | None, field: str | None, admin: bool = False
) -> None:
    """Sends it and checks the answer is a 422 naming `field` (when given) and that nothing was saved."""
    before = await world.saved()
    answer = await world.send(method, path, body, admin)
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert {"detail", "code"} <= error.keys(), error
    assert field is None or field in error["detail"], error
    assert await world.saved() == before


# -- run_at: 2000-01-01 to a year ahead, whatever its offset -------------------------------------------------------

RUN_AT_OUT_OF_BOUNDS = [
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59.999999-14:00",
    "1999-12-31T23:59:59Z",
    "2000-01-01T00:30:00+01:00",  # 1999-12-31T23:30:00Z
]


@pytest.mark.parametrize("run_at", RUN_AT_OUT_OF_BOUNDS)
async def test_a_run_at_outside_2000_to_a_year_ahead_is_refused(world: World, run_at: str) -> None:
    job = {"job_type": "echo", "payload": {}, "run_at": run_at}
    await _refused(world, "POST", "/api/v1/jobs", _json(job), "body.run_at")


@pytest.mark.parametrize("run_at", RUN_AT_OUT_OF_BOUNDS[:3])
async def test_a_batch_with_one_run_at_out_of_bounds_saves_none_of_its_jobs(world: World, run_at: str) -> None:
    good = {"job_type": "echo", "payload": {}}
    await _refused(world, "POST", "/api/v1/jobs/batch", _json({"jobs": [good, {**good, "run_at": run_at}]}), "run_at")


@pytest.mark.parametrize("days", [366, 3650])
async def test_a_run_at_more_than_a_year_ahead_is_refused(world: World, days: int) -> None:
    job = {"job_type": "echo", "payload": {}, "run_at": _in(days=days)}
    await _refused(world, "POST", "/api/v1/jobs", _json(job), "body.run_at")


async def test_a_run_at_within_the_bounds_is_taken(world: World) -> None:
    for run_at in ("2000-01-01T00:00:00Z", _in(days=364)):
        answer = await world.api.submit(world.headers, run_at=run_at)
        assert answer.status_code == 201, answer.text


# -- cursors: only the ones a list handed out ----------------------------------------------------------------------

LISTS = ["/api/v1/jobs", "/api/v1/schedules", "/api/v1/dlq"]


def _truncated(world: World) -> str:
    return world.jobs_cursor[:-4]


def _re_encoded_naive(world: World) -> str:
    """Our own cursor, its time written without an offset."""
    listing, stamp, row_id = json.loads(base64.urlsafe_b64decode(world.jobs_cursor + "=" * 4))
    naive = json.dumps([listing, stamp.split("+")[0], row_id]).encode()
    return base64.urlsafe_b64encode(naive).decode().rstrip("=")


CURSORS: dict[str, Callable[[World], str]] = {
    "forged": lambda _: FORGED_CURSOR,
    "id_not_text": lambda _: base64.urlsafe_b64encode(b'["jobs", "2020-01-01T00:00:00+00:00", 1]').decode(),
    "not_a_list": lambda _: base64.urlsafe_b64encode(b'{"a": 1}').decode(),
    "deep": lambda _: base64.urlsafe_b64encode(b"[" * 150).decode(),
    "not_base64": lambda _: "!!not base64!!",
    "long": lambda _: "A" * 10_000,
    "truncated": _truncated,
    "time_without_offset": _re_encoded_naive,
}


@pytest.mark.parametrize("listing", LISTS)
@pytest.mark.parametrize("cursor", CURSORS)
async def test_a_cursor_the_list_did_not_hand_out_is_refused(world: World, listing: str, cursor: str) -> None:
    answer = await world.api.client.get(listing, params={"cursor": CURSORS[cursor](world)}, headers=world.headers)
    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] == "bad_cursor"


OTHER_LISTS = [
    ("/api/v1/dlq", "jobs_cursor"),  # the same table as /jobs, another list
    ("/api/v1/schedules", "jobs_cursor"),
    ("/api/v1/jobs", "schedules_cursor"),
]


@pytest.mark.parametrize(("listing", "cursor_of"), OTHER_LISTS)
async def test_a_cursor_of_another_list_is_refused(world: World, listing: str, cursor_of: str) -> None:
    given = getattr(world, cursor_of)
    answer = await world.api.client.get(listing, params={"cursor": given}, headers=world.headers)
    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] == "bad_cursor"


async def test_each_list_takes_its_own_cursor(world: World) -> None:
    for listing, cursor in (("/api/v1/jobs", world.jobs_cursor), ("/api/v1/schedules", world.schedules_cursor)):
        answer = await world.api.client.get(listing, params={"cursor": cursor, "limit": 1}, headers=world.headers)
        assert answer.status_code == 200, answer.text
        assert len(answer.json()["items"]) == 1


# -- schedules: a cron that fires, a time zone that is a zone -------------------------------------------------------

NEVER_FIRING = [NEVER_FIRES, "0 0 30 2 *", "0 0 31 4,6,9,11 *"]
NOT_ZONES = ["Europe", "Etc", "America/Argentina", "Europe/", "zone.tab", "Mars/Olympus"]


@pytest.mark.parametrize("cron", NEVER_FIRING)
@pytest.mark.parametrize("active", [True, False])
async def test_a_cron_that_never_fires_is_refused_on_create(world: World, cron: str, active: bool) -> None:
    await _refused(world, "POST", "/api/v1/schedules", _json(_schedule(cron=cron, active=active)), "body.cron")


@pytest.mark.parametrize("cron", NEVER_FIRING)
async def test_a_cron_that_never_fires_is_refused_on_change(world: World, cron: str) -> None:
    await _refused(world, "PATCH", "/api/v1/schedules/{w.schedule_id}", _json({"cron": cron}), "body.cron")


@pytest.mark.parametrize("zone", NOT_ZONES)
async def test_a_time_zone_that_is_not_a_zone_is_refused(world: World, zone: str) -> None:
    await _refused(world, "POST", "/api/v1/schedules", _json(_schedule(timezone=zone)), "body.timezone")
    await _refused(world, "PATCH", "/api/v1/schedules/{w.schedule_id}", _json({"timezone": zone}), "body.timezone")


async def test_a_schedule_saved_with_a_cron_that_never_fires_cannot_be_resumed(world: World) -> None:
    """One saved before the cron was checked so: resuming it is a 422 naming the cron, not a 500."""
    made = await world.api.client.post("/api/v1/schedules", json=_schedule(active=False), headers=world.headers)
    assert made.status_code == 201, made.text
    schedule_id = made.json()["id"]
    async with world.db.begin() as conn:
        await conn.execute(SCHEDULES.update().where(SCHEDULES.c.id == schedule_id).values(cron=NEVER_FIRES))
    await _refused(world, "PATCH", f"/api/v1/schedules/{schedule_id}", _json({"active": True}), "body.cron")
    assert (await world.api.client.delete(f"/api/v1/schedules/{schedule_id}", headers=world.headers)).status_code == 204


# -- client_id admin: the admin's own client ------------------------------------------------------------------------


async def test_a_key_that_is_not_an_admin_key_cannot_take_the_admins_client(world: World) -> None:
    for body in ({"client_id": "admin"}, {"client_id": "admin", "admin": False}):
        await _refused(world, "POST", "/api/v1/api-keys", _json(body), "body.client_id", admin=True)
    made = await world.send("POST", "/api/v1/api-keys", _json({"client_id": "admin", "admin": True}), admin=True)
    assert made.status_code == 201, made.text
    assert (await world.send("DELETE", f"/api/v1/api-keys/{made.json()['id']}", admin=True)).status_code == 204


# -- JSON that RFC 8259 does not allow, integers past 64 bits, nesting past 64 levels: each route with a body -------

NESTED = "[" * 65 + "]" * 65
VALUES = {
    "nan": "NaN",
    "infinity": "Infinity",
    "minus_infinity": "-Infinity",
    "1e400": "1e400",
    "lone_surrogate": '"\\ud800"',
    "int64_plus_one": str(2**63),
    "minus_int64_minus_one": str(-(2**63) - 1),
    "nesting_65": NESTED,
}
# Each route that takes a body, with `V` where the value goes: the freest place it has (a job's payload).
ROUTES = {
    "submit": ("POST", "/api/v1/jobs", '{"job_type": "echo", "payload": {"v": V}}', False),
    "batch": ("POST", "/api/v1/jobs/batch", '{"jobs": [{"job_type": "echo", "payload": {"v": V}}]}', False),
    "schedule": (
        "POST",
        "/api/v1/schedules",
        '{"name": "n", "cron": "0 3 * * *", "job": {"job_type": "echo", "payload": {"v": V}}}',
        False,
    ),
    "schedule_change": (
        "PATCH",
        "/api/v1/schedules/{w.schedule_id}",
        '{"job": {"job_type": "echo", "payload": {"v": V}}}',
        False,
    ),
    "api_key": ("POST", "/api/v1/api-keys", '{"client_id": V}', True),
    "webhook": ("POST", "/api/v1/webhooks", '{"url": "http://127.0.0.1:9/hook", "description": V}', False),
    "webhook_change": ("PATCH", "/api/v1/webhooks/{w.webhook_id}", '{"description": V}', False),
    "recover": ("POST", "/api/v1/webhooks/{w.webhook_id}/recover", '{"since": V}', False),
    "replay": ("POST", "/api/v1/dlq/replay", '{"job_type": V}', False),
}


def _cases() -> list[Any]:
    return [pytest.param(route, value, id=f"{route}-{value}") for route in ROUTES for value in VALUES]


@pytest.mark.parametrize(("route", "value"), _cases())
async def test_json_the_contract_does_not_allow_is_refused_with_nothing_saved(
    world: World, route: str, value: str
) -> None:
    method, path, template, admin = ROUTES[route]
    await _refused(world, method, path, template.replace("V", VALUES[value]).encode(), None, admin)
