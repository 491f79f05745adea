"""The SSRF guard over every URL the service calls: webhook URLs (at registration and update), a job's
`callback_url`, an image job's `image_url` and a notification job's `url` (submitted, or in a schedule's job).

Each unsafe URL is refused with a 422 when it is registered or submitted, and refused again (and logged) when it
is called, before any connection: host names go to a stub resolver and every dial to a counter, so no
test sends a packet anywhere but to its own server on 127.0.0.1.
"""

import contextlib
import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import pytest
from loguru import logger
from starlette.responses import Response

from app.core import ssrf
from app.core.safe_http import Address, post, safe_client
from app.main import create_app
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import ADMIN_KEY, make_settings
from tests.receiver import Receiver
from tests.support import Api, api_with, until_status, wait_for

# What the stub resolver answers: names that look harmless but lead somewhere private.
NAMES = {
    "internal.test": ["10.0.0.5"],
    "metadata.test": ["169.254.169.254"],
    "mixed.test": ["93.184.216.34", "127.0.0.1"],  # one bad address refuses the name: answers rotate
    "six.test": ["::1"],
    "public.test": ["93.184.216.34"],  # only ever registered, never called
    "redirector.test": ["127.0.0.1"],  # the redirect test's own server
}
# Refused for their address, wherever they are given; `why` is part of the sentence that says so. (Odd spellings
# of an IPv4 address are called as the address they spell, so the sentence at send time names that address.)
BY_ADDRESS = [
    ("http://127.0.0.1/hook", "127.0.0.1 is a loopback address"),
    ("http://127.8.9.10:8080/hook", "a loopback address"),
    ("http://[::1]/hook", "::1 is a loopback address"),
    ("http://10.1.2.3/hook", "a private address"),
    ("http://172.16.5.4/hook", "a private address"),
    ("http://192.168.1.1/hook", "a private address"),
    ("http://169.254.169.254/latest/meta-data", "a link-local address"),
    ("http://100.64.0.1/hook", "a carrier-grade NAT address"),
    ("http://0.0.0.0/hook", "an unspecified ('this network') address"),
    ("http://224.0.0.1/hook", "a multicast address"),
    ("http://[ff02::1]/hook", "a multicast address"),
    ("http://240.0.0.1/hook", "a reserved address"),
    ("http://255.255.255.255/hook", "a reserved address"),
    ("http://[fd00::1]/hook", "a private (unique local) address"),
    ("http://[fe80::1]/hook", "a link-local address"),
    ("http://[::ffff:127.0.0.1]/hook", "IPv4-mapped form of 127.0.0.1, a loopback address"),
    ("http://[::ffff:a9fe:a9fe]/hook", "IPv4-mapped form of 169.254.169.254"),
    ("http://[::ffff:0:127.0.0.1]/hook", "IPv4-translated form of 127.0.0.1, a loopback address"),
    ("http://[::ffff:0:a9fe:a9fe]/hook", "IPv4-translated form of 169.254.169.254, a link-local address"),
    ("http://[5f00::1]/hook", "a reserved (unallocated) IPv6 address"),
    ("http://[2002:7f00:1::1]/hook", "a 6to4 address"),
    ("http://[2002:a9fe:a9fe::]/hook", "a 6to4 address"),
    ("http://2130706433/hook", "a loopback address"),
    ("http://0177.0.0.1/hook", "a loopback address"),
    ("http://0x7f.1/hook", "a loopback address"),
    ("http://127.1/hook", "a loopback address"),
    ("http://0x7f000001/hook", "a loopback address"),
    ("http://017700000001/hook", "a loopback address"),
    ("http://0xa9.0xfe.0xa9.0xfe/hook", "a link-local address"),
    ("http://127.0.0.1.:80/hook", "a loopback address"),
    ("http://127.0.0.1#@public.test/hook", "127.0.0.1 is a loopback address"),
    ("http://internal.test/hook", "internal.test resolves to 10.0.0.5, a private address"),
    ("http://metadata.test/latest/meta-data", "resolves to 169.254.169.254, a link-local address"),
    ("http://mixed.test/hook", "resolves to 127.0.0.1, a loopback address"),
    ("http://six.test/hook", "resolves to ::1, a loopback address"),
]
# Refused for their form, whatever the private-networks setting; the schema may answer before the guard does.
BY_FORM = [
    ("http://public@127.0.0.1/hook", "credentials"),
    ("http://public.test:x@127.0.0.1/hook", "credentials"),
    ("http://bob:hunter2@public.test/hook", "http://***@public.test/hook carries credentials"),
    ("http://127.0.0.1\\@public.test/hook", "credentials"),
    ("ftp://public.test/hook", None),
    ("file:///etc/passwd", None),
    ("gopher://public.test:70/_x", None),
    ("javascript:alert(1)", None),
    ("data:text/plain,hello", None),
    ("http://public.test/" + "a" * 2048, None),
]


