"""The dashboard in headless Chromium against a running service (API with embedded workers) on the test database."""

import asyncio
import base64
import io
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from PIL import Image
from playwright.async_api import Browser, Page, Request, expect
from redis.asyncio import Redis

from tests.browser import CHROMIUM, NARROW, Tab, tab
from tests.conftest import ADMIN_KEY, NS, REDIS_URL
from tests.flows.dashboard import WITHIN, YEARLY, Service, bearer, job_ids, screenshot, sideways, sign_in, step
from tests.support import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is missing: apt-get install chromium"),
]


async def test_the_page_has_a_strict_policy_and_no_cookie(service: Service) -> None:
    for path in ("/dashboard", "/dashboard/static/js/main.js", "/dashboard/static/dashboard.css"):
        answer = await service.http.get(path)
        assert answer.status_code == 200, path
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self';" in policy and "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert "frame-ancestors 'none'" in policy
        assert answer.headers["x-frame-options"] == "DENY"
        assert "set-cookie" not in answer.headers
    missing = await service.http.get("/dashboard/static/js/missing.js")
    assert missing.status_code == 404 and missing.headers["x-frame-options"] == "DENY"
    schema = (await service.http.get("/openapi.json")).json()
    assert not [path for path in schema["paths"] if path.startswith("/dashboard")]
    assert {"/api/v1/me", "/api/v1/queues"} <= set(schema["paths"])


async def test_a_wrong_key_is_refused_and_a_right_one_signs_in(service: Service, tab_of: Tab) -> None:
    page = tab_of.page
    tab_of.expect_error(r"status of 401")
    answer = await page.goto(f"{service.url}/dashboard")
    assert answer is not None and "script-src 'self'" in answer.headers["content-security-policy"]
    await page.fill("#api-key", "tq_not_a_key")
    await page.click("#sign-in-form button[type=submit]")
    await expect(page.locator("#sign-in-error")).to_have_text("That API key is unknown or revoked.")
    await expect(page.locator("#nav")).to_be_hidden()
    await sign_in(service, page, ADMIN_KEY)
    await expect(page.locator("#who")).to_contain_text("(admin)")
    await expect(page.locator("#throughput svg")).to_be_visible()
    assert ADMIN_KEY not in page.url and ADMIN_KEY not in await page.content()
    assert await page.evaluate("document.cookie") == ""
    assert await page.evaluate("sessionStorage.getItem('taskq.apiKey')") == ADMIN_KEY


async def test_jobs_turn_succeeded_on_the_jobs_page_without_a_reload(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-jobs")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/jobs")
    await expect(page.locator("#live-state")).to_have_text("Live updates: on")
    await page.evaluate("window.stayed = true")  # gone if the page reloads
    # The page looks for arrivals a second after the first event and shows them then (both, since they came
    # together): each job runs long enough to be seen running however late that look is answered.
    jobs = [await service.submit(key, job_type="sleep", payload={"seconds": 4}) for _ in range(2)]
    for job in jobs:
        row = page.locator(f'tr[data-job-id="{job["id"]}"]')
        await expect(row.locator("[data-status]")).to_have_attribute("data-status", "running")
    for job in jobs:
        row = page.locator(f'tr[data-job-id="{job["id"]}"]')
        await expect(row.locator("[data-status]")).to_have_attribute("data-status", "succeeded")
    assert await page.evaluate("window.stayed") is True


