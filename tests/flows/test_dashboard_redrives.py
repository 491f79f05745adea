"""The redrives page (#/dlq/redrives) in headless Chromium: a redrive of dead jobs started from its form moves at
its pace, stops while paused, carries on when resumed, at a new pace once it is changed, and finishes, with its
history; it fits a phone's width."""

import asyncio
from pathlib import Path

import pytest
from playwright.async_api import Browser, Locator, expect

from tests.browser import CHROMIUM, NARROW, Tab, prompts_answered, tab
from tests.flows.dashboard import WITHIN, Service, screenshot, sideways, sign_in
from tests.support import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is missing: apt-get install chromium"),
]
DEAD = 6


async def replayed(card: Locator) -> int:
    """The replayed count the card shows, as its progress bar holds it."""
    value = await card.locator("progress").evaluate("bar => bar.value")
    return int(value)


async def short_id(card: Locator) -> str:
    """The redrive's short id, as its card's heading shows it."""
    return await card.locator("h3 .mono").inner_text()


async def test_a_redrive_started_on_its_page_moves_pauses_resumes_and_finishes(
    service: Service, tab_of: Tab, browser: Browser
) -> None:
    page, key = tab_of.page, await service.new_key("dash-redrive")
    jobs = [
        await service.submit(key, job_type="flaky", payload={"fail_times": 1, "permanent": True}, max_retries=0)
        for _ in range(DEAD)
    ]
    for job in jobs:
        await service.until_status(key, job["id"], "dead_lettered")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/dlq/redrives")
    await expect(page.locator("#redrive-list")).to_contain_text("No redrives yet.")
    form = page.locator("#redrive-start")
    await form.locator("select[name=job_type]").select_option("flaky")
    await form.locator("input[name=limit]").fill(str(DEAD))
    await form.locator("input[name=per_second]").fill("1")
    await form.get_by_role("button", name="Start redrive").click()
    await expect(page.locator("#toast")).to_contain_text(f"started: {DEAD} item(s) at most 1/s")
    card = page.locator("article.redrive").first
    await expect(card.locator("[data-status]")).to_have_attribute("data-status", "running")
    await expect(card).to_contain_text("job_type: flaky")

    async def moving() -> bool:  # the page follows it without a reload
        return await replayed(card) >= 1

    await wait_for(moving, within=WITHIN)
    await screenshot(page, "redrives")
    await card.get_by_role("button", name="Pause").click()
    await expect(card.locator("[data-status]")).to_have_attribute("data-status", "paused")
    await asyncio.sleep(1.2)  # a turn under way when the pause came may still commit; none after it
    held = await replayed(card)
    await asyncio.sleep(2.5)  # two items' worth at its pace, and two refreshes of the page
    assert await replayed(card) == held < DEAD
    await card.get_by_role("button", name="Resume").click()
    await expect(card.locator("[data-status]")).to_have_attribute("data-status", "running", timeout=WITHIN * 1000)
    async with prompts_answered(page, "100") as asked:  # the rest at once, not one a second
        await card.get_by_role("button", name="Change pace").click()
        await expect(page.locator("#toast")).to_have_text("Pace set to at most 100/s.")
    assert asked == [f"New pace for redrive {await short_id(card)}: at most how many items a second (up to 1000)?"]
    await expect(card.locator("[data-status]")).to_have_attribute("data-status", "finished", timeout=WITHIN * 1000)
    await expect(card.locator(".redrive-counts")).to_have_text(f"{DEAD} replayed, 0 skipped of {DEAD}")
    await expect(card.get_by_role("button")).to_have_count(0)
    await card.locator("summary").click()
    events = card.locator(".redrive-history li")
    await expect(events).to_have_count(5)
    assert [await li.get_attribute("data-event") for li in await events.all()] == [
        "created",
        "paused",
        "resumed",
        "rate_changed",
        "finished",
    ]
    for job in jobs:
        await service.until_status(key, job["id"], "succeeded")
    async with tab(browser, NARROW) as narrow:
        await sign_in(service, narrow.page, key)
        await narrow.page.goto(f"{service.url}/dashboard#/dlq/redrives")
        await expect(narrow.page.locator("article.redrive")).to_have_count(1)
        assert await sideways(narrow.page) <= 0
        await screenshot(narrow.page, "redrives-narrow")
        assert narrow.unexpected() == []


async def test_a_redrive_with_an_empty_selection_is_refused_on_the_form(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-redrive-empty")
    tab_of.expect_error(r"status of 422")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/dlq/redrives")
    form = page.locator("#redrive-start")
    await form.locator("select[name=kind]").select_option("deliveries")
    await expect(form.locator("input[name=webhook_id]")).to_be_visible()
    await expect(form.locator("input[name=group]")).to_be_hidden()
    await form.get_by_role("button", name="Start redrive").click()
    await expect(page.locator("#redrive-problems")).to_contain_text("empty selection")
    await expect(page.locator("#redrive-list")).to_contain_text("No redrives yet.")
