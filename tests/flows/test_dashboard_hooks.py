"""The console's webhook pages in headless Chromium: an endpoint's health and its one deliveries table (filtered,
rows opened to their attempts), the endpoints list's rates and circuits, delivery entries of a job's audit trail,
and the event catalogue on the form that creates an endpoint."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, expect
from starlette.responses import Response

from tests.browser import CHROMIUM, NARROW, Tab, tab
from tests.flows.dashboard import WITHIN, Service, bearer, screenshot, sideways, sign_in
from tests.receiver import Received
from tests.support import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is missing: apt-get install chromium"),
]
MIXED = "/dash-hooks-mixed"


@pytest.fixture
def two_good_then_failures(service: Service) -> Iterator[None]:
    """The receiver answers the first two requests to MIXED with 200 and every later one with 500; other paths as
    scripted by `statuses` (200 once they run out)."""
    receiver = service.receiver
    answered = 0

    def answer(request: Received) -> Response:
        nonlocal answered
        if request.path != MIXED:
            return Response(status_code=receiver.statuses.pop(0) if receiver.statuses else 200, content=b"ok")
        answered += 1
        return Response(status_code=200 if answered <= 2 else 500, content=b"ok" if answered <= 2 else b"down")

    receiver.answer = answer
    try:
        yield
    finally:
        receiver.answer = None


async def settled_deliveries(service: Service, key: str, webhook_id: str, count: int) -> list[dict[str, Any]]:
    """Send `count` test events and wait until each delivery has succeeded or failed for good."""
    for _ in range(count):
        sent = await service.http.post(f"/api/v1/webhooks/{webhook_id}/test", headers=bearer(key))
        assert sent.status_code == 202, sent.text

    async def settled() -> list[dict[str, Any]] | None:
        answer = await service.http.get(f"/api/v1/webhooks/{webhook_id}/deliveries", headers=bearer(key))
        found: list[dict[str, Any]] = answer.json()
        return found if len(found) == count and all(d["status"] != "pending" for d in found) else None

    done = await wait_for(settled, within=WITHIN)
    assert done is not None
    return done


@pytest.mark.usefixtures("two_good_then_failures")
async def test_an_endpoint_page_shows_its_health_and_one_filterable_table_of_deliveries(
    service: Service, tab_of: Tab, browser: Browser
) -> None:
    page, key = tab_of.page, await service.new_key("dash-hooks-health")
    hook = await service.http.post("/api/v1/webhooks", json={"url": service.receiver.url(MIXED)}, headers=bearer(key))
    webhook_id = hook.json()["id"]
    sent = await settled_deliveries(service, key, webhook_id, 3)
    assert sorted(d["status"] for d in sent) == ["failed", "succeeded", "succeeded"]
    [failed] = [d for d in sent if d["status"] == "failed"]

    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/webhooks/{webhook_id}")
    hour = page.locator('#webhook-summary [data-window="1h"]')
    await expect(hour.locator('[data-field="success_rate"]')).to_have_text("40%")  # 2 of 5 attempts
    await expect(hour.locator('[data-field="deliveries"]')).to_have_text("3: 2 ok, 1 failed, 0 pending")
    await expect(hour.locator('[data-field="last_error"]')).to_contain_text("500")
    await expect(page.locator('#webhook-summary [data-window="24h"] [data-field="success_rate"]')).to_have_text("40%")
    await expect(page.locator('#webhook-summary [data-field="circuit"] [data-status]')).to_have_attribute(
        "data-status", "closed"
    )
    await expect(page.locator('#webhook-summary [data-field="in_flight"]')).to_have_text("0")
    rows = page.locator("#webhook-deliveries tbody.delivery")
    await expect(rows).to_have_count(3)
    opened = page.locator(f'tbody.delivery[data-delivery-id="{failed["id"]}"]')
    await opened.get_by_role("button", name="Attempts (3)").click()
    await expect(opened.locator("tr.attempt").first).to_be_visible()
    await screenshot(page, "webhook")

    await page.locator("select[name=status]").select_option("failed")
    await page.get_by_role("button", name="Filter").click()
    await expect(rows).to_have_count(1)
    row = page.locator(f'tbody.delivery[data-delivery-id="{failed["id"]}"]')
    await expect(row.locator("tr.summary [data-status]")).to_have_attribute("data-status", "failed")
    await expect(row.locator('tr.summary td[data-label="last status code"]')).to_have_text("500")
    attempts = row.locator("tr.attempt")
    await expect(attempts.first).to_be_hidden()
    await row.get_by_role("button", name="Attempts (3)").click()
    await expect(attempts).to_have_count(3)
    await expect(attempts.nth(2)).to_be_visible()
    await expect(attempts.nth(0)).to_contain_text("500")
    await expect(row.get_by_role("button", name="Attempts (3)")).to_have_attribute("aria-expanded", "true")

    await page.goto(f"{service.url}/dashboard#/webhooks")
    listed = page.locator(f'#webhook-list tr[data-webhook-id="{webhook_id}"]')
    await expect(listed.locator('[data-field="success_rate"]')).to_have_text("40%")
    await expect(listed.locator('td[data-label="circuit"] [data-status]')).to_have_attribute("data-status", "closed")
    await screenshot(page, "webhooks")

    async with tab(browser, NARROW) as narrow:
        await sign_in(service, narrow.page, key)
        await narrow.page.goto(f"{service.url}/dashboard#/webhooks/{webhook_id}")
        await expect(narrow.page.locator("#webhook-deliveries tbody.delivery")).to_have_count(3)
        await narrow.page.locator("tbody.delivery").first.get_by_role("button", name="Attempts").click()
        assert await sideways(narrow.page) <= 0
        await narrow.page.goto(f"{service.url}/dashboard#/webhooks")
        await expect(narrow.page.locator("#event-catalogue")).to_be_visible()
        await narrow.page.locator("#event-catalogue details").first.click()
        assert await sideways(narrow.page) <= 0
        assert narrow.unexpected() == []


async def test_a_jobs_audit_trail_shows_its_delivery_rendered_with_the_json_folded(
    service: Service, tab_of: Tab, browser: Browser
) -> None:
    page, key = tab_of.page, await service.new_key("dash-hooks-trail")
    job = await service.submit(key, job_type="echo", payload={}, callback_url=service.receiver.url("/trail"))
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    entry = page.locator("#audit-trail li[data-event=delivery]").first
    await expect(entry.locator("[data-status]").first).to_have_attribute("data-status", "succeeded")
    await expect(entry.locator('dd[data-field="status code"]')).to_have_text("200")
    await expect(entry.locator('dd[data-field="event type"]')).to_have_text("job.succeeded")
    await expect(entry.locator('dd[data-field="endpoint"]')).to_have_text(service.receiver.url("/trail"))
    await expect(entry.locator('dd[data-field="attempt"]')).to_have_text("1")
    await expect(entry.locator('dd[data-field="duration"]')).to_contain_text(" ms")
    raw = entry.locator("details pre.json")
    await expect(raw).to_be_hidden()  # the entry as it is stored, folded away
    await entry.locator("details summary").click()
    await expect(raw).to_contain_text('"outcome": "succeeded"')
    async with tab(browser, NARROW) as narrow:
        await sign_in(service, narrow.page, key)
        await narrow.page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
        shown = narrow.page.locator("#audit-trail li[data-event=delivery]").first
        await expect(shown.locator('dd[data-field="status code"]')).to_have_text("200")
        await shown.locator("details summary").click()
        assert await sideways(narrow.page) <= 0
        assert narrow.unexpected() == []


async def test_the_create_form_lists_the_event_catalogue_and_subscribes_to_what_is_ticked(
    service: Service, tab_of: Tab
) -> None:
    page, key = tab_of.page, await service.new_key("dash-hooks-catalogue")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/webhooks")
    kinds = page.locator("#event-catalogue li[data-event-type]")
    catalogue = (await service.http.get("/api/v1/event-types", headers=bearer(key))).json()
    await expect(kinds).to_have_count(len(catalogue))
    succeeded = page.locator('#event-catalogue li[data-event-type="job.succeeded"]')
    await expect(succeeded.locator("input[name=events]")).to_be_checked()
    await expect(succeeded).to_contain_text("finished with a result")
    await succeeded.locator("summary").click()
    await expect(succeeded.locator("pre.json")).to_contain_text('"type": "job.succeeded"')
    await expect(page.locator('li[data-event-type="webhook.test"] input')).to_have_count(0)  # never subscribed to
    form = page.locator("#webhook-create")
    await form.locator("input[name=url]").fill(service.receiver.url("/catalogue"))
    await page.locator('li[data-event-type="job.progress"] input[name=events]').check()
    await page.locator('li[data-event-type="job.retrying"] input[name=events]').uncheck()
    await form.get_by_role("button", name="Create endpoint").click()
    await expect(page.locator("#secret-once")).to_be_visible()
    [created] = (await service.http.get("/api/v1/webhooks", headers=bearer(key))).json()
    assert created["events"] == ["job.succeeded", "job.dead_lettered", "job.cancelled", "job.progress"]
