"""Metrics: /metrics after real jobs and deliveries, a worker's METRICS_PORT, the alert rules under promtool, the
dashboard's queries, and a real Prometheus reading a job counter back."""

import asyncio
import contextlib
import json
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from app.core.config import Settings
from app.core.topology import declare
from app.main import create_app
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import ADMIN_KEY, make_settings, settings_env, start_worker
from tests.receiver import Receiver
from tests.support import ROOT, Api, BrokerProbe, api_with, app_process, env_without_dotenv, free_port, wait_for

PROMETHEUS_DIR = ROOT / "docker" / "prometheus"
DASHBOARD = ROOT / "docker" / "grafana" / "dashboards" / "taskq.json"
Labels = frozenset[tuple[str, str]]
Samples = dict[tuple[str, Labels], float]

CONTRACT = {
    "jobs_submitted_total": {"job_type", "client_id", "priority"},
    "jobs_completed_total": {"job_type", "status"},
    "job_duration_seconds_bucket": {"job_type", "le"},
    "job_retries_total": {"job_type"},
    "jobs_dead_lettered_total": {"job_type"},
    "circuit_breaker_state": {"task_type"},
    "rate_limit_rejected_total": {"client_id"},
    "worker_heartbeat_timestamp": {"worker_id"},
}


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when there is none)."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= have)


def labelled(samples: Samples, name: str) -> list[dict[str, str]]:
    return [dict(have) for n, have in samples if n == name]


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def heartbeats(samples: Samples) -> dict[str, float]:
    """Each worker's last heartbeat, by its name (`job_worker`, `webhook_worker`; its worker id ends with it)."""
    return {
        s["worker_id"].rsplit(":", 1)[1]: value(samples, "worker_heartbeat_timestamp", **s)
        for s in labelled(samples, "worker_heartbeat_timestamp")
    }


async def scrape(api: Api) -> Samples:
    answer = await api.client.get("/metrics")
    assert answer.status_code == 200
    return parse(answer.text)


def scraped_until(read: Callable[[], Awaitable[Samples]], done: Callable[[Samples], bool]) -> Callable[..., Any]:
    async def check() -> Samples | None:
        samples = await read()
        return samples if done(samples) else None

    return check


async def purge(broker: BrokerProbe, prefix: str) -> None:
    """Empty this run's queues under `prefix` (earlier tests' leftovers), DLQs aside; declared first if new."""
    await declare(broker.channel, broker.topology)
    names = [q.name for q in broker.topology.queues if q.name.startswith(prefix) and not q.name.endswith("dlq")]
    await broker.purge(*names)


def metrics_settings(**overrides: Any) -> Settings:
    return make_settings(metrics_interval_seconds=0.2, **overrides)


