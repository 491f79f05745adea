"""`python -m bench.chaos [--jobs N] [--rate R] [--seed S] [--output FILE]` (`make chaos`): the service under
many faults at once, then checked from the database, the broker and the webhook receiver.

It starts a PostgreSQL, a Redis and a RabbitMQ node of its own (tests/local/private_services.py: stopping and
restarting them disturbs nothing else on the machine), then the service as separate processes: the API, two job
workers and a webhook worker. It submits N jobs of mixed types at a steady rate (each with an idempotency key,
sent again until answered), with a webhook endpoint on a local receiver that verifies every signature. While
they run, on a schedule drawn from the seed: 20 SIGKILLs of worker processes and 2 of the API (each started
again at once), a RabbitMQ stop_app/start_app, a Redis restart and a PostgreSQL crash-and-restart. Then it waits
for everything to settle and checks (bench/chaos_checks.py), prints the table and writes it to FILE (default
docs/reliability-run.md). Exits 0 when nothing was lost, duplicated, missing or badly signed, 1 otherwise.
"""

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.chaos_checks import Findings, check_run
from bench.env import ROOT
from bench.procs import Proc, Procs, wait_http_ready
from tests.local.ports import free_port
from tests.local.private_services import PrivateServices, private_services

NAMESPACE = "chaos"
WORKER_KILLS, API_KILLS = 20, 2
RESTART_PAUSE = 0.5  # seconds between a SIGKILL and the start of the process that replaces it
SETTLE_WITHIN = 600.0
SUBMIT_WITHIN = 180.0
SUBMIT_CONNECTIONS = 64
EVENTS = ["job.succeeded", "job.dead_lettered"]
MAX_RETRIES = 8  # room for the runs a SIGKILL costs a job, on top of the failures a flaky job asks for

# How the jobs are mixed: (share, job type, payload, the status it must end in).
MIX: list[tuple[int, str, dict[str, Any], str]] = [
    (35, "echo", {"n": 1}, "succeeded"),
    (15, "sleep", {"seconds": 0.2}, "succeeded"),
    (15, "flaky", {"fail_times": 2}, "succeeded"),
    (10, "flaky", {"fail_times": 1, "permanent": True}, "dead_lettered"),
    (10, "document", {"title": "Chaos", "content": [{"type": "paragraph", "text": "Still here."}]}, "succeeded"),
    (15, "notification", {}, "succeeded"),  # posts to the receiver; its payload is made per job
]


@dataclass
class Submitted:
    key: str  # the idempotency key, also the job's marker in a notification's body
    job_type: str
    expected: str
    payload: dict[str, Any] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)  # the job ids the API answered with (one, or a duplicate)

    def expected_after(self, runs: int) -> str:
        """What the payload asks for once the job has had `runs` runs.

        A flaky job fails its first `fail_times` runs and a run that a SIGKILL cut short counts as one, so a
        permanent failure asked of run 1 turns into a success when run 1 never got to record it. A transient
        flaky job has no final status before its failures are spent.
        """
        if self.job_type != "flaky":
            return self.expected
        if runs > self.payload["fail_times"]:
            return "succeeded"
        return "dead_lettered" if self.payload.get("permanent") else "retrying"


@dataclass
class Fault:
    at: float  # seconds after the submissions began
    kind: str  # kill, rabbitmq, redis, postgres
    target: str = ""


def fault_schedule(seed: int, window: float, workers: list[str]) -> list[Fault]:
    draw = random.Random(seed)
    faults = [Fault(draw.uniform(0.05, 0.95) * window, "kill", draw.choice(workers)) for _ in range(WORKER_KILLS)]
    faults += [Fault(draw.uniform(0.1, 0.9) * window, "kill", "api") for _ in range(API_KILLS)]
    faults += [Fault(draw.uniform(0.15, 0.85) * window, kind) for kind in ("rabbitmq", "redis", "postgres")]
    return sorted(faults, key=lambda fault: fault.at)


def say(text: str) -> None:
    print(f"chaos: {text}", file=sys.stderr, flush=True)