async def test_a_job_page_shows_its_audit_trail_and_a_delivery_with_its_attempts(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-job")
    service.receiver.statuses[:] = [500]  # the first attempt fails, the retry succeeds
    job = await service.submit(
        key, job_type="echo", payload={"hello": "dashboard"}, callback_url=service.receiver.url("/job")
    )
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    trail = page.locator("#audit-trail li")
    await expect(trail.locator("xpath=self::*[@data-event='succeeded']")).to_have_count(1)
    events = await trail.evaluate_all("items => items.map(item => item.dataset.event)")
    assert events[:4] == ["created", "queued", "running", "succeeded"]
    delivery = page.locator(".delivery")
    await expect(delivery.locator("header [data-status]")).to_have_attribute("data-status", "succeeded")
    attempts = delivery.locator("tr.attempt")
    await expect(attempts).to_have_count(2)
    await expect(attempts.nth(0)).to_contain_text("500")
    await expect(attempts.nth(1)).to_contain_text("200")
    await expect(page.locator("pre.json").first).to_contain_text('"hello": "dashboard"')
    await screenshot(page, "job")


async def test_a_job_page_shows_its_concurrency_keys_running_and_waiting_counts(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-flow")
    body = {"job_type": "sleep", "payload": {"seconds": 3}, "concurrency": {"key": "export", "limit": 1}}
    first = await service.submit(key, **body)
    await service.until_status(key, first["id"], "running")
    second = await service.submit(key, **body)
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/jobs/{second['id']}")
    flow = page.locator("#flow")
    await expect(flow.locator("dd[data-field='concurrency']")).to_have_text("export (limit 1)")
    await expect(flow.locator("dd[data-field='key running']")).to_have_text("1")
    await expect(flow.locator("dd[data-field='key waiting']")).to_have_text("1")


async def test_a_job_page_shows_its_progress_as_a_bar_that_moves_while_it_runs(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-progress")
    job = await service.submit(key, job_type="sleep", payload={"seconds": 4, "progress": True})
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    bar = page.locator("#job-progress")
    await expect(bar).to_be_visible()  # the first report, at 0.5 s, arrives on the job's stream
    first = float(await bar.get_attribute("data-fraction") or "nan")
    assert 0 < first < 1
    await expect(page.locator("#job-progress .percent")).not_to_have_text(f"{round(first * 100)}%")
    await expect(bar).to_have_attribute("data-fraction", "1")  # its last report, kept once it succeeded
    await expect(page.locator("#job-progress .percent")).to_have_text("100%")


async def test_a_running_job_is_cancelled_from_its_page(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-cancel-running")
    job = await service.submit(key, job_type="sleep", payload={"seconds": 60})
    await service.until_status(key, job["id"], "running")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    await expect(page.locator("h1 [data-status]")).to_have_attribute("data-status", "running")
    async with page.expect_event("dialog") as asked:
        await page.get_by_role("button", name="Cancel job").click()
    assert (await asked.value).message.startswith("Cancel this running job?")
    await expect(page.locator("#toast")).to_have_text("Cancel asked: the job stops within seconds.")
    await service.until_status(key, job["id"], "cancelled")
    await expect(page.locator("#audit-trail li[data-event=cancelled]")).to_have_count(1)
    await expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)


async def test_a_dead_job_is_replayed_from_the_dlq_page_and_succeeds(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-dlq")
    job = await service.submit(key, job_type="flaky", payload={"fail_times": 1}, max_retries=0)
    await service.until_status(key, job["id"], "dead_lettered")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/dlq")
    row = page.locator(f'#dlq-table tr[data-job-id="{job["id"]}"]')
    await expect(row).to_contain_text("flaky")
    await expect(page.locator("#dlq-stats")).to_contain_text("dead-lettered1")
    await screenshot(page, "dlq")
    await row.locator("input[type=checkbox]").check()
    await page.get_by_role("button", name="Replay selected").click()
    await expect(page.locator("#toast")).to_have_text("Replayed 1 job(s).")
    await expect(row).to_have_count(0)
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    await expect(page.locator("h1 [data-status]")).to_have_attribute("data-status", "succeeded")
    await expect(page.locator("#audit-trail li[data-event=replayed]")).to_have_count(1)
    other = await service.submit(key, job_type="flaky", payload={"fail_times": 1}, max_retries=0)
    await service.until_status(key, other["id"], "dead_lettered")
    await page.goto(f"{service.url}/dashboard#/dlq")
    await page.locator("select[name=replay_type]").select_option("flaky")
    await page.get_by_role("button", name="Replay type").click()
    await expect(page.locator("#toast")).to_have_text("Replayed 1 job(s).")
    await service.until_status(key, other["id"], "succeeded")


async def test_a_schedule_made_on_its_page_runs_now_pauses_and_is_deleted(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-schedules")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/schedules")
    form = page.locator("#schedule-create")
    await form.locator("input[name=name]").fill("yearly-echo")
    await form.locator("input[name=cron]").fill(YEARLY)
    await form.locator("select[name=job_type]").select_option("echo")
    await form.locator("textarea[name=payload]").fill('{"from": "schedule"}')
    await form.get_by_role("button", name="Create schedule").click()
    row = page.locator("#schedule-list tr[data-schedule-id]")
    await expect(row).to_have_count(1)
    schedule_id = await row.get_attribute("data-schedule-id")
    path = f"/api/v1/schedules/{schedule_id}"
    saved = (await service.http.get(path, headers=bearer(key))).json()
    zone = await page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")  # the form's default
    assert (saved["name"], saved["cron"], saved["timezone"], saved["active"]) == ("yearly-echo", YEARLY, zone, True)
    assert saved["job"] == {"job_type": "echo", "payload": {"from": "schedule"}}
    next_run = await page.evaluate(
        "async iso => (await import('/dashboard/static/js/dom.js')).when(iso)", saved["next_run_at"]
    )
    await expect(row.locator("td.next-run")).to_have_text(next_run)
    await expect(row.locator("td.state [data-status]")).to_have_attribute("data-status", "active")
    await expect(form.locator("input[name=name]")).to_have_value("")  # the form is back to its defaults

    await row.get_by_role("button", name="Run now").click()
    made = page.locator("#schedule-run [data-job-id]")
    job_id = await made.get_attribute("data-job-id")
    assert job_id is not None
    await expect(made.locator("a")).to_have_attribute("href", f"#/jobs/{job_id}")
    await service.until_status(key, job_id, "succeeded")
    job = (await service.http.get(f"/api/v1/jobs/{job_id}", headers=bearer(key))).json()
    assert job["idempotency_key"].startswith(f"schedule:{schedule_id}:") and job["result"] == {"from": "schedule"}
    await screenshot(page, "schedules")

    await row.get_by_role("button", name="Pause").click()
    await expect(row.locator("td.state [data-status]")).to_have_attribute("data-status", "paused")
    paused = (await service.http.get(path, headers=bearer(key))).json()
    assert paused["active"] is False and paused["next_run_at"] is None
    await expect(row.get_by_role("button", name="Resume")).to_be_visible()

    async with page.expect_event("dialog") as asked:
        await row.get_by_role("button", name="Delete").click()
    assert (await asked.value).message.startswith("Delete the schedule yearly-echo?")
    await expect(row).to_have_count(0)
    await expect(page.locator("#schedule-list")).to_have_text("No schedules yet.")
    assert (await service.http.get(path, headers=bearer(key))).status_code == 404


async def test_a_bad_cron_shows_the_apis_error_beside_the_form_and_makes_nothing(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-bad-cron")
    tab_of.expect_error(r"status of 422")
    posted: list[str] = []

    def sent(request: Request) -> None:
        if request.method == "POST":
            posted.append(request.url)

    page.on("request", sent)
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/schedules")
    form = page.locator("#schedule-create")
    problems = page.locator("#schedule-problems .error")
    await form.locator("input[name=name]").fill("broken")
    await form.locator("input[name=cron]").fill("every day")
    await form.locator("input[name=timezone]").fill("UTC")
    await form.locator("select[name=job_type]").select_option("echo")
    await form.locator("textarea[name=payload]").fill('{"unclosed": ')
    await form.get_by_role("button", name="Create schedule").click()
    await expect(problems).to_contain_text("The payload is not valid JSON")
    assert posted == []  # said before anything was sent

    await form.locator("textarea[name=payload]").fill("{}")
    await form.get_by_role("button", name="Create schedule").click()
    body = {"name": "broken", "cron": "every day", "timezone": "UTC", "job": {"job_type": "echo", "payload": {}}}
    refused = await service.http.post("/api/v1/schedules", json=body, headers=bearer(key))
    assert refused.status_code == 422, refused.text
    await expect(problems).to_contain_text(refused.json()["detail"])
    await expect(problems).to_contain_text(refused.json()["errors"][0]["msg"])
    assert posted == [f"{service.url}/api/v1/schedules"]
    listed = await service.http.get("/api/v1/schedules", headers=bearer(key))
    assert listed.json()["items"] == []
    await expect(page.locator("#schedule-list")).to_have_text("No schedules yet.")


async def test_a_new_webhook_secret_shows_once_and_never_again(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-hooks")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/webhooks")
    form = page.locator("#webhook-create")
    await form.locator("input[name=url]").fill(service.receiver.url("/endpoint"))
    await form.locator("input[name=description]").fill("dashboard test")
    await form.get_by_role("button", name="Create endpoint").click()
    secret = await page.locator("#secret-once code").text_content()
    assert secret is not None and secret.startswith("whsec_")
    await expect(page.locator("#webhook-list")).to_contain_text(service.receiver.url("/endpoint"))
    await expect(form.locator("input[name=events]:checked")).to_have_count(4)  # the form is back to its defaults
    await screenshot(page, "webhooks")
    await page.get_by_role("button", name="I have saved it").click()
    assert secret not in await page.content()
    await page.locator("#webhook-list a").first.click()
    await expect(page.locator("#webhook-edit")).to_be_visible()
    await page.get_by_role("button", name="Send test event").click()
    await expect(page.locator("#toast")).to_contain_text("Test event queued")
    await page.reload()
    await expect(page.locator("#webhook-edit")).to_be_visible()
    await expect(page.locator("#webhook-deliveries")).to_contain_text("webhook.test")
    assert secret not in await page.content() and secret not in page.url
    await page.get_by_role("button", name="Rotate secret").click()
    rotated = await page.locator("#secret-once code").text_content()
    assert rotated is not None and rotated.startswith("whsec_") and rotated != secret
    await page.get_by_role("button", name="Disable").click()
    await expect(page.locator("h1 [data-status]")).to_have_attribute("data-status", "disabled")
    await page.reload()
    await expect(page.locator("#webhook-edit")).to_be_visible()
    assert rotated not in await page.content()
    await screenshot(page, "webhook")


async def failed_test_delivery(service: Service, key: str, webhook_id: str) -> str:
    """A `webhook.test` delivery that fails every attempt (the receiver answers 500 three times)."""
    service.receiver.statuses[:] = [500, 500, 500]
    sent = await service.http.post(f"/api/v1/webhooks/{webhook_id}/test", headers=bearer(key))
    assert sent.status_code == 202, sent.text
    delivery_id: str = sent.json()["delivery_id"]

    async def failed() -> bool:
        answer = await service.http.get(f"/api/v1/webhooks/{webhook_id}/deliveries", headers=bearer(key))
        return any(d["id"] == delivery_id and d["status"] == "failed" for d in answer.json())

    await wait_for(failed, within=WITHIN)
    return delivery_id


async def test_a_failed_delivery_is_redelivered_and_failures_recovered_from_the_endpoint_page(
    service: Service, tab_of: Tab
) -> None:
    page, key = tab_of.page, await service.new_key("dash-redeliver")
    hook = await service.http.post("/api/v1/webhooks", json={"url": service.receiver.url("/redo")}, headers=bearer(key))
    webhook_id = hook.json()["id"]
    first = await failed_test_delivery(service, key, webhook_id)
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/webhooks/{webhook_id}")
    card = page.locator(f'.delivery[data-delivery-id="{first}"]')
    await expect(card.locator("tr.attempt")).to_have_count(3)
    await card.get_by_role("button", name="Redeliver").click()
    await expect(card.locator("tr.summary [data-status]")).to_have_attribute("data-status", "succeeded")
    await expect(card.locator("tr.attempt")).to_have_count(4)
    second = await failed_test_delivery(service, key, webhook_id)
    since = await page.evaluate(
        "() => { const d = new Date(Date.now() - 3600e3); d.setMinutes(d.getMinutes() - d.getTimezoneOffset());"
        " return d.toISOString().slice(0, 16); }"
    )
    await page.locator("input[name=since]").fill(since)
    await page.get_by_role("button", name="Recover").click()
    await expect(page.locator("#toast")).to_have_text("1 deliveries sent again.")
    again = page.locator(f'.delivery[data-delivery-id="{second}"] tr.summary [data-status]')
    await expect(again).to_have_attribute("data-status", "succeeded")


async def test_a_document_job_offers_its_pdf_for_download(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-artifact")
    document = {"title": "Dashboard", "content": [{"type": "paragraph", "text": "A page."}]}
    job = await service.submit(key, job_type="document", payload=document)
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    async with page.expect_download() as download:
        await page.get_by_role("button", name="Download artifact").click()
    path = await (await download.value).path()
    assert (await asyncio.to_thread(Path(path).read_bytes)).startswith(b"%PDF-")
    assert (await download.value).suggested_filename == f"document-{job['id']}.pdf"


async def test_an_image_job_shows_its_image_in_the_page(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-image")
    png = io.BytesIO()
    Image.new("RGB", (40, 30), "red").save(png, format="PNG")
    payload = {"image_base64": base64.b64encode(png.getvalue()).decode(), "operations": ["grayscale"]}
    job = await service.submit(key, job_type="image", payload=payload)
    await service.until_status(key, job["id"], "succeeded")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    await page.get_by_role("button", name="Open artifact").click()
    image = page.locator("#artifact img")
    await expect(image).to_be_visible()
    assert await image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [40, 30]


async def test_workflows_are_listed_filtered_by_status_paged_and_updated_live(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-workflows")
    quick = [await service.start_workflow(key, f"quick-{n}", step("only")) for n in range(25)]
    stopped = await service.start_workflow(
        key, "stopped", step("nap", job_type="sleep", seconds=1), step("after", "nap")
    )
    cancelled = await service.http.post(f"/api/v1/workflows/{stopped['id']}/cancel", headers=bearer(key))
    assert cancelled.status_code == 200, cancelled.text
    for workflow in quick:
        await service.until_workflow(key, workflow["id"], "succeeded")
    await service.until_workflow(key, stopped["id"], "cancelled")
    await sign_in(service, page, key)
    await page.get_by_role("link", name="Workflows").click()
    rows = page.locator("#workflows-table tr[data-workflow-id]")
    await expect(rows).to_have_count(25)
    await expect(rows.first).to_have_attribute("data-workflow-id", stopped["id"])  # the newest first
    await page.get_by_role("button", name="Older").click()
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_have_attribute("data-workflow-id", quick[0]["id"])
    await page.get_by_role("button", name="Newer").click()
    await expect(rows).to_have_count(25)

    await page.locator("select[name=status]").select_option("cancelled")
    await page.get_by_role("button", name="Filter").click()
    await expect(rows).to_have_count(1)
    await expect(rows.locator("[data-status]")).to_have_attribute("data-status", "cancelled")
    assert page.url.endswith("#/workflows?status=cancelled")
    await page.goto(f"{service.url}/dashboard#/workflows")
    await expect(page.locator("#live-state")).to_have_text("Live updates: on")
    await page.evaluate("window.stayed = true")  # gone if the page reloads
    late = await service.start_workflow(key, "late", step("nap", job_type="sleep", seconds=3))
    row = page.locator(f'tr[data-workflow-id="{late["id"]}"]')
    await expect(row.locator("[data-status]")).to_have_attribute("data-status", "running")
    await expect(row.locator("[data-status]")).to_have_attribute("data-status", "succeeded")
    await expect(row.locator("td.num")).to_have_text("1 / 1")
    assert await page.evaluate("window.stayed") is True
    await row.get_by_role("link", name="late").click()
    await expect(page.locator("#view h1")).to_contain_text("Workflow late")


async def node_state(page: Page, ref: str) -> tuple[str, str]:
    """A node's status and the fill its box is painted with."""
    node = page.locator(f'#workflow-dag a.node[data-ref="{ref}"]')
    status: str = await node.get_attribute("data-status") or ""
    fill: str = await node.locator("rect").evaluate("rect => getComputedStyle(rect).fill")
    return status, fill


async def test_a_workflow_page_draws_its_jobs_as_a_graph_coloured_by_status(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-graph")
    steps = [
        step("render"),
        step("thumbnail", "render", job_type="sleep", seconds=5),
        step("pdf", "render"),
        step("notify", "thumbnail", "pdf"),
        step("archive", "notify"),
        step("audit", "render", "archive"),  # an edge across two layers
        step("cleanup"),
    ]
    workflow = await service.start_workflow(key, "monthly-invoices", *steps)
    ids = job_ids(workflow)
    await service.until_status(key, ids["thumbnail"], "running")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/workflows/{workflow['id']}")
    nodes = page.locator("#workflow-dag a.node")
    await expect(nodes).to_have_count(7)
    layers = await nodes.evaluate_all("ns => Object.fromEntries(ns.map(n => [n.dataset.ref, Number(n.dataset.layer)]))")
    assert layers == {"render": 0, "cleanup": 0, "thumbnail": 1, "pdf": 1, "notify": 2, "archive": 3, "audit": 4}
    links = await nodes.evaluate_all("ns => Object.fromEntries(ns.map(n => [n.dataset.ref, n.getAttribute('href')]))")
    assert links == {ref: f"#/jobs/{job_id}" for ref, job_id in ids.items()}
    edges = await page.locator("#workflow-dag path.edge").evaluate_all(
        "ps => ps.map(p => [p.dataset.from, p.dataset.to])"
    )
    assert {(parent, child) for parent, child in edges} == {(p, s["ref"]) for s in steps for p in s["depends_on"]}
    await expect(page.locator('#workflow-dag a.node[data-ref="pdf"]')).to_have_attribute("data-status", "succeeded")
    states = {ref: await node_state(page, ref) for ref in ("thumbnail", "pdf", "notify")}
    assert [status for status, _ in states.values()] == ["running", "succeeded", "waiting"]
    assert len({fill for _, fill in states.values()}) == 3  # each status its own colour
    legend = page.locator("#dag-legend [data-status]")
    assert "waiting" in await legend.evaluate_all("keys => keys.map(k => k.dataset.status)")
    await expect(page.locator("#workflow-jobs tr[data-job-id]")).to_have_count(7)
    await expect(page.locator("dd[data-field=on_failure]")).to_have_text("cancel_dependents")
    await screenshot(page, "workflow")
    await expect(page.locator("h1 [data-status]")).to_have_attribute("data-status", "succeeded")
    await expect(page.locator('#workflow-dag a.node[data-status="succeeded"]')).to_have_count(7)
    await expect(page.locator("#workflow-counts [data-count=succeeded]")).to_have_text("succeeded 7")


async def test_a_node_changes_colour_as_its_job_moves_without_a_reload(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-live-graph")
    workflow = await service.start_workflow(
        key, "live", step("first", job_type="sleep", seconds=3), step("then", "first")
    )
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/workflows/{workflow['id']}")
    await expect(page.locator("#live-state")).to_have_text("Live updates: on")
    await page.evaluate("window.stayed = true")  # gone if the page reloads
    then = page.locator('#workflow-dag a.node[data-ref="then"]')
    await expect(then).to_have_attribute("data-status", "waiting")
    _, waiting = await node_state(page, "then")
    edge = page.locator('#workflow-dag path.edge[data-from="first"][data-to="then"]')
    await expect(edge).not_to_have_class(re.compile(r"\bmet\b"))
    await expect(then).to_have_attribute("data-status", "succeeded")
    _, succeeded = await node_state(page, "then")
    assert succeeded != waiting
    await expect(edge).to_have_class(re.compile(r"\bmet\b"))
    await expect(page.locator("h1 [data-status]")).to_have_attribute("data-status", "succeeded")
    row = page.locator(f'#workflow-jobs tr[data-job-id="{job_ids(workflow)["then"]}"]')
    await expect(row.locator("[data-status]")).to_have_attribute("data-status", "succeeded")
    assert await page.evaluate("window.stayed") is True


async def test_a_job_and_its_workflow_link_to_each_other(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-wf-links")
    workflow = await service.start_workflow(key, "linked", step("parent"), step("child", "parent"))
    ids = job_ids(workflow)
    await service.until_workflow(key, workflow["id"], "succeeded")
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/jobs/{ids['child']}")
    links = page.locator("#workflow-links")
    await expect(links.locator("dd[data-field=ref]")).to_have_text("child")
    dependency = links.locator(f'.dependency[data-job-id="{ids["parent"]}"]')
    await expect(dependency.locator("a")).to_have_attribute("href", f"#/jobs/{ids['parent']}")
    await expect(dependency.locator("[data-status]")).to_have_attribute("data-status", "succeeded")
    await links.get_by_role("link", name="linked").click()
    assert page.url.endswith(f"#/workflows/{workflow['id']}")
    await page.locator('#workflow-dag a.node[data-ref="parent"]').click()
    assert page.url.endswith(f"#/jobs/{ids['parent']}")
    await expect(page.locator("#workflow-links dd[data-field=depends_on]")).to_have_text("—")


async def test_a_workflow_is_cancelled_from_its_page(service: Service, tab_of: Tab) -> None:
    page, key = tab_of.page, await service.new_key("dash-wf-cancel")
    workflow = await service.start_workflow(
        key, "doomed", step("nap", job_type="sleep", seconds=60), step("after", "nap")
    )
    await service.until_status(key, job_ids(workflow)["nap"], "running")  # the cancel stops a run, every time
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/workflows/{workflow['id']}")
    await expect(page.locator("#live-state")).to_have_text("Live updates: on")
    async with page.expect_event("dialog") as asked:
        await page.get_by_role("button", name="Cancel workflow").click()
    assert (await asked.value).message.startswith("Cancel the workflow doomed?")
    await expect(page.locator("#toast")).to_have_text("Workflow cancelled.")
    await expect(page.locator('#workflow-dag a.node[data-ref="after"]')).to_have_attribute("data-status", "cancelled")
    await service.until_workflow(key, workflow["id"], "cancelled")  # the service ended it; then the page shows it
    await expect(page.locator("h1 [data-status]")).to_have_attribute("data-status", "cancelled")
    await expect(page.get_by_role("button", name="Cancel workflow")).to_have_count(0)


async def test_a_client_key_sees_neither_another_clients_jobs_nor_the_workers(service: Service, tab_of: Tab) -> None:
    page, owner, other = tab_of.page, await service.new_key("dash-owner"), await service.new_key("dash-other")
    tab_of.expect_error(r"status of 40[34]")
    job = await service.submit(owner, job_type="echo", payload={"private": True})
    workflow = await service.start_workflow(owner, "private", step("only"))
    await sign_in(service, page, other)
    await expect(page.locator("#nav a[data-page=workers]")).to_be_hidden()
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    await expect(page.locator("#view .error")).to_have_text("No job with that id.")
    await page.goto(f"{service.url}/dashboard#/jobs")
    await expect(page.locator("#live-state")).to_have_text("Live updates: on")
    await expect(page.locator(f'tr[data-job-id="{job["id"]}"]')).to_have_count(0)
    await page.goto(f"{service.url}/dashboard#/workflows/{workflow['id']}")
    await expect(page.locator("#view .error")).to_have_text("No workflow with that id.")
    await page.goto(f"{service.url}/dashboard#/workflows")
    await expect(page.locator("#live-state")).to_have_text("Live updates: on")
    await expect(page.locator("#workflows-table")).to_have_text("No workflows match.")
    await page.goto(f"{service.url}/dashboard#/workers")
    await expect(page.locator("#view .error")).to_have_text("This call needs an admin API key.")


async def test_every_page_draws_without_errors_also_on_a_narrow_screen(
    service: Service, browser: Browser, tab_of: Tab
) -> None:
    # A client's webhook and job, which the admin sees too: an admin's webhook would outlive this module and
    # deliver every later test's admin jobs.
    page, key = tab_of.page, await service.new_key("dash-pages")
    hook = await service.http.post("/api/v1/webhooks", json={"url": service.receiver.url("/all")}, headers=bearer(key))
    job = await service.submit(key, job_type="echo", payload={"page": "all"})
    paused = {"name": "all-pages", "cron": YEARLY, "job": {"job_type": "echo", "payload": {}}, "active": False}
    schedule = await service.http.post("/api/v1/schedules", json=paused, headers=bearer(key))
    schedule_row = f"#schedule-list tr[data-schedule-id='{schedule.json()['id']}']"
    workflow = await service.start_workflow(key, "all-pages", step("one"), step("two", "one"))
    await sign_in(service, page, ADMIN_KEY)
    pages = {
        "overview": ("#/", "#dlq-stats"),
        "jobs-admin": ("#/jobs", "#jobs-table table"),
        "job-admin": (f"#/jobs/{job['id']}", "#audit-trail"),
        "workflows-admin": ("#/workflows", "#workflows-table table"),
        "workflow-admin": (f"#/workflows/{workflow['id']}", "#workflow-dag"),
        "schedules-admin": ("#/schedules", schedule_row),
        "dlq-admin": ("#/dlq", "#dlq-stats"),
        "webhooks-admin": ("#/webhooks", "#webhook-list"),
        "webhook-admin": (f"#/webhooks/{hook.json()['id']}", "#webhook-edit"),
        "workers": ("#/workers", "[data-worker=job_worker]"),
    }
    await expect(page.locator("#throughput[data-live=on]")).to_have_count(1)
    # the last hour comes from the server and the events stream adds to it: 3 more of each (an admin sees every
    # client's jobs, so the figures may grow by more)
    await expect(page.locator("#overview-stamp")).to_contain_text("Figures read at")
    before = {name: await in_the_last_hour(page, name) for name in ("submitted", "succeeded")}
    for n in range(3):
        await service.submit(ADMIN_KEY, job_type="echo", payload={"n": n})
    for name, count in before.items():

        async def grown(name: str = name, count: int = count) -> bool:
            return await in_the_last_hour(page, name) >= count + 3

        await wait_for(grown, within=WITHIN)
    await expect(page.locator("#queue-depths tr[data-queue='jobs.default']")).to_be_visible()
    await screenshot(page, "overview")
    for name, (fragment, ready) in pages.items():
        await page.goto(f"{service.url}/dashboard{fragment}")
        await expect(page.locator(ready)).to_be_visible()
        if name == "workers":
            await screenshot(page, name)
    await expect(page.locator("#view table").first).to_be_visible()
    async with tab(browser, NARROW) as narrow:
        await sign_in(service, narrow.page, ADMIN_KEY)
        await expect(narrow.page.locator("#dlq-stats")).to_be_visible()
        assert await sideways(narrow.page) <= 0
        await screenshot(narrow.page, "overview-narrow")
        await narrow.page.goto(f"{service.url}/dashboard#/schedules")  # a wide table and a form
        await expect(narrow.page.locator(schedule_row)).to_be_visible()
        assert await sideways(narrow.page) <= 0
        await narrow.page.goto(f"{service.url}/dashboard#/workflows/{workflow['id']}")  # a graph wider than the screen
        await expect(narrow.page.locator("#workflow-dag")).to_be_visible()
        assert await sideways(narrow.page) <= 0
        assert narrow.unexpected() == []


async def in_the_last_hour(page: Page, series: str) -> int:
    """The figure of a series of the overview's chart legend ("submitted 12 in the last hour")."""
    text = await page.locator(f"[data-series={series}]").text_content() or ""
    found = re.match(rf"{series} (\d+) in the last hour", text)
    assert found, text
    return int(found.group(1))


@pytest.fixture
async def started_again(service: Service) -> AsyncIterator[None]:
    """The stop outlives the process by design: leave the worker running and forget the choice afterwards."""
    yield
    await service.http.post("/api/v1/workers/job_worker/start", headers=Service.admin)
    redis = Redis.from_url(REDIS_URL)
    await redis.delete(f"{NS}:worker_desired")
    await redis.aclose()


async def test_the_job_worker_is_stopped_and_started_from_the_workers_page(
    service: Service, tab_of: Tab, started_again: None
) -> None:
    page = tab_of.page
    await sign_in(service, page, ADMIN_KEY)
    await page.goto(f"{service.url}/dashboard#/workers")
    worker = page.locator("[data-worker=job_worker]")
    state = worker.locator("td.state [data-status]")
    await expect(state).to_have_attribute("data-status", "running")
    await worker.get_by_role("button", name="Stop").click()
    await expect(state).to_have_attribute("data-status", "stopped")
    await worker.get_by_role("button", name="Start").click()
    await expect(state).to_have_attribute("data-status", "running")


@pytest.fixture
async def echo_resumed(service: Service) -> AsyncIterator[None]:
    """A pause outlives everything by design: resume the type afterwards, whatever the test did."""
    yield
    await service.http.post("/api/v1/job-types/echo/resume", headers=Service.admin)


async def test_a_job_type_is_paused_and_resumed_from_the_overview(
    service: Service, tab_of: Tab, echo_resumed: None
) -> None:
    page = tab_of.page
    await sign_in(service, page, ADMIN_KEY)
    row = page.locator("#job-types tr[data-job-type=echo]")
    state = row.locator("td.state [data-status]")
    await expect(state).to_have_attribute("data-status", "active")

    await row.get_by_role("button", name="Pause").click()  # confirmed: the tab answers every dialog yes
    await expect(state).to_have_attribute("data-status", "paused")
    await expect(page.locator("#toast")).to_have_text("Pausing echo…")
    assert await paused_types(service) == ["echo"]
    await row.get_by_role("button", name="Resume").click()
    await expect(state).to_have_attribute("data-status", "active")
    await expect(row.get_by_role("button", name="Pause")).to_be_visible()
    assert await paused_types(service) == []


async def test_a_held_jobs_page_says_why_it_waits_until_it_runs(
    service: Service, tab_of: Tab, echo_resumed: None
) -> None:
    page, key = tab_of.page, await service.new_key("dash-held")
    assert (await service.http.post("/api/v1/job-types/echo/pause", headers=Service.admin)).status_code == 202
    # A pause reaches every worker within PAUSE_REFRESH_SECONDS (1 s); a job sent at once may still run, so this
    # one comes due three refreshes later.
    job = await service.submit(key, job_type="echo", payload={"waits": True}, delay_seconds=3)

    async def held() -> list[str]:
        answer = await service.http.get(f"/api/v1/jobs/{job['id']}/events", headers=bearer(key))
        events = [event["event"] for event in answer.json()]
        return events if "held" in events else []

    assert "running" not in await wait_for(held, within=WITHIN)
    await sign_in(service, page, key)
    await page.goto(f"{service.url}/dashboard#/jobs/{job['id']}")
    notice = page.locator("#held")
    await expect(notice).to_have_attribute("data-reason", "paused")
    await expect(notice).to_contain_text("Waiting, held: paused")

    assert (await service.http.post("/api/v1/job-types/echo/resume", headers=Service.admin)).status_code == 202
    await expect(page.locator("h1 [data-status]")).to_have_attribute("data-status", "succeeded")
    await expect(notice).to_have_count(0)


async def paused_types(service: Service) -> list[str]:
    answer = await service.http.get("/api/v1/job-types", headers=Service.admin)
    return [item["name"] for item in answer.json()["items"] if item["paused"]]
