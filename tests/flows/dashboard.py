"""What the dashboard's browser tests share: the running service (`python -m app api` with embedded workers, one
per test session, started by tests/flows/conftest.py when a test first asks for it), signing in, screenshots."""

import asyncio
import contextlib
import os
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from playwright.async_api import Page, expect

from tests.conftest import ADMIN_KEY
from tests.receiver import Receiver
from tests.support import ROOT, Process, wait_for

WITHIN = 20
YEARLY = "0 3 1 1 *"  # a schedule that fires on its own only at 03:00 on the 1st of January
SCREENSHOTS = ROOT / "docs" / "dashboard"  # written when DASHBOARD_SCREENSHOTS=1
expect.set_options(timeout=WITHIN * 1000)


@dataclass
class Service:
    url: str
    http: httpx.AsyncClient
    receiver: Receiver
    process: Process

    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}

    async def new_key(self, prefix: str) -> str:
        client_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
        answer = await self.http.post("/api/v1/api-keys", json={"client_id": client_id}, headers=self.admin)
        assert answer.status_code == 201, answer.text
        key: str = answer.json()["api_key"]
        return key

    async def submit(self, key: str, **body: Any) -> dict[str, Any]:
        answer = await self.http.post("/api/v1/jobs", json=body, headers=bearer(key))
        assert answer.status_code in (201, 202), answer.text
        job: dict[str, Any] = answer.json()
        return job

    async def until_status(self, key: str, job_id: str, status: str) -> None:
        async def reached() -> bool:
            answer = await self.http.get(f"/api/v1/jobs/{job_id}", headers=bearer(key))
            return bool(answer.json()["status"] == status)

        await wait_for(reached, within=WITHIN)

    async def start_workflow(self, key: str, name: str, *jobs: dict[str, Any], **body: Any) -> dict[str, Any]:
        answer = await self.http.post(
            "/api/v1/workflows", json={"name": name, "jobs": jobs, **body}, headers=bearer(key)
        )
        assert answer.status_code == 201, answer.text
        workflow: dict[str, Any] = answer.json()
        return workflow

    async def until_workflow(self, key: str, workflow_id: str, status: str) -> None:
        async def reached() -> bool:
            answer = await self.http.get(f"/api/v1/workflows/{workflow_id}", headers=bearer(key))
            return bool(answer.json()["status"] == status)

        await wait_for(reached, within=WITHIN)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def step(ref: str, *depends_on: str, job_type: str = "echo", **payload: Any) -> dict[str, Any]:
    """One job of a workflow."""
    return {"ref": ref, "job_type": job_type, "payload": payload, "depends_on": list(depends_on)}


def job_ids(workflow: dict[str, Any]) -> dict[str, str]:
    """Each job's id by its ref."""
    return {entry["ref"]: entry["job"]["id"] for entry in workflow["jobs"]}


async def feed_is_live(service: Service) -> None:
    """Wait until job events reach the events stream: the API's live feed binds its queue after start-up, and an
    event published before that is on no stream. A probe job a second until one's event arrives."""
    key = await service.new_key("dash-warm-up")
    events = 0
    async with service.http.stream("GET", "/api/v1/events/stream", headers=bearer(key)) as stream:
        assert stream.status_code == 200

        async def read() -> None:
            nonlocal events
            async for line in stream.aiter_lines():
                events += line.startswith("data:")

        reader = asyncio.create_task(read())

        async def arrived() -> bool:
            await service.submit(key, job_type="echo", payload={})
            return events > 0

        try:
            await wait_for(arrived, within=WITHIN, interval=1)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader


async def sign_in(service: Service, page: Page, key: str) -> None:
    await page.goto(f"{service.url}/dashboard")
    await page.fill("#api-key", key)
    await page.click("#sign-in-form button[type=submit]")
    await expect(page.locator("#nav")).to_be_visible()


async def sideways(page: Page) -> int:
    """How far the page overflows the screen's width (0 or less: it fits)."""
    overflow: int = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    return overflow


async def screenshot(page: Page, name: str) -> None:
    if os.environ.get("DASHBOARD_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)