@dataclass
class StubResolver:
    """Answers from NAMES; every lookup is recorded."""

    calls: list[str] = field(default_factory=list)

    async def resolve(self, host: str, port: int) -> tuple[list[str], float | None]:
        self.calls.append(host)
        if host not in NAMES:
            raise OSError(f"no address for {host}")
        return NAMES[host], 0


@dataclass
class Dials:
    """Every socket the guarded clients open, by the address and port it is for; one for anything but loopback is
    recorded and then refused before it is opened, so a guard that let an address through sends nothing there."""

    dialled: list[tuple[str, int]] = field(default_factory=list)

    def __call__(self, address: str, port: int) -> None:
        self.dialled.append((address, port))
        if not ipaddress.ip_address(address).is_loopback:
            raise OSError(f"a test dials loopback only, never {address}")


Submit = Callable[[Api, dict[str, str], str], Awaitable[httpx.Response]]


async def _webhook(api: Api, headers: dict[str, str], url: str) -> httpx.Response:
    return await api.client.post("/api/v1/webhooks", json={"url": url}, headers=headers)


async def _callback(api: Api, headers: dict[str, str], url: str) -> httpx.Response:
    return await api.submit(headers, callback_url=url)


async def _batch_callback(api: Api, headers: dict[str, str], url: str) -> httpx.Response:
    jobs = [{"job_type": "echo", "payload": {}}, {"job_type": "echo", "payload": {}, "callback_url": url}]
    return await api.client.post("/api/v1/jobs/batch", json={"jobs": jobs}, headers=headers)


async def _image(api: Api, headers: dict[str, str], url: str) -> httpx.Response:
    return await api.submit(headers, job_type="image", payload=image_payload(url), max_retries=0)


async def _notification(api: Api, headers: dict[str, str], url: str) -> httpx.Response:
    return await api.submit(headers, job_type="notification", payload={"url": url}, max_retries=0)


async def _schedule(api: Api, headers: dict[str, str], url: str) -> httpx.Response:
    job = {"job_type": "notification", "payload": {"url": url}, "callback_url": url}
    body = {"name": "ssrf", "cron": "0 3 * * *", "job": job}
    return await api.client.post("/api/v1/schedules", json=body, headers=headers)


def image_payload(url: str) -> dict[str, Any]:
    return {"image_url": url, "operations": ["grayscale"]}


SUBMITS: dict[str, Submit] = {
    "webhook": _webhook,
    "callback_url": _callback,
    "batch callback_url": _batch_callback,
    "image_url": _image,
    "notification.url": _notification,
    "a schedule's job": _schedule,
}


def use_resolver(api: Api, resolver: StubResolver) -> None:
    """The API's registration check looks names up through the stub."""
    state = api.app.state.api
    state.webhooks = replace(state.webhooks, resolver=resolver)


