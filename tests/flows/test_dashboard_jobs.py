"""The jobs list in headless Chromium: search, queue wait and run time, millisecond times, bulk cancel and retry,
and live updates that never move a row under the reader."""

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.browser import CHROMIUM, NARROW, Tab, tab
from tests.flows.dashboard import Service, bearer, screenshot, sideways, sign_in

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is missing: apt-get install chromium"),
]

MILLISECONDS = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")


async def submit_with_request_id(service: Service, key: str, request_id: str, **body: Any) -> dict[str, Any]:
    headers = {**bearer(key), "X-Request-ID": request_id}
    answer = await service.http.post("/api/v1/jobs", json=body, headers=headers)
    assert answer.status_code == 201, answer.text
    job: dict[str, Any] = answer.json()
    return job


async def shown_ids(page: Page) -> list[str]:
    ids: list[str] = await page.locator("#jobs-table tr[data-job-id]").evaluate_all(
        "rows => rows.map(row => row.dataset.jobId)"
    )
    return ids


async def open_jobs(service: Service, page: Page, key: str, fragment: str = "#/jobs") -> None:
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard{fragment}")
    await expect(page.locator("#live-state")).to_have_text("Live updates: on")


async def test_a_job_is_found_by_its_request_id_and_by_a_payload_field(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-search")
    request_id = f"dash-req-{uuid.uuid4().hex[:12]}"
    wanted = await submit_with_request_id(service, key, request_id, job_type="echo", payload={"order_id": 123})
    others = [await service.submit(key, job_type="echo", payload={"order_id": n}) for n in (124, 1230)]
    await open_jobs(service, page, key)
    await expect(page.locator("#jobs-table tr[data-job-id]")).to_have_count(3)
    search = page.locator("#job-search")
    await search.locator("input[name=q]").fill(request_id)
    await search.locator("button[type=submit]").click()
    await expect(page.locator("#jobs-table tr[data-job-id]")).to_have_count(1)
    assert await shown_ids(page) == [wanted["id"]]
    assert f"q={request_id}" in page.url
    await page.goto(f"{service.url}/dashboard#/jobs")
    await expect(page.locator("#jobs-table tr[data-job-id]")).to_have_count(3)
    await search.locator("input[name=field]").fill("order_id")
    await search.locator("input[name=value]").fill("123")
    await search.locator("button[type=submit]").click()
    await expect(page.locator("#jobs-table tr[data-job-id]")).to_have_count(1)
    assert await shown_ids(page) == [wanted["id"]] and "payload.order_id=123" in page.url
    await page.reload()  # a link to a search finds the same jobs, its form filled in
    await expect(page.locator("#jobs-table tr[data-job-id]")).to_have_count(1)
    await expect(search.locator("input[name=field]")).to_have_value("order_id")
    await expect(search.locator("input[name=value]")).to_have_value("123")
    await search.locator("input[name=value]").fill("124")
    await search.locator("button[type=submit]").click()
    await expect(page.locator(f'#jobs-table tr[data-job-id="{others[0]["id"]}"]')).to_have_count(1)
    await expect(page.locator("#jobs-table tr[data-job-id]")).to_have_count(1)


async def test_a_finished_job_shows_its_queue_wait_run_time_and_times_to_the_millisecond(
    service: Service, tab_of: Tab
) -> None:
    page, key = tab_of.page, await service.new_key("dash-times")
    job = await service.submit(key, job_type="sleep", payload={"seconds": 0.4})
    await service.until_status(key, job["id"], "succeeded")
    await open_jobs(service, page, key)
    row = page.locator(f'tr[data-job-id="{job["id"]}"]')
    await expect(row.locator("[data-status]")).to_have_attribute("data-status", "succeeded")
    run = await row.locator("td.run").inner_text()
    assert re.fullmatch(r"\d{3} ms", run) and 400 <= int(run.split()[0]) < 1000, run
    assert re.fullmatch(r"\d+ ms|\d+\.\d\d s", await row.locator("td.wait").inner_text())
    created = row.locator("td.created time")
    assert MILLISECONDS.match(await created.inner_text())
    assert await created.get_attribute("title") == job["created_at"]
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    trail = page.locator("#audit-trail li time")
    await expect(trail).to_have_count(4)  # created, queued, running, succeeded
    texts = await trail.all_inner_texts()
    assert all(MILLISECONDS.match(text) for text in texts), texts
    assert len(set(texts)) > 1  # one job's changes, told apart by their milliseconds
    await expect(page.locator("[data-field=started_at] time")).to_have_text(MILLISECONDS)


async def test_selected_jobs_queued_and_running_are_cancelled_in_one_click(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-cancel")
    hold = {"key": f"one-at-a-time-{uuid.uuid4().hex[:6]}", "limit": 1}
    jobs = [await service.submit(key, job_type="sleep", payload={"seconds": 120}, concurrency=hold) for _ in range(3)]
    await service.until_status(key, jobs[0]["id"], "running")  # the other two wait for its slot, queued
    await open_jobs(service, page, key)
    await expect(page.locator("#jobs-table tr[data-job-id]")).to_have_count(3)
    await expect(page.locator("#bulk-cancel")).to_be_disabled()
    await page.locator("#select-all").check()
    await expect(page.locator("#selected-count")).to_have_text("3 selected")
    await page.locator("#bulk-cancel").click()
    await expect(page.locator("#toast")).to_have_text("2 cancelled, 1 stopping.")
    await expect(page.locator("#selected-count")).to_have_text("0 selected")
    for job in jobs:  # the running one ends cancelled once its handler stopped, shown live
        row = page.locator(f'tr[data-job-id="{job["id"]}"]')
        await expect(row.locator("[data-status]")).to_have_attribute("data-status", "cancelled")
        await expect(row.locator("input.pick")).not_to_be_checked()


async def test_selected_dead_jobs_are_retried_and_run(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-retry")
    dead = [await service.submit(key, job_type="flaky", payload={"fail_times": 1, "permanent": True}) for _ in range(2)]
    done = await service.submit(key, job_type="echo", payload={})
    for job in dead:
        await service.until_status(key, job["id"], "dead_lettered")
    await service.until_status(key, done["id"], "succeeded")
    await open_jobs(service, page, key)
    for job in [*dead, done]:
        await page.locator(f'tr[data-job-id="{job["id"]}"] input.pick').check()
    await page.locator("#bulk-retry").click()
    await expect(page.locator("#toast")).to_have_text("2 replayed, 1 not dead-lettered.")
    for job in dead:  # their second run outlives fail_times
        row = page.locator(f'tr[data-job-id="{job["id"]}"]')
        await expect(row.locator("[data-status]")).to_have_attribute("data-status", "succeeded")


async def test_new_jobs_wait_behind_a_button_and_the_rows_keep_their_place(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-arrivals")
    first = await service.submit(key, job_type="sleep", payload={"seconds": 1})
    await open_jobs(service, page, key)
    row = page.locator(f'tr[data-job-id="{first["id"]}"]')
    await row.locator("input.pick").check()
    arrived = [await service.submit(key, job_type="echo", payload={"n": n}) for n in range(2)]
    await expect(page.locator("#new-jobs")).to_have_text("2 new jobs — show")
    assert await shown_ids(page) == [first["id"]]
    await expect(row.locator("[data-status]")).to_have_attribute("data-status", "succeeded")  # still updated
    await expect(row.locator("td.run")).to_have_text(re.compile(r"^1\.\d\d s$"))
    assert await shown_ids(page) == [first["id"]] and await row.locator("input.pick").is_checked()
    await page.locator("#new-jobs").click()
    await expect(page.locator("#jobs-table tr[data-job-id]")).to_have_count(3)
    assert await shown_ids(page) == [arrived[1]["id"], arrived[0]["id"], first["id"]]
    await expect(page.locator("#new-jobs")).to_be_hidden()
    await expect(row.locator("input.pick")).to_be_checked()  # the selection outlives the redraw
    await expect(page.locator("#selected-count")).to_have_text("1 selected")
    await screenshot(page, "jobs")


async def test_the_jobs_page_fits_a_narrow_screen(service: Service, browser: Any) -> None:
    key = await service.new_key("dash-narrow")
    for n in range(3):
        await service.submit(key, job_type="echo", payload={"order_id": n, "note": "a longer value " * 4})
    async with tab(browser, NARROW) as narrow:
        await open_jobs(service, narrow.page, key)
        await expect(narrow.page.locator("#jobs-table tr[data-job-id]")).to_have_count(3)
        assert await sideways(narrow.page) <= 0
        await screenshot(narrow.page, "jobs-narrow")
        assert narrow.unexpected() == []
