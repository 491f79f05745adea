"""The DLQ page in headless Chromium: failure groups with their counts, a group replayed whole, a dead job's payload
edited and replayed (and the edit in its audit trail), on a wide and a narrow screen."""

import re
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from app.core.failure_groups import group_of
from tests.browser import CHROMIUM, NARROW, Tab, tab
from tests.flows.dashboard import Service, bearer, screenshot, sideways, sign_in

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is missing: apt-get install chromium"),
]


async def dead_job(service: Service, key: str, **body: object) -> dict[str, object]:
    job = await service.submit(key, job_type="flaky", **body)
    await service.until_status(key, str(job["id"]), "dead_lettered")
    answer = await service.http.get(f"/api/v1/jobs/{job['id']}", headers=bearer(key))
    return dict(answer.json())


async def test_failures_differing_in_numbers_are_one_group_that_is_replayed_whole(
    service: Service, tab_of: Tab
) -> None:
    page, key = tab_of.page, await service.new_key("dash-dlq-groups")
    # Each fails while it has run `fail_times` times or fewer, and has that many runs in all: it dies of
    # "flaky failure on run N of N", N = 1, 2, 3, and a replay's next run succeeds.
    same = [await dead_job(service, key, payload={"fail_times": n}, max_retries=n - 1) for n in (1, 2, 3)]
    assert len({str(job["error"]["message"]) for job in same}) == 3  # type: ignore[index]
    apart = await dead_job(service, key, payload={"fail_times": 9, "permanent": True}, max_retries=0)
    group = group_of("flaky", same[0]["error"])  # type: ignore[arg-type]
    other = group_of("flaky", apart["error"])  # type: ignore[arg-type]

    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/dlq")
    row = page.locator(f'#dlq-groups tr[data-group-id="{group}"]')
    await expect(row.locator("td[data-label=count]")).to_have_text("3")
    await expect(row).to_contain_text("TransientError")
    await expect(row).to_contain_text("flaky failure on run <n> of <n>")
    await expect(page.locator(f'#dlq-groups tr[data-group-id="{other}"] td[data-label=count]')).to_have_text("1")
    await expect(page.locator("#dlq-groups tbody tr").first).to_have_attribute("data-group-id", group)  # biggest first
    await expect(page.locator("#redrives-link")).to_have_attribute("href", "#/dlq/redrives")
    await screenshot(page, "dlq")

    await row.get_by_role("link", name="3 job(s)").click()
    await expect(page.locator("#dlq-group-filter")).to_contain_text(group)
    await expect(page.locator("#dlq-table tbody tr")).to_have_count(3)
    assert {await r.get_attribute("data-job-id") for r in await page.locator("#dlq-table tbody tr").all()} == {
        str(job["id"]) for job in same
    }

    await page.get_by_role("link", name="Show every dead job").click()
    await row.get_by_role("button", name="Replay group").click()
    await expect(page.locator("#toast")).to_have_text("Replayed 3 job(s).")
    await expect(row).to_have_count(0)
    for job in same:
        await service.until_status(key, str(job["id"]), "succeeded")
    await expect(page.locator(f'#dlq-table tr[data-job-id="{apart["id"]}"]')).to_have_count(1)  # another group

    # The notice stays on the page it was given on.
    await page.locator(f'#dlq-table tr[data-job-id="{apart["id"]}"] a').first.click()
    await expect(page.locator("#audit-trail")).to_be_visible()
    await expect(page.locator("#toast")).not_to_have_class(re.compile(r"\bshown\b"))
    await expect(page.locator("#toast")).to_have_text("")


async def test_a_payload_edited_on_the_dlq_page_is_checked_replayed_and_in_the_trail(
    service: Service, tab_of: Tab
) -> None:
    page, key = tab_of.page, await service.new_key("dash-dlq-edit")
    me = (await service.http.get("/api/v1/me", headers=bearer(key))).json()
    job = await dead_job(service, key, payload={"fail_times": 5, "permanent": True}, max_retries=0)
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/dlq")
    row = page.locator(f'#dlq-table tr[data-job-id="{job["id"]}"]')
    await row.get_by_role("button", name="Edit & replay").click()
    editor = page.locator(f'tr[data-editor-for="{job["id"]}"]')
    text = editor.locator("textarea")
    assert '"fail_times": 5' in await text.input_value()

    tab_of.expect_error(r"status of 422 .* at \S+/api/v1/dlq/[^/]+/replay$")  # the refused edit, by design
    await text.fill('{"fail_times": "none"}')
    await editor.get_by_role("button", name="Replay with this payload").click()
    await expect(editor.locator(".error")).to_contain_text("body.payload.fail_times")
    await text.fill('{"fail_times": ')
    await editor.get_by_role("button", name="Replay with this payload").click()
    await expect(editor.locator(".error")).to_contain_text("not valid JSON")
    assert (await service.http.get(f"/api/v1/jobs/{job['id']}", headers=bearer(key))).json()["status"] == (
        "dead_lettered"
    )
    await screenshot(page, "dlq-edit")

    await text.fill('{"fail_times": 0, "permanent": true}')
    await editor.get_by_role("button", name="Replay with this payload").click()
    await expect(page.locator("#toast")).to_contain_text("replayed with its new payload")
    await expect(row).to_have_count(0)
    await service.until_status(key, str(job["id"]), "succeeded")
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    edited = page.locator("#audit-trail li[data-event=edited]")
    await expect(edited).to_have_count(1)
    await expect(edited.locator(".by")).to_have_text(f"by {me['client_id']}")
    await expect(edited).to_contain_text('"fail_times": 0')


async def test_the_dlq_page_and_its_editor_fit_a_narrow_screen(service: Service, browser: Browser) -> None:
    key = await service.new_key("dash-dlq-narrow")
    job = await dead_job(service, key, payload={"fail_times": 5, "permanent": True}, max_retries=0)
    async with tab(browser, NARROW) as narrow:
        page = narrow.page
        await sign_in(service, page, key)
        await page.goto(f"{service.url}/dashboard#/dlq")
        await expect(page.locator("#dlq-groups tbody tr")).to_have_count(1)
        row = page.locator(f'#dlq-table tr[data-job-id="{job["id"]}"]')
        await row.get_by_role("button", name="Edit & replay").click()
        await expect(page.locator(f'tr[data-editor-for="{job["id"]}"] textarea')).to_be_visible()
        assert await sideways(page) <= 0
        await screenshot(page, "dlq-narrow")
        assert narrow.unexpected() == []
