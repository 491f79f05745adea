"""The dashboard's smaller pages and its manners: the workers as one table, a schedule form that starts valid, a
notice that stays on its page, and every control reachable from the keyboard."""

import json
from pathlib import Path

import pytest
from playwright.async_api import expect

from tests.browser import CHROMIUM, Tab
from tests.conftest import ADMIN_KEY
from tests.flows.dashboard import YEARLY, Service, bearer, sign_in

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is missing: apt-get install chromium"),
]


async def test_the_workers_page_is_one_table_with_a_group_of_rows_per_worker(service: Service, tab_of: Tab) -> None:
    page = tab_of.page
    await sign_in(service, page, ADMIN_KEY)
    await page.goto(f"{service.url}/dashboard#/workers")
    groups = page.locator("#workers table tbody[data-worker]")
    await expect(groups.first).to_be_visible()
    assert await groups.count() >= 2  # the job worker and the webhook worker, at least
    await expect(page.locator("#workers thead")).to_have_count(1)
    job_worker = page.locator("#workers tbody[data-worker=job_worker]")
    await expect(job_worker.locator("tr.group")).to_contain_text("job_worker")
    await expect(job_worker.locator("tr[data-process]")).to_have_count(1)


async def test_the_schedule_form_starts_on_a_valid_payload_and_offers_each_types_example(
    service: Service, tab_of: Tab
) -> None:
    page, key = tab_of.page, await service.new_key("dash-schedule-form")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/schedules")
    form = page.locator("#schedule-create")
    await expect(form.locator("select[name=job_type]")).to_have_value("echo")
    assert json.loads(await form.locator("textarea[name=payload]").input_value()) == {}
    await form.locator("select[name=job_type]").select_option("sleep")
    assert json.loads(await form.locator("textarea[name=payload]").input_value()) == {"seconds": 5}

    await form.locator("input[name=name]").fill("as-offered")  # created as the form offers it, payload untouched
    await form.locator("input[name=cron]").fill(YEARLY)
    await form.get_by_role("button", name="Create schedule").click()
    await expect(page.locator("#schedule-list tr[data-schedule-id]")).to_have_count(1)
    (saved,) = (await service.http.get("/api/v1/schedules", headers=bearer(key))).json()["items"]
    assert saved["job"] == {"job_type": "sleep", "payload": {"seconds": 5}}
    await expect(form.locator("select[name=job_type]")).to_have_value("echo")  # back to its start
    assert json.loads(await form.locator("textarea[name=payload]").input_value()) == {}


async def test_a_notice_stays_on_the_page_it_was_raised_on(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-notice")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/schedules")
    form = page.locator("#schedule-create")
    await form.locator("input[name=name]").fill("noticed")
    await form.locator("input[name=cron]").fill(YEARLY)
    await form.get_by_role("button", name="Create schedule").click()
    toast = page.locator("#toast")
    await expect(toast).to_have_class("toast shown ok")
    await expect(toast).to_contain_text("Schedule noticed created")
    await page.goto(f"{service.url}/dashboard#/jobs")
    await expect(page.locator("#live-state")).to_have_text("Live updates: on")
    await expect(toast).to_have_class("toast")


async def test_the_navigation_and_a_forms_button_are_reached_with_the_tab_key(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-keys")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/schedules")
    await expect(page.locator("#schedule-create")).to_be_visible()
    await page.locator(".brand").focus()  # the first link of the page
    reached: list[str] = []
    for _ in range(60):
        await page.keyboard.press("Tab")
        reached.append(await page.evaluate("document.activeElement.textContent.trim() || document.activeElement.name"))
        if reached[-1] == "Create schedule":
            break
    assert {"Overview", "Jobs", "DLQ", "Webhooks"} <= set(reached)
    assert reached[-1] == "Create schedule", reached
    await page.keyboard.press("Enter")  # the form's own checks answer: its name is required
    assert await page.evaluate("document.activeElement.name") == "name"
