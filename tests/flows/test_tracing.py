"""OpenTelemetry across the processes, against an OTLP/HTTP receiver: a client's span, the API process's submit,
the job worker process's claim, run and finish, the webhook worker process's fan-out and delivery attempt, and the
`traceparent` of the delivery the receiver verified are one trace, each span the child of the one before it; each
process exports its own spans. With no OTLP endpoint configured, tracing stays off."""

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
from taskq_client import verify_webhook

from app.core import tracing
from tests.conftest import ADMIN_KEY, make_settings, settings_env, world_of_its_own
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan, running_otlp_receiver
from tests.receiver import running_receiver
from tests.support import Process, app_process, env_without_dotenv, free_port, wait_for

SERVICES = {"taskq-api", "taskq-jobs-worker", "taskq-webhooks-worker"}


def test_tracing_is_off_without_an_otlp_endpoint() -> None:
    assert not tracing.configured({})
    assert not tracing.configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"})
    assert tracing.configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    assert not tracing.enabled() and tracing.headers() == {}  # the test process has none configured


def one(spans: list[ReceivedSpan], name: str, service: str) -> ReceivedSpan:
    found = [span for span in spans if span.name == name and span.service == service]
    assert len(found) == 1, (name, service, [(s.service, s.name) for s in spans])
    return found[0]


def ancestors(spans: list[ReceivedSpan], span: ReceivedSpan) -> Iterator[ReceivedSpan]:
    by_id = {s.span_id: s for s in spans}
    while span.parent_id in by_id:
        span = by_id[span.parent_id]
        yield span


async def test_one_trace_runs_from_a_client_through_submit_run_and_delivery_to_the_receiver(tmp_path: Path) -> None:
    trace_id, client_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    async with (
        world_of_its_own("tracing") as world,
        running_otlp_receiver() as collector,
        running_receiver() as hooks,
    ):
        settings = make_settings(port=free_port(), embedded_workers=False, **world)
        env = env_without_dotenv(settings_env(settings))
        env |= {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with (
            app_process(["api"], env, tmp_path / "api.log") as api,
            app_process(["worker", "jobs"], env, tmp_path / "jobs.log") as jobs,
            app_process(["worker", "webhooks"], env, tmp_path / "webhooks.log") as webhooks,
        ):
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.port}", timeout=10) as http:
                await _serving(http, [api, jobs, webhooks])
                admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
                hook = {"url": hooks.url("/traced"), "events": ["job.succeeded"]}
                endpoint = await http.post("/api/v1/webhooks", json=hook, headers=admin)
                assert endpoint.status_code == 201, endpoint.text
                traced = {**admin, "traceparent": f"00-{trace_id}-{client_span}-01"}
                job = {"job_type": "echo", "payload": {"traced": True}}
                submitted = await http.post("/api/v1/jobs", json=job, headers=traced)
                assert submitted.status_code == 201, submitted.text

                async def delivered() -> bool:
                    return bool(hooks.on("/traced"))

                await wait_for(delivered, within=30)
                await wait_for(lambda: _all_exported(collector, trace_id), within=30)
    spans = collector.of_trace(trace_id)
    assert {span.service for span in spans} == SERVICES  # each process exported its own spans
    run = one(spans, "job.run", "taskq-jobs-worker")
    assert run.attributes["job.id"] == submitted.json()["id"] and run.attributes["job.outcome"] == "succeeded"
    chain = [
        one(spans, "POST", "taskq-webhooks-worker"),  # the delivery's POST, by aiohttp's instrumentation
        one(spans, "webhook.deliver", "taskq-webhooks-worker"),
        one(spans, "webhook.fan_out", "taskq-webhooks-worker"),
        one(spans, "job.finish", "taskq-jobs-worker"),
        run,
        one(spans, "job.process", "taskq-jobs-worker"),
    ]
    for child, parent in itertools.pairwise(chain):
        assert child.parent_id == parent.span_id, (child.name, parent.name)
    submit = next(ancestors(spans, chain[-1]))
    assert submit.service == "taskq-api" and submit.parent_id == client_span  # the API joined the caller's trace
    delivery = hooks.on("/traced")[0]
    assert verify_webhook(endpoint.json()["secret"], delivery.headers, delivery.body)["type"] == "job.succeeded"
    received = delivery.headers["traceparent"]
    assert received.split("-")[1:3] == [trace_id, chain[0].span_id]  # the receiver's trace continues ours


async def _serving(http: httpx.AsyncClient, processes: list[Process]) -> None:
    async def ready() -> bool:
        for process in processes:
            assert process.popen.poll() is None, process.output()
        try:
            answer = await http.get("/api/v1/workers", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        except httpx.TransportError:
            return False
        kinds = {w["kind"] for w in answer.json()["items"] if w["state"] == "running"} if answer.is_success else set()
        return kinds >= {"job", "webhook"}

    await wait_for(ready, within=60, interval=0.2)


async def _all_exported(collector: OtlpReceiver, trace_id: str) -> bool:
    names = {(span.service, span.name) for span in collector.of_trace(trace_id)}
    worker = {"job.process", "job.run", "job.finish"}
    hooks = {"webhook.fan_out", "webhook.deliver", "POST"}
    wanted = {("taskq-jobs-worker", name) for name in worker} | {("taskq-webhooks-worker", name) for name in hooks}
    return wanted <= names