class Service:
    """The service's processes by role; a killed one is started again under the same role."""

    ROLES = {
        "api": ["api"],
        "jobs-1": ["worker", "jobs"],
        "jobs-2": ["worker", "jobs"],
        "webhooks": ["worker", "webhooks"],
    }

    def __init__(self, procs: Procs, env: dict[str, str], port: int) -> None:
        self.procs, self.env, self.port = procs, env, port
        self.running: dict[str, Proc] = {}
        self.kills: Counter[str] = Counter()

    def start(self, role: str) -> None:
        self.running[role] = self.procs.app(role, self.ROLES[role], self.env)

    async def kill_and_restart(self, role: str) -> None:
        await asyncio.to_thread(self.running[role].kill)
        self.kills["api" if role == "api" else "worker"] += 1
        await asyncio.sleep(RESTART_PAUSE)
        self.start(role)

    def workers(self) -> list[str]:
        return [role for role in self.ROLES if role != "api"]

    def describe(self, role: str) -> str:
        """What a failed run needs to know of a role's process: alive or its exit status, and its last log lines."""
        proc = self.running[role]
        state = "running" if proc.alive() else f"exited with status {proc.popen.returncode}"
        lines = proc.tail(4000).splitlines()[-15:]
        text = f"the {role} process (pid {proc.pid}, log {proc.log}) is {state}; its last log lines:\n" + "\n".join(
            f"    {line[:300]}" for line in lines
        )
        return text + (f"\nwhat its threads were doing:\n{stacks(proc.pid)}" if proc.alive() else "")


@dataclass
class LoopLag:
    """How late this process's own event loop ran a timer: a run that fails must tell a slow service from a
    submitter too busy to send (a late loop times out its own connects)."""

    worst: float = 0.0
    task: "asyncio.Task[None] | None" = None

    @classmethod
    def start(cls) -> "LoopLag":
        lag = cls()
        lag.task = asyncio.create_task(lag._watch())
        return lag

    async def _watch(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.5)
            self.worst = max(self.worst, time.monotonic() - before - 0.5)

    def said(self) -> str:
        return f"the submitter's own event loop ran up to {self.worst:.2f} s late"

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()