@contextlib.asynccontextmanager
async def guarded_workers(
    worker: JobWorker, hooks: WebhookWorker, resolver: StubResolver, **options: Any
) -> AsyncIterator[Dials]:
    """Both workers call out through clients that refuse private networks, resolve through the stub and dial
    through a dial counter."""
    backend = Dials()
    jobs_http = safe_client(False, resolver=resolver, dialled=backend, dns_min_seconds=0, **options)
    hooks_http = safe_client(False, resolver=resolver, dialled=backend, dns_min_seconds=0, **options)
    previous = (worker.tools, hooks.http)
    worker.tools, hooks.http = replace(worker.tools, http=jobs_http), hooks_http
    try:
        yield backend
    finally:
        worker.tools, hooks.http = previous
        await jobs_http.aclose()
        await hooks_http.aclose()


@contextlib.contextmanager
def log_lines() -> Any:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING")
    try:
        yield lines
    finally:
        logger.remove(sink)


async def test_every_unsafe_url_is_refused_at_registration_without_a_lookup_of_an_address() -> None:
    resolver = StubResolver()
    app = create_app(make_settings(webhook_allow_private_networks=False))
    async with api_with(app, ADMIN_KEY) as api:
        use_resolver(api, resolver)
        headers = await api.new_client("ssrf-matrix-register")
        kept = await _webhook(api, headers, "https://public.test/hook")
        assert kept.status_code == 201, kept.text
        for name, submit in SUBMITS.items():
            for url, why in BY_ADDRESS + BY_FORM:
                answer = await submit(api, headers, url)
                assert answer.status_code == 422, (name, url, answer.text)
                assert answer.json()["code"] in ("unsafe_url", "validation_error"), (name, url)
                assert why is None or why in answer.text, (name, url, answer.text)
                assert "hunter2" not in answer.text, (name, url, answer.text)
                if (url, why) in BY_ADDRESS:  # the guard's own answer, not the schema's
                    assert answer.json()["code"] == "unsafe_url", (name, url)
        for url, why in BY_ADDRESS + BY_FORM:
            answer = await api.client.patch(f"/api/v1/webhooks/{kept.json()['id']}", json={"url": url}, headers=headers)
            assert answer.status_code == 422, (url, answer.text)
            assert why is None or why in answer.text, (url, answer.text)
            assert "hunter2" not in answer.text, (url, answer.text)
        assert (await api.client.get("/api/v1/jobs", headers=headers)).json()["items"] == []
        assert (await api.client.get("/api/v1/schedules", headers=headers)).json()["items"] == []
        [hook] = (await api.client.get("/api/v1/webhooks", headers=headers)).json()
        assert hook["url"] == "https://public.test/hook"
    # Only names were looked up: an address in the URL, in any spelling, is judged as it is.
    assert set(resolver.calls) == {"public.test", "internal.test", "metadata.test", "mixed.test", "six.test"}


async def test_every_unsafe_url_is_refused_and_logged_at_send_time_before_any_connection(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker
) -> None:
    """Registered while private networks were allowed (or DNS changed since): refused when called all the same."""
    resolver = StubResolver()
    use_resolver(api, resolver)
    headers = await api.new_client("ssrf-matrix-send")
    urls = dict(BY_ADDRESS)
    for url in urls:  # only flaky jobs' events, so the other jobs here fan out to none of them
        subscription = {"url": url, "events": ["job.succeeded"], "job_type": "flaky"}
        created = await api.client.post("/api/v1/webhooks", json=subscription, headers=headers)
        assert created.status_code == 201, created.text
    async with guarded_workers(worker, webhook_worker, resolver) as backend:
        with log_lines() as lines:
            fanned = (await api.submit(headers, job_type="flaky", payload={"fail_times": 0})).json()
            callbacks = {(await _callback(api, headers, url)).json()["id"]: url for url in urls}
            images = {(await _image(api, headers, url)).json()["id"]: url for url in urls}
            notifications = {(await _notification(api, headers, url)).json()["id"]: url for url in urls}
            for job_id, url in (images | notifications).items():
                dead = await until_status(api, headers, job_id, 30)
                assert dead["status"] == "dead_lettered", (url, dead)
                assert urls[url] in dead["error"]["message"], (url, dead["error"])
            deliveries = [*await _failed(api, headers, fanned["id"], len(urls))]
            for job_id in callbacks:
                deliveries += await _failed(api, headers, job_id, 1)
    assert backend.dialled == []
    assert sorted(d["url"] for d in deliveries) == sorted([*urls, *urls])
    for delivery in deliveries:
        assert [a["status_code"] for a in delivery["attempts"]] == [None, None, None], delivery
        assert all(urls[delivery["url"]] in a["error"] for a in delivery["attempts"]), delivery
        assert any(f"delivery {delivery['id']} refused before connecting" in line for line in lines), delivery["id"]
    for job_id in images | notifications:
        assert any(f"job {job_id} dead-lettered" in line for line in lines), job_id
    assert set(resolver.calls) <= set(NAMES)


