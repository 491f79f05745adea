"""The whole service on SQLite, as `make run` starts it (embedded workers): the portable statements end to end."""

from app.main import create_app
from tests.conftest import ADMIN_KEY, make_settings
from tests.support import api_with, trail, until_status, wait_for


async def test_single_and_batch_submits_run_to_succeeded_on_sqlite(sqlite_url: str) -> None:
    app = create_app(make_settings(database_url=sqlite_url, embedded_workers=True))
    async with api_with(app, ADMIN_KEY) as api:
        headers = await api.new_client("on-sqlite")
        single = await api.submit(headers, job_type="echo", payload={"n": 0})
        assert single.status_code == 201, single.text
        batch = await api.client.post(
            "/api/v1/jobs/batch",
            json={"jobs": [{"job_type": "echo", "payload": {"n": n}} for n in range(1, 6)]},
            headers=headers,
        )
        assert batch.status_code == 201, batch.text
        ids = [single.json()["id"], *(item["job"]["id"] for item in batch.json()["items"])]
        for n, job_id in enumerate(ids):
            done = await until_status(api, headers, job_id, 30)
            assert (done["status"], done["result"]) == ("succeeded", {"n": n})
        events = [e["event"] for e in await trail(api, headers, ids[0])]
        assert events == ["created", "queued", "running", "succeeded"]


async def test_a_paused_types_job_waits_and_runs_once_resumed_on_sqlite(sqlite_url: str) -> None:
    app = create_app(make_settings(database_url=sqlite_url, embedded_workers=True))
    async with api_with(app, ADMIN_KEY) as api:
        headers = await api.new_client("paused-on-sqlite")
        assert (await api.client.post("/api/v1/job-types/echo/pause", headers=api.admin)).status_code == 202
        worker = app.state.workers["job_worker"]

        async def seen() -> bool:
            return "echo" in worker.holds.paused.types

        await wait_for(seen, within=10)
        job = (await api.submit(headers, payload={"n": 1})).json()

        async def held() -> list[str]:  # the hold, and the confirmation's mark (group-committed, it may come after)
            events = [e["event"] for e in await trail(api, headers, job["id"])]
            return events if {"held", "queued"} <= set(events) else []

        assert "running" not in await wait_for(held, within=15)
        assert (await api.job(headers, job["id"]))["status"] == "queued"
        assert (await api.client.post("/api/v1/job-types/echo/resume", headers=api.admin)).status_code == 202
        done = await until_status(api, headers, job["id"], 30)
        assert (done["status"], done["result"]) == ("succeeded", {"n": 1})