async def test_every_contract_metric_moves_by_exactly_the_jobs_run(broker: BrokerProbe) -> None:
    await purge(broker, f"{broker.topology.names.ns}.jobs")
    settings = metrics_settings(embedded_workers=True, rate_limit_per_minute=5)
    async with api_with(create_app(settings), ADMIN_KEY) as api:
        client = "metrics-" + uuid.uuid4().hex[:8]
        headers = await api.new_client(client)
        before = await scrape(api)
        await api.submit(headers, job_type="echo", priority=2)
        await api.submit(headers, job_type="flaky", payload={"fail_times": 1}, priority=5)  # one retry, then done
        await api.submit(headers, job_type="flaky", payload={"fail_times": 9, "permanent": True}, priority=5)
        batch = {"jobs": [{"job_type": "echo", "payload": {"n": n}} for n in range(3)]}  # 2 of 5 left
        assert (await api.client.post("/api/v1/jobs/batch", json=batch, headers=headers)).status_code == 429
        job_id = (await api.client.get("/api/v1/jobs?limit=1", headers=headers)).json()["items"][0]["id"]
        assert (await api.client.get(f"/api/v1/jobs/{job_id}", headers=headers)).status_code == 200
        assert (await api.client.get("/no/such/path/" + client)).status_code == 404

        def finished(now: Samples) -> bool:
            # The gauges are read by a background cycle: wait for one that ran after the consumers attached, and
            # for one that ran after both embedded workers said they were running (the broker counts a worker's
            # consumers as they attach; the worker says it runs once all of them have).
            attached = value(now, "queue_consumers", queue="jobs.critical") >= settings.job_consumers_critical
            return (
                delta(before, now, "jobs_completed_total") >= 3
                and bool(labelled(now, "outbox_backlog"))
                and attached
                and {"job_worker", "webhook_worker"} <= heartbeats(now).keys()
            )

        after = await wait_for(scraped_until(lambda: scrape(api), finished), within=30)

    assert delta(before, after, "jobs_submitted_total", job_type="echo", client_id=client, priority="2") == 1
    assert delta(before, after, "jobs_submitted_total", job_type="flaky", client_id=client, priority="5") == 2
    assert delta(before, after, "jobs_completed_total", job_type="echo", status="succeeded") == 1
    assert delta(before, after, "jobs_completed_total", job_type="flaky", status="succeeded") == 1
    assert delta(before, after, "jobs_completed_total", job_type="flaky", status="dead_lettered") == 1
    assert delta(before, after, "jobs_dead_lettered_total", job_type="flaky") == 1
    assert delta(before, after, "job_retries_total", job_type="flaky") == 1
    assert delta(before, after, "job_retries_total", job_type="echo") == 0
    assert delta(before, after, "job_duration_seconds_count", job_type="echo") == 1
    assert delta(before, after, "job_duration_seconds_count", job_type="flaky") == 3  # fail, succeed; fail for good
    assert delta(before, after, "rate_limit_rejected_total", client_id=client) == 1
    assert delta(before, after, "http_requests_total", handler="/api/v1/jobs", method="POST", status="201") == 3
    assert delta(before, after, "http_requests_total", handler="/api/v1/jobs/batch", status="429") == 1
    one_job = {"handler": "/api/v1/jobs/{job_id}", "method": "GET", "status": "200"}  # the route, not the path
    assert delta(before, after, "http_requests_total", **one_job) == 1
    assert delta(before, after, "http_request_duration_seconds_count", **one_job) == 1
    assert delta(before, after, "http_requests_total", handler="none", method="GET", status="404") == 1
    assert not [s for s in labelled(after, "http_requests_total") if client in s["handler"]]
    for name, labels in CONTRACT.items():
        assert any(set(have) == labels for have in labelled(after, name)), (name, labelled(after, name))
    assert value(after, "circuit_breaker_state", task_type="flaky") == 0  # permanent errors do not count
    beats = heartbeats(after)
    assert time.time() - beats["job_worker"] < 10 and time.time() - beats["webhook_worker"] < 10
    for state in ("ready", "unacked"):
        assert labelled(after, "queue_messages") and {"queue": "jobs.critical", "state": state} in labelled(
            after, "queue_messages"
        )
    assert value(after, "queue_consumers", queue="jobs.critical") >= settings.job_consumers_critical
    assert {"outbox_backlog", "outbox_oldest_age_seconds", "webhook_circuits_open"} <= {n for n, _ in after}


async def test_a_delivery_moves_the_webhook_and_group_commit_metrics(
    api: Api, worker: JobWorker, receiver: Receiver, broker: BrokerProbe
) -> None:
    await purge(broker, f"{broker.topology.names.ns}.webhooks")
    headers = await api.new_client("metrics-hooks-" + uuid.uuid4().hex[:8])
    hook = {"url": receiver.url("/metrics-hook"), "events": ["job.succeeded"]}
    assert (await api.client.post("/api/v1/webhooks", json=hook, headers=headers)).status_code == 201
    async with start_worker(WebhookWorker, make_settings()):
        before = await scrape(api)
        await api.submit(headers)

        def delivered(now: Samples) -> bool:
            return delta(before, now, "webhook_deliveries_total") >= 1

        after = await wait_for(scraped_until(lambda: scrape(api), delivered), within=30)
    assert len(receiver.on("/metrics-hook")) == 1
    assert delta(before, after, "webhook_deliveries_total", outcome="succeeded") == 1
    assert delta(before, after, "webhook_deliveries_total", outcome="failed") == 0
    assert delta(before, after, "webhook_delivery_duration_seconds_count") == 1
    assert delta(before, after, "group_commit_batch_size_sum", batcher="delivery-records") == 1
    assert delta(before, after, "group_commit_flush_seconds_count", batcher="delivery-records") >= 1
    assert delta(before, after, "group_commit_batch_size_sum", batcher="submits") == 1