async def test_a_redirect_to_a_private_address_is_never_followed(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver
) -> None:
    """The first hop is let through to the test's own server (a public name, as far as the guard is told); the
    redirect it answers with, to the cloud metadata address, is never dialled."""
    resolver = StubResolver()
    use_resolver(api, resolver)
    receiver.answer = lambda _: Response(status_code=302, headers={"Location": "http://169.254.169.254/latest/"})
    url = f"http://redirector.test:{receiver.port}/moved"
    headers = await api.new_client("ssrf-matrix-redirect")
    created = await api.client.post("/api/v1/webhooks", json={"url": url, "events": ["job.succeeded"]}, headers=headers)
    assert created.status_code == 201

    def first_hop_only(address: Address) -> str | None:
        return None if address == ipaddress.ip_address("127.0.0.1") else ssrf.refusal(address)

    async with guarded_workers(worker, webhook_worker, resolver, policy=first_hop_only) as backend:
        fanned = (await api.submit(headers, callback_url=url)).json()
        image = (await _image(api, headers, url)).json()
        notification = (await _notification(api, headers, url)).json()
        for job in (image, notification):
            dead = await until_status(api, headers, job["id"], 30)
            assert dead["status"] == "dead_lettered" and "answered 302" in dead["error"]["message"], dead
        deliveries = await _failed(api, headers, fanned["id"], 2)
    assert all([a["status_code"] for a in d["attempts"]] == [302, 302, 302] for d in deliveries), deliveries
    assert {path for path in (r.path for r in receiver.requests)} == {"/moved"}
    assert len(receiver.requests) == 3 + 3 + 1 + 1  # the endpoint's and the callback's attempts, two jobs
    assert {host for host, _ in backend.dialled} == {"127.0.0.1"}


async def _failed(api: Api, headers: dict[str, str], job_id: str, count: int) -> list[dict[str, Any]]:
    """The job's `count` deliveries, once every one of them has failed for good."""

    async def all_failed() -> list[dict[str, Any]] | None:
        logs: list[dict[str, Any]] = (await api.client.get(f"/api/v1/jobs/{job_id}/logs", headers=headers)).json()
        done = len(logs) == count and all(d["status"] == "failed" for d in logs)
        return logs if done else None

    found = await wait_for(all_failed, within=30)
    assert found is not None
    return found


@pytest.mark.parametrize(("url", "why"), BY_ADDRESS)
async def test_the_guarded_client_refuses_before_dialling(url: str, why: str) -> None:
    """The client both workers call through, on its own: a refusal, and no dial."""
    resolver, backend = StubResolver(), Dials()
    async with safe_client(False, resolver=resolver, dialled=backend, dns_min_seconds=0) as client:
        with pytest.raises(ssrf.UnsafeURL, match="only public addresses are called"):
            await post(client, url, b"{}", {}, timeout_seconds=2)
    assert backend.dialled == []
