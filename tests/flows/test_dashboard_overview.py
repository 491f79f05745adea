"""The overview in Chromium: counts that match the jobs a client submitted, a last hour that is drawn from the
server at once (not from the page's own events), the queues' retry tiers folded into one figure with their detail
on demand, and a compact page on a phone."""

import re
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from app.core.topology import build_topology
from tests.browser import CHROMIUM, NARROW, Tab, tab
from tests.conftest import ADMIN_KEY, make_settings
from tests.flows.dashboard import Service, screenshot, sideways, sign_in

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is missing: apt-get install chromium"),
]


async def test_the_overview_counts_a_clients_jobs_and_draws_the_hour_they_finished_in(
    service: Service, tab_of: Tab
) -> None:
    page, key = tab_of.page, await service.new_key("dash-overview")
    done = [await service.submit(key, job_type="echo", payload={"n": n}) for n in range(3)]
    dead = await service.submit(key, job_type="flaky", payload={"fail_times": 1}, max_retries=0)
    for job in done:
        await service.until_status(key, job["id"], "succeeded")
    await service.until_status(key, dead["id"], "dead_lettered")

    await sign_in(service, page, key)  # the jobs finished before the page opened
    counts = page.locator("#status-counts")
    await expect(counts.locator("[data-status=succeeded] .n")).to_have_text("3")
    await expect(counts.locator("[data-status=dead_lettered] .n")).to_have_text("1")
    await expect(counts.locator("[data-status=queued] .n")).to_have_text("0")
    await expect(page.locator("[data-series=succeeded]")).to_have_text("succeeded 3 in the last hour")
    await expect(page.locator("[data-series=failed]")).to_have_text("failed 1 in the last hour")
    await expect(page.locator("[data-series=failure-rate]")).to_have_text("failure rate 25.0 %")
    await expect(page.locator("#throughput")).not_to_have_attribute("data-minutes", "0")
    await expect(page.locator("#by-type tr[data-job-type=echo]")).to_contain_text("3")
    await expect(page.locator("#timings tr[data-job-type=echo] td").nth(1)).to_have_text("3")
    dlq = page.locator("#dlq-stats")
    await expect(dlq.locator("a[href='#/dlq'] .n")).to_have_text("1")
    await expect(dlq).to_contain_text("1 in the last hour; 0 an hour ago.")
    await expect(dlq.locator("svg.sparkline")).to_be_visible()
    await expect(page.locator("#failing-endpoints")).to_have_text("No endpoint failing in the last 15 minutes.")

    # the events stream adds what happens now to the current minute
    await expect(page.locator("#throughput[data-live=on]")).to_have_count(1)
    await service.submit(key, job_type="echo", payload={"n": "live"})
    await expect(page.locator("[data-series=succeeded]")).to_have_text("succeeded 4 in the last hour")


async def test_the_queues_fold_their_retry_tiers_into_one_figure_with_the_detail_on_demand(
    service: Service, tab_of: Tab
) -> None:
    page = tab_of.page
    await sign_in(service, page, ADMIN_KEY)
    tiers = [
        spec.name.rsplit(".retry.", 1)[1]
        for spec in build_topology(make_settings()).queues
        if ".jobs.default.retry." in spec.name
    ]
    row = page.locator("#queue-depths tr[data-queue='jobs.default']")
    await expect(row).to_be_visible()
    await expect(page.locator("#queue-depths th")).to_have_text(["queue", "ready", "consumers", "in retry", "rate"])
    await expect(page.locator("#queue-depths tr[data-queue*='.retry.']")).to_have_count(0)
    await expect(page.locator("#in-retry [data-topology=jobs] .n")).to_have_text(re.compile(r"^\d+$"))
    await expect(page.locator("#in-retry [data-topology=webhooks]")).to_contain_text("webhooks in retry")
    detail = row.locator("details.tiers li")
    await expect(detail.first).to_be_hidden()
    await row.locator("details.tiers summary").click()
    await expect(detail).to_have_count(len(tiers))
    await expect(detail.first).to_have_text(re.compile(rf"^{tiers[0]}: \d+$"))
    await expect(row.locator("td").nth(4)).to_have_text(re.compile(r"/s$"))  # a second read gives a rate
    assert await page.evaluate("document.documentElement.scrollWidth") <= 1280
    await screenshot(page, "overview")


async def test_the_overview_is_compact_on_a_phone(service: Service, browser: Browser) -> None:
    async with tab(browser, NARROW) as narrow:
        await sign_in(service, narrow.page, ADMIN_KEY)
        await expect(narrow.page.locator("#status-counts [data-status=succeeded]")).to_be_visible()
        await expect(narrow.page.locator("#dlq-stats")).to_be_visible()
        await expect(narrow.page.locator("#queue-depths")).to_be_hidden()  # folded: one tap opens it
        height = await narrow.page.evaluate("document.documentElement.scrollHeight")
        assert height < 3000, height
        assert await sideways(narrow.page) <= 0
        await narrow.page.locator("details.fold summary", has_text="Queues").click()
        await expect(narrow.page.locator("#queue-depths tr[data-queue='jobs.default']")).to_be_visible()
        assert await sideways(narrow.page) <= 0
        await narrow.page.locator("details.fold summary", has_text="Queues").click()
        await screenshot(narrow.page, "overview-narrow")
        assert narrow.unexpected() == []