async def test_a_worker_process_serves_its_metrics_on_metrics_port(
    api: Api, broker: BrokerProbe, tmp_path: Path
) -> None:
    await purge(broker, f"{broker.topology.names.ns}.jobs")
    port = free_port()
    env = env_without_dotenv(settings_env(metrics_settings(metrics_port=port)))
    url = f"http://127.0.0.1:{port}/metrics"

    async def read() -> Samples:
        async with httpx.AsyncClient(timeout=5) as http:
            try:
                answer = await http.get(url)
            except httpx.TransportError:
                return {}
        return parse(answer.text) if answer.status_code == 200 else {}

    with app_process(["worker", "jobs"], env, tmp_path / "worker.log") as process:

        def beating(now: Samples) -> bool:
            return "job_worker" in heartbeats(now)

        await wait_for(scraped_until(read, beating), within=30)
        headers = await api.new_client("metrics-worker-" + uuid.uuid4().hex[:8])
        await api.submit(headers)

        def ran(now: Samples) -> bool:
            return value(now, "jobs_completed_total", job_type="echo", status="succeeded") >= 1

        after = await wait_for(scraped_until(read, ran), within=30)
        assert value(after, "jobs_completed_total", job_type="echo", status="succeeded") == 1, process.output()
        assert value(after, "group_commit_batch_size_count", batcher="job-finishes") >= 1
        assert process.terminate() == 0, process.output()


MOST_SUBMITS = 300


def _counted_submits(shared: Path, client: str) -> dict[str, float]:
    """The client's jobs_submitted count in each process's file of shared values, for the files that have one."""
    counted = {}
    for path in shared.glob("counter_*.db"):
        values = MmapedDict.read_all_values_from_file(str(path))  # type: ignore[no-untyped-call]
        mine = [value for key, value, _, _ in values if key.startswith('["jobs_submitted"') and client in key]
        if mine:
            counted[path.name] = sum(mine)
    return counted


@pytest.mark.slow
async def test_two_api_processes_behind_one_port_answer_every_scrape_with_the_sum_of_both(tmp_path: Path) -> None:
    port = free_port()
    env = env_without_dotenv(settings_env(metrics_settings(port=port)))
    client, submits = "metrics-procs-" + uuid.uuid4().hex[:8], 0
    with app_process(["api", "--processes", "2"], env, tmp_path / "api.log") as service:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            await wait_for(_answers(http, "/health"), within=30)
            shared = await wait_for(lambda: asyncio.to_thread(_shared_folder, service.popen.pid), within=30)
            admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
            key = (await http.post("/api/v1/api-keys", json={"client_id": client}, headers=admin)).json()
        headers = {"Authorization": f"Bearer {key['api_key']}", "Connection": "close"}
        # A new connection each, which the kernel hands to either process: until both have counted a submit (a
        # busy machine may give one process many in a row).
        while len(counters := _counted_submits(shared, client)) < 2 and submits < MOST_SUBMITS:
            async with httpx.AsyncClient(base_url=base, timeout=10) as http:
                answer = await http.post(
                    "/api/v1/jobs", json={"job_type": "echo", "payload": {"n": submits}}, headers=headers
                )
                assert answer.status_code in (201, 202), answer.text
            submits += 1
        assert len(counters) == 2, (counters, submits, service.output())  # both processes counted submits
        assert sum(counters.values()) == submits
        for _ in range(6):
            async with httpx.AsyncClient(base_url=base, timeout=10, headers={"Connection": "close"}) as http:
                samples = parse((await http.get("/metrics")).text)
            assert value(samples, "jobs_submitted_total", client_id=client) == submits, service.output()

        async def both_processes_report_gauges() -> bool:
            async with httpx.AsyncClient(base_url=base, timeout=10) as http:
                samples = parse((await http.get("/metrics")).text)
            return len({dict(s)["pid"] for n, s in samples if n == "outbox_backlog"}) == 2

        assert await wait_for(both_processes_report_gauges, within=30), service.output()
        assert service.terminate() == 0, service.output()
    assert not shared.exists()  # the folder the parent made goes with it


