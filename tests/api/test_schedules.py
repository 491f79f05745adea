"""Recurring schedules: the /api/v1/schedules API, firings of one job each (active ones fire, paused ones do not),
a firing missed during an outage run once, and another client's schedule answering 404."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import JOBS, SCHEDULES
from tests.support import Api, until_status, wait_for

SCHEDULES_URL = "/api/v1/schedules"
EVERY_SECOND = "* * * * * *"


def schedule(**fields: Any) -> dict[str, Any]:
    return {
        "name": "nightly-report",
        "cron": "0 3 * * *",
        "timezone": "Europe/Lisbon",
        "job": {"job_type": "echo", "payload": {"report": True}},
        **fields,
    }


async def create(api: Api, headers: dict[str, str], **fields: Any) -> dict[str, Any]:
    answer = await api.client.post(SCHEDULES_URL, json=schedule(**fields), headers=headers)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def firings(db: AsyncEngine, schedule_id: str) -> list[str]:
    """The idempotency keys of the jobs a schedule has made, oldest first."""
    query = select(JOBS.c.idempotency_key).where(JOBS.c.idempotency_key.like(f"schedule:{schedule_id}:%"))
    async with db.connect() as conn:
        return sorted(key for key in (await conn.execute(query)).scalars() if key)


@pytest.fixture
async def client(api: Api) -> AsyncIterator[dict[str, str]]:
    """A fresh client whose schedules are all deleted afterwards, so none fires into later tests."""
    headers = await api.new_client("sched-" + datetime.now(UTC).strftime("%H%M%S%f"))
    yield headers
    listed = (await api.client.get(SCHEDULES_URL, headers=headers)).json()["items"]
    for item in listed:
        await api.client.delete(f"{SCHEDULES_URL}/{item['id']}", headers=headers)


async def test_a_schedule_is_created_read_listed_changed_and_deleted(api: Api, client: dict[str, str]) -> None:
    made = await create(api, client)
    assert made["active"] is True and made["timezone"] == "Europe/Lisbon"
    next_run = datetime.fromisoformat(made["next_run_at"])
    assert next_run > datetime.now(UTC) and next_run.minute == 0  # 03:00 in Lisbon: 03:00 or 02:00 UTC
    url = f"{SCHEDULES_URL}/{made['id']}"
    assert (await api.client.get(url, headers=client)).json() == made
    assert [s["id"] for s in (await api.client.get(SCHEDULES_URL, headers=client)).json()["items"]] == [made["id"]]

    paused = await api.client.patch(url, json={"active": False}, headers=client)
    assert paused.status_code == 200 and paused.json()["next_run_at"] is None
    resumed = (await api.client.patch(url, json={"active": True, "cron": "30 4 * * *"}, headers=client)).json()
    assert datetime.fromisoformat(resumed["next_run_at"]).minute == 30

    assert (await api.client.delete(url, headers=client)).status_code == 204
    assert (await api.client.get(url, headers=client)).status_code == 404


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "every day"}, "cron"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"job": {"job_type": "echo", "payload": {}, "delay_seconds": 5}}, "job"),
        ({"job": {"job_type": "nope", "payload": {}}}, "job"),
    ],
)
async def test_a_bad_cron_time_zone_or_job_is_a_422(
    api: Api, client: dict[str, str], fields: dict[str, Any], field: str
) -> None:
    answer = await api.client.post(SCHEDULES_URL, json=schedule(**fields), headers=client)

    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] == "validation_error"
    assert answer.json()["errors"][0]["loc"][:2] == ["body", field]


async def test_another_clients_schedule_is_a_404(api: Api, client: dict[str, str]) -> None:
    made = await create(api, client)
    other = await api.new_client("sched-other")
    url = f"{SCHEDULES_URL}/{made['id']}"

    assert (await api.client.get(url, headers=other)).status_code == 404
    assert (await api.client.patch(url, json={"active": False}, headers=other)).status_code == 404
    assert (await api.client.post(f"{url}/trigger", headers=other)).status_code == 404
    assert (await api.client.delete(url, headers=other)).status_code == 404
    assert (await api.client.get(SCHEDULES_URL, headers=other)).json()["items"] == []
    assert (await api.client.get(url, headers=client)).json()["active"] is True


async def test_trigger_runs_the_job_once_now(api: Api, client: dict[str, str], worker: Any) -> None:
    made = await create(api, client)

    answer = await api.client.post(f"{SCHEDULES_URL}/{made['id']}/trigger", headers=client)

    assert answer.status_code == 201, answer.text
    job = answer.json()
    assert job["idempotency_key"].startswith(f"schedule:{made['id']}:")
    assert (await until_status(api, client, job["id"], 20))["result"] == {"report": True}


async def test_an_active_schedule_fires_every_second_and_a_paused_one_never(
    api: Api, client: dict[str, str], db: AsyncEngine
) -> None:
    active = await create(api, client, cron=EVERY_SECOND, timezone="UTC")
    paused = await create(api, client, cron=EVERY_SECOND, timezone="UTC", active=False)

    async def three_firings() -> list[str] | None:
        made = await firings(db, active["id"])
        return made if len(made) >= 3 else None

    made = await wait_for(three_firings, within=15, interval=0.2)
    await api.client.patch(f"{SCHEDULES_URL}/{active['id']}", json={"active": False}, headers=client)

    stamps = [datetime.strptime(key.split(":", 2)[2], "%Y-%m-%dT%H:%M:%SZ") for key in made]
    assert len(set(stamps)) == len(stamps)  # one job per firing, each a second of its own
    assert await firings(db, paused["id"]) == []  # in the same seconds, the paused one made none


async def test_a_firing_missed_during_an_outage_runs_once(api: Api, client: dict[str, str], db: AsyncEngine) -> None:
    made = await create(api, client, cron="0 * * * *", timezone="UTC")  # hourly
    missed = (datetime.now(UTC) - timedelta(hours=5)).replace(minute=0, second=0, microsecond=0)
    async with db.begin() as conn:  # as if everything had been down for five hours
        await conn.execute(update(SCHEDULES).where(SCHEDULES.c.id == made["id"]).values(next_run_at=missed))

    async def fired() -> list[str]:
        return await firings(db, made["id"])

    keys = await wait_for(fired, within=10)

    assert keys == [f"schedule:{made['id']}:{missed.strftime('%Y-%m-%dT%H:%M:%SZ')}"]
    after = (await api.client.get(f"{SCHEDULES_URL}/{made['id']}", headers=client)).json()
    assert datetime.fromisoformat(after["next_run_at"]) > datetime.now(UTC)  # nothing else is due: no catch-up
    assert datetime.fromisoformat(after["last_run_at"]) == missed
    assert await firings(db, made["id"]) == keys