def stacks(pid: int) -> str:
    """Every thread's Python stack in a running process (py-spy, from the dev requirements), for a stuck one."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    try:
        done = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"    (py-spy could not say: {exc})"
    return "\n".join(f"    {line}" for line in (done.stdout or done.stderr).splitlines())


async def listening(port: int, within: float = 3.0) -> str:
    """Whether a TCP connection to the port opens now: refused, timed out or open (and then /health's answer)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), within)
    except TimeoutError:
        return f"a TCP connect to port {port} timed out after {within:.0f} s (listening, not accepting)"
    except OSError as exc:
        return f"a TCP connect to port {port} failed: {exc}"
    writer.close()
    try:
        ss = await asyncio.create_subprocess_exec("ss", "-ltnH", f"sport = :{port}", stdout=asyncio.subprocess.PIPE)
        backlog = (await ss.communicate())[0].decode().split()  # state, accept queue, backlog, ...
    except OSError:  # no iproute2 here
        backlog = []
    queued = f" (accept queue {backlog[1]} of {backlog[2]})" if len(backlog) > 2 else ""
    try:
        async with httpx.AsyncClient(timeout=within, trust_env=False) as http:
            answer = await http.get(f"http://127.0.0.1:{port}/health")
        return f"port {port} accepts connections{queued}; /health answered {answer.status_code}"
    except httpx.HTTPError as exc:
        return f"port {port} accepts connections{queued}; /health did not answer: {type(exc).__name__}"


def settings_env(services: PrivateServices, port: int, admin_key: str) -> dict[str, str]:
    settings = {
        "DATABASE_URL": services.postgres.url,
        "RABBITMQ_URL": services.rabbit.url,
        "REDIS_URL": services.redis.url,
        "NAMESPACE": NAMESPACE,
        "PORT": str(port),
        "ADMIN_API_KEY": admin_key,
        "SECRET_ENCRYPTION_KEY": "chaos-" + uuid.uuid4().hex,
        "EMBEDDED_WORKERS": "false",
        "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",  # the receiver listens on 127.0.0.1
        "RATE_LIMIT_PER_MINUTE": "1000000",
        "BREAKER_MIN_CALLS": "1000000",  # flaky jobs fail on purpose: their circuit must not refuse the next ones
        "LOG_LEVEL": "WARNING",
        "METRICS_PORT": "0",
        "RETRY_BASE_DELAY": "0.2",
        "RETRY_MAX_DELAY": "2",
        "LOCK_TTL_SECONDS": "3",
        "PUBLISH_TIMEOUT_SECONDS": "2",
        "OUTBOX_RELAY_AFTER": "1",
        "OUTBOX_RELAY_INTERVAL": "0.5",
        "DLQ_JANITOR_INTERVAL_SECONDS": "2",  # a dead job's second message copy is gone soon after the run settles
        "BACKGROUND_BACKOFF_BASE_SECONDS": "1",
        "BACKGROUND_BACKOFF_MAX_SECONDS": "4",
        "WEBHOOK_RETRY_SCHEDULE": "0.5,1,2,4,8,15,30",
        "WEBHOOK_TIMEOUT_SECONDS": "5",
        "WEBHOOK_BREAKER_COOLDOWN_SECONDS": "1",
        "SHUTDOWN_GRACE_SECONDS": "5",
        "JOB_CONSUMERS_DEFAULT": "8",
    }
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return {**keep, **settings, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


# -- the client side ----------------------------------------------------------------------------------------
async def _post(http: httpx.AsyncClient, path: str, body: Any, headers: dict[str, str]) -> Any:
    answer = await http.post(path, json=body, headers=headers)
    return answer.json() if 200 <= answer.status_code < 300 else None


def job_body(index: int, draw: random.Random, receiver: str, secret: str) -> tuple[dict[str, Any], str, str]:
    """The body of submit number `index`, its idempotency key and the status it must end in."""
    shares = [share for share, *_ in MIX]
    _, job_type, payload, expected = draw.choices(MIX, weights=shares)[0]
    key = f"chaos-{index}-{uuid.uuid4().hex[:8]}"
    if job_type == "notification":
        event = {"type": "chaos.notification", "data": {"job": {"id": key}}}
        payload = {"url": receiver, "body": event, "secret": secret, "timeout": 5}
    return {"job_type": job_type, "payload": payload, "max_retries": MAX_RETRIES}, key, expected


async def submit_all(
    base: str, key: str, count: int, rate: float, receiver: str, secret: str, seed: int
) -> list[Submitted]:
    """Submit `count` jobs at `rate` per second; each is sent again with its idempotency key until answered."""
    draw = random.Random(seed + 1)
    bodies = [job_body(i, draw, receiver, secret) for i in range(count)]
    submitted = [Submitted(k, body["job_type"], expected, body["payload"]) for body, k, expected in bodies]
    limits = httpx.Limits(max_connections=SUBMIT_CONNECTIONS, max_keepalive_connections=SUBMIT_CONNECTIONS // 2)
    began = time.monotonic()
    # A submit waits for a free connection in front of the client, as long as it takes: httpx's own pool wait
    # costs time in the number of waiters, and with a thousand submits waiting (the service down, the machine
    # slow) it starved this process's event loop, so connects timed out in here while the API was fine.
    in_flight = asyncio.Semaphore(SUBMIT_CONNECTIONS)
    async with httpx.AsyncClient(base_url=base, timeout=10, limits=limits, trust_env=False) as http:

        async def one(i: int) -> None:
            await asyncio.sleep(max(0.0, began + i / rate - time.monotonic()))
            body, idempotency_key, _ = bodies[i]
            headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": idempotency_key}
            job = await _submit_one(http, in_flight, body, headers, SUBMIT_WITHIN)
            submitted[i].ids.add(str(job["id"]))

        await asyncio.gather(*(one(i) for i in range(count)))
    return submitted


async def _submit_one(
    http: httpx.AsyncClient, in_flight: asyncio.Semaphore, body: Any, headers: dict[str, str], within: float
) -> Any:
    """POST one job until it is answered 2xx (the same idempotency key each time): the service may be down."""
    deadline, last = time.monotonic() + within, ""
    while time.monotonic() < deadline:
        try:
            async with in_flight:
                answer = await http.post("/api/v1/jobs", json=body, headers=headers)
            if 200 <= answer.status_code < 300:
                return answer.json()
            last = f"HTTP {answer.status_code}: {answer.text[:200]}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        await asyncio.sleep(0.25)
    raise RuntimeError(f"a submit was not accepted within {within:.0f} s; the last answer: {last}")


# -- the run --------------------------------------------------------------------------------------------------
async def inject(service: Service, services: PrivateServices, faults: list[Fault], began: float) -> float:
    """Apply the faults in order, each when its time comes (later, while an earlier one is still being
    restored); return when the last one was restored (monotonic)."""
    for fault in faults:
        await asyncio.sleep(max(0.0, began + fault.at - time.monotonic()))
        say(f"t={time.monotonic() - began:5.1f}s {fault.kind} {fault.target}".rstrip())
        if fault.kind == "kill":
            await service.kill_and_restart(fault.target)
        elif fault.kind == "rabbitmq":
            await asyncio.to_thread(services.rabbit.stop_app)
            await asyncio.sleep(3)
            await asyncio.to_thread(services.rabbit.start_app)
        elif fault.kind == "redis":
            await asyncio.to_thread(services.redis.restart)
        elif fault.kind == "postgres":
            await asyncio.to_thread(services.postgres.crash_and_start)
    return time.monotonic()


async def run(args: argparse.Namespace, work: Path) -> tuple[Findings, dict[str, Any]]:
    procs = Procs(work)
    with private_services(work / "services") as services:
        port, receiver_port, admin = free_port(), free_port(), "tq_chaos_" + uuid.uuid4().hex
        env = settings_env(services, port, admin)
        migrate = procs.start("migrate", ["-m", "app", "migrate"], env)
        if await migrate.wait(120) != 0:
            raise RuntimeError(f"the migration failed:\n{migrate.tail()}")
        service = Service(procs, env, port)
        base = f"http://127.0.0.1:{port}"
        try:
            service.start("api")
            async with httpx.AsyncClient(base_url=base, timeout=10, trust_env=False) as http:
                await wait_http_ready(service.running["api"], f"{base}/health", within=120)
                admin_headers = {"Authorization": f"Bearer {admin}"}
                created = await _post(http, "/api/v1/api-keys", {"client_id": "chaos"}, admin_headers)
                key = created["api_key"]
                hook: dict[str, Any] = {"url": f"http://127.0.0.1:{receiver_port}/hook", "events": EVENTS}
                endpoint = await _post(http, "/api/v1/webhooks", hook, {"Authorization": f"Bearer {key}"})
            receiver_env = {**env, "BENCH_WEBHOOK_SECRET": endpoint["secret"]}
            procs.start("receiver", ["-m", "bench.receiver", "--port", str(receiver_port)], receiver_env)
            for role in service.workers():
                service.start(role)
            await asyncio.sleep(3)  # the workers attach their consumers
            window = args.jobs / args.rate
            faults = fault_schedule(args.seed, window, service.workers())
            began = time.monotonic()
            submitting = asyncio.create_task(
                submit_all(base, key, args.jobs, args.rate, hook["url"], endpoint["secret"], args.seed)
            )
            lag = LoopLag.start()
            restored = await inject(service, services, faults, began)
            try:
                submitted = await submitting
            except RuntimeError as exc:
                at = time.monotonic() - began
                probe = await asyncio.to_thread(asyncio.run, listening(port))  # a loop of its own
                raise RuntimeError(f"{exc} (t={at:.0f} s)\n{probe}\n{lag.said()}\n{service.describe('api')}") from None
            finally:
                lag.stop()
            say(f"submitted {args.jobs} jobs in {time.monotonic() - began:.0f} s; waiting for them to settle")
            findings = await check_run(
                services, NAMESPACE, submitted, f"http://127.0.0.1:{receiver_port}", restored, SETTLE_WITHIN, say
            )
        finally:
            await procs.stop_all()
    faults_by_kind = Counter(f.kind if f.kind != "kill" else f"SIGKILL {_role_kind(f.target)}" for f in faults)
    context = {"jobs": args.jobs, "rate": args.rate, "seed": args.seed, "faults": dict(faults_by_kind)}
    return findings, context


def _role_kind(role: str) -> str:
    return "API" if role == "api" else "worker"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=40.0, help="jobs submitted per second")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "reliability-run.md")
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs (their folder is printed)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="taskq-chaos-"))
    work.chmod(0o755)  # the private PostgreSQL runs as the postgres user
    say(f"logs and services in {work}")
    try:
        findings, context = asyncio.run(run(args, work))
    finally:
        if not args.keep_logs:
            shutil.rmtree(work, ignore_errors=True)
    text = findings.document(context)
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    say(f"written to {args.output}; {json.dumps(findings.headline())}")
    return 0 if findings.passed() else 1


if __name__ == "__main__":
    sys.exit(main())