def _shared_folder(parent: int) -> Path | None:
    """The folder in which the API processes under `parent` share their metric values, once two of them run."""
    folders = []
    for child in Path(f"/proc/{parent}/task/{parent}/children").read_text().split():
        environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        folders += [
            line.split(b"=", 1)[1].decode() for line in environ if line.startswith(b"PROMETHEUS_MULTIPROC_DIR=")
        ]
    return Path(folders[0]) if len(folders) >= 2 and len(set(folders)) == 1 else None


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=PROMETHEUS_DIR, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is missing: apt-get install prometheus")
def test_the_scrape_config_and_alert_rules_pass_promtool_and_their_unit_tests() -> None:
    for args in (
        ("check", "config", "prometheus.yml"),
        ("check", "rules", "alerts.yml"),
        ("test", "rules", "tests.yml"),
    ):
        result = promtool(*args)
        assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test() -> None:
    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    tests = yaml.safe_load((PROMETHEUS_DIR / "tests.yml").read_text())["tests"]
    checks = [check for test in tests for check in test["alert_rule_test"]]
    firing = {check["alertname"] for check in checks if check["exp_alerts"]}
    quiet = {check["alertname"] for check in checks if not check["exp_alerts"]}
    assert len(alerts) >= 9
    assert firing == alerts and quiet == alerts


# PromQL words that are not metric names: keywords and functions are dropped by the patterns below.
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)  # label matchers, ranges
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    words = [m for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr) if not expr[m.end() :].lstrip().startswith("(")]
    return {m[0] for m in words if m[0] not in PROMQL_WORDS | {"Inf", "NaN"}}


def exported(text: str) -> set[str]:
    """Every sample name /metrics can serve, from its families (those without samples yet included)."""
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""]}
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in suffixes.get(family.type, [""])
    }


async def test_every_dashboard_panel_and_alert_reads_metrics_the_service_exports(api: Api) -> None:
    await api.client.get("/health")  # the HTTP metrics exist once a request went through
    names = exported((await api.client.get("/metrics")).text)
    panels = json.loads(DASHBOARD.read_text())["panels"]
    assert len(panels) >= 8
    for panel in panels:
        used = set().union(*(metric_names(target["expr"]) for target in panel["targets"]))
        assert used and used <= names, (panel["title"], used - names)
    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())
    for rule in (rule for group in rules["groups"] for rule in group["rules"]):
        used = metric_names(rule["expr"])
        assert used and used <= names, (rule["alert"], used - names)
    dashboard_text = DASHBOARD.read_text()
    for name in CONTRACT:
        assert name.removesuffix("_bucket") in dashboard_text, name


def prometheus_config(target: str) -> str:
    return yaml.safe_dump(
        {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "taskq-api", "static_configs": [{"targets": [target]}]}],
        }
    )


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is missing: apt-get install prometheus")
async def test_a_real_prometheus_reads_a_job_counter_back(tmp_path: Path) -> None:
    api_port, prom_port = free_port(), free_port()
    env = env_without_dotenv(settings_env(metrics_settings(port=api_port)))
    client = "metrics-prom-" + uuid.uuid4().hex[:8]
    query = f'sum(jobs_submitted_total{{client_id="{client}"}})'
    with (
        app_process(["api"], env, tmp_path / "api.log") as service,
        running_prometheus(tmp_path, f"127.0.0.1:{api_port}", prom_port),
    ):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=10) as http:
            await wait_for(_answers(http, "/health"), within=30)
            admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
            key = (await http.post("/api/v1/api-keys", json={"client_id": client}, headers=admin)).json()
            headers = {"Authorization": f"Bearer {key['api_key']}"}
            for n in range(2):
                job = {"job_type": "echo", "payload": {"n": n}}
                answer = await http.post("/api/v1/jobs", json=job, headers=headers)
                assert answer.status_code in (201, 202), answer.text
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{prom_port}", timeout=10) as prom:
            seen = await wait_for(_query_equals(prom, query, "2"), within=60, interval=0.5)
        assert seen, service.output()


@contextlib.contextmanager
def running_prometheus(tmp_path: Path, target: str, port: int) -> Iterator[None]:
    """Debian's prometheus scraping `target` every second, with a config and data dir of its own; stopped after."""
    (tmp_path / "prometheus.yml").write_text(prometheus_config(target))
    command = [
        "prometheus",
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with (tmp_path / "prometheus.log").open("wb") as log:
        prometheus = subprocess.Popen(command, stdout=log, stderr=log)
    try:
        yield
    finally:
        prometheus.terminate()
        try:
            prometheus.wait(20)
        except subprocess.TimeoutExpired:
            prometheus.kill()
            prometheus.wait(10)


def _answers(http: httpx.AsyncClient, path: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        try:
            return (await http.get(path)).status_code == 200
        except httpx.TransportError:
            return False

    return check


def _query_equals(prom: httpx.AsyncClient, query: str, expected: str) -> Callable[[], Awaitable[bool]]:
    """Whether Prometheus's instant query API answers `expected` for `query` (it may not be up yet)."""

    async def check() -> bool:
        try:
            answer = await prom.get("/api/v1/query", params={"query": query})
        except httpx.TransportError:
            return False
        if answer.status_code != 200:
            return False
        result = answer.json()["data"]["result"]
        return bool(result) and result[0]["value"][1] == expected

    return check


def _two_free_ports() -> tuple[int, int]:
    """Two free ports side by side: a worker's METRICS_PORT and the next one, where another worker listens."""
    while True:
        port = free_port()
        with contextlib.suppress(OSError), socket.socket() as probe:
            probe.bind(("127.0.0.1", port + 1))
            return port, port + 1


def _worker_ids(samples: Samples, name: str) -> set[str]:
    return {s["worker_id"] for s in labelled(samples, "worker_heartbeat_timestamp") if s["worker_id"].endswith(name)}


@pytest.mark.slow
async def test_several_job_worker_processes_serve_their_metrics_on_one_port_beside_a_webhook_worker(
    tmp_path: Path,
) -> None:
    """`worker jobs --processes 2` answers on METRICS_PORT alone, for both children; a webhook worker on the next
    port serves its own beside it."""
    jobs_port, webhooks_port = _two_free_ports()
    jobs_env = env_without_dotenv(settings_env(metrics_settings(metrics_port=jobs_port)))
    webhooks_env = env_without_dotenv(settings_env(metrics_settings(metrics_port=webhooks_port)))

    def reader(port: int) -> Callable[[], Awaitable[Samples]]:
        async def read() -> Samples:
            async with httpx.AsyncClient(timeout=5) as http:
                try:
                    answer = await http.get(f"http://127.0.0.1:{port}/metrics")
                except httpx.TransportError:
                    return {}
            return parse(answer.text) if answer.status_code == 200 else {}

        return read

    with (
        app_process(["worker", "webhooks"], webhooks_env, tmp_path / "webhooks.log") as webhooks,
        app_process(["worker", "jobs", "--processes", "2"], jobs_env, tmp_path / "jobs.log") as jobs,
    ):
        both = await wait_for(
            scraped_until(reader(jobs_port), lambda now: len(_worker_ids(now, "job_worker")) == 2), within=60
        )
        assert not _worker_ids(both, "webhook_worker")
        hooks = await wait_for(
            scraped_until(reader(webhooks_port), lambda now: bool(_worker_ids(now, "webhook_worker"))), within=60
        )
        assert not _worker_ids(hooks, "job_worker"), jobs.output()
        logs = jobs.output() + webhooks.output()
        assert "cannot serve metrics" not in logs, logs
        assert jobs.terminate() == 0 and webhooks.terminate() == 0, jobs.output()
