"""What every scenario uses: start the service's processes and the bench's tools, wait for them, and talk to
the service as a user does (admin key -> client key -> submit over HTTP)."""

import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aio_pika
import httpx

from app.core.names import Lane
from app.core.topology import declare
from bench.env import RABBITMQ_URL, BenchEnv
from bench.infra import Broker, Db
from bench.procs import CpuMeter, Proc, Procs, until, wait_http_ready
from bench.profile import Profiler
from bench.sizes import Sizes
from tests.local.ports import free_port

CLIENT_ID = "bench"


@dataclass
class Server:
    proc: Proc
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def jobs_url(self) -> str:
        return f"{self.base}/api/v1/jobs"


@dataclass
class Harness:
    env: BenchEnv
    procs: Procs
    work: Path
    db: Db
    broker: Broker
    profiler: Profiler | None = None
    scenario_settings: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @classmethod
    async def open(cls, env: BenchEnv, procs: Procs, work: Path, profiler: Profiler | None) -> "Harness":
        """Connect, and declare the namespace's topology once so a scenario may publish before any API runs."""
        connection = await aio_pika.connect(RABBITMQ_URL)
        async with connection:
            await declare(await connection.channel(), env.settings_topology())
        return cls(env, procs, work, await Db.open(env.dsn), await Broker.open(RABBITMQ_URL), profiler)

    @contextlib.asynccontextmanager
    async def on_queues(self, queue_type: str) -> AsyncIterator["Harness"]:
        """This harness on the same database with `queue_type` queues: their namespace is declared for the block
        and removed after it (the database is the bench's and stays)."""
        if queue_type == self.env.queue_type:
            yield self
            return
        env = dataclasses.replace(self.env, queue_type=queue_type, created=False)
        try:
            connection = await aio_pika.connect(RABBITMQ_URL)
            async with connection:
                await declare(await connection.channel(), env.settings_topology())
            yield dataclasses.replace(self, env=env)
        finally:
            await env.cleanup()

    async def close(self) -> None:
        await self.broker.close()
        await self.db.close()

    def record_settings(self, scenario: str, **overrides: Any) -> None:
        shown = {k.upper(): str(v).lower() if isinstance(v, bool) else str(v) for k, v in overrides.items()}
        self.scenario_settings.setdefault(scenario, {}).update(shown)

    # -- processes ----------------------------------------------------------------------------------------
    async def start_api(self, name: str = "api", processes: int = 1, module: str = "app", **overrides: Any) -> Server:
        """`python -m app api`, as `processes` processes behind one port (`module`: a bench launcher of it)."""
        port = free_port()
        args = ["api", "--processes", str(processes)] if processes > 1 else ["api"]
        proc = self.procs.app(name, args, self.env.process_env(port=port, **overrides), module)
        await wait_http_ready(proc, f"http://127.0.0.1:{port}/ready")
        return Server(proc, port)

    async def start_baseline_api(self) -> Server:
        port = free_port()
        proc = self.procs.start("baseline-api", ["-m", "bench.baseline_api"], self.env.process_env(port=port))
        await wait_http_ready(proc, f"http://127.0.0.1:{port}/health")
        return Server(proc, port)

    async def start_job_worker(
        self,
        consumers: int,
        name: str = "job-worker",
        module: str = "app",
        extra_env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Proc:
        """One `python -m app worker jobs` consuming only the default lane, with `consumers` consumers (`overrides`:
        settings; `extra_env`: variables that are not, such as OpenTelemetry's)."""
        lanes = default_lane_only(consumers)
        env = self.env.process_env(**lanes, **overrides) | dict(extra_env or {})
        proc = self.procs.app(name, ["worker", "jobs"], env, module)
        names = self.env.settings_topology().names
        await self.wait_consumers(proc, {names.lane_queue(Lane.DEFAULT): consumers})
        return proc

    async def start_job_workers(self, processes: int, consumers: int, name: str = "job-worker") -> list[Proc]:
        """`processes` job workers like `start_job_worker`'s, all started before any is waited for."""
        lanes = default_lane_only(consumers)
        env = self.env.process_env(**lanes)
        procs = [self.procs.app(f"{name}-{i + 1}", ["worker", "jobs"], env) for i in range(processes)]
        lane = self.env.settings_topology().names.lane_queue(Lane.DEFAULT)
        for proc in procs:  # any that exited says so; the count is the sum of theirs
            await self.wait_consumers(proc, {lane: consumers * processes})
        return procs

    async def start_webhook_worker(self, **overrides: Any) -> Proc:
        settings = self.env.settings(**overrides)
        proc = self.procs.app("webhook-worker", ["worker", "webhooks"], self.env.process_env(**overrides))
        names = self.env.settings_topology().names
        await self.wait_consumers(
            proc,
            {
                names.webhook_events_queue: settings.webhook_fanout_consumers,
                names.webhook_deliver_queue: settings.webhook_consumers,
            },
        )
        return proc

    async def wait_consumers(self, proc: Proc, wanted: dict[str, int], within: float = 60) -> None:
        async def attached() -> bool:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.tail()}")
            for queue, count in wanted.items():
                if (await self.broker.depth_and_consumers(queue))[1] < count:
                    return False
            return True

        await until(attached, within, f"{proc.name} consumers", interval=0.1)

    async def tool(self, name: str, module: str, args: list[str], within: float, **env: str) -> dict[str, Any]:
        """Run `python -m <module> <args>` to its end (at most `within` seconds); its JSON result."""
        return await self.procs.run_tool(name, ["-m", module, *args], {**self.env.process_env(), **env}, within)

    async def loadgen(
        self,
        url: str,
        key: str,
        *,
        concurrency: int,
        requests: int,
        warmup: int = 0,
        rate: float = 0.0,
        batch: int = 0,
        ids_out: Path | None = None,
        max_seconds: float = 900,
        name: str = "loadgen",
    ) -> dict[str, Any]:
        """The load generator, as its own process; its JSON result."""
        args = ["--url", url, "--key", key, "--concurrency", str(concurrency), "--requests", str(requests)]
        args += ["--warmup", str(warmup), "--max-seconds", str(max_seconds)]
        if rate:
            args += ["--rate", str(rate)]
        if batch:
            args += ["--batch", str(batch)]
        if ids_out is not None:
            args += ["--ids-out", str(ids_out)]
        return await self.tool(name, "bench.loadgen", args, within=max_seconds + 60)

    async def ingest_once(
        self, clients: int, sizes: Sizes, name: str, label: str, module: str = "app", processes: int = 1
    ) -> tuple[float, dict[str, float], dict[str, Any]]:
        """A fresh API (`processes` processes, run by `module`) loaded by `clients` closed-loop clients over the
        empty tables: its jobs/s, the cores each part used, and the load generator's result."""
        await self.env.reset()
        # fair turns off: with no worker they would hold all but a share of the jobs (bench/ingest.py says why)
        api = await self.start_api(name=f"api-{name}", processes=processes, module=module, fair_share=0)
        key = await self.client_key(api)
        async with self.metered(label, {"API": api.proc}) as cores:
            result = await self.loadgen(
                api.jobs_url,
                key,
                concurrency=clients,
                requests=sizes.ingest_requests,
                warmup=sizes.ingest_warmup,
                name=f"loadgen-{name}",
            )
        await api.proc.stop()
        return float(result["per_s"] or 0), cores, result

    @contextlib.asynccontextmanager
    async def profiled(self, name: str, proc: Proc) -> AsyncIterator[None]:
        """Profile `proc` with py-spy for the block, when the bench was asked to (--profile)."""
        if self.profiler is None:
            yield
            return
        async with self.profiler.record(name, proc.pid):
            yield

    @contextlib.asynccontextmanager
    async def metered(
        self, label: str, procs: dict[str, Proc], seconds: dict[str, float] | None = None
    ) -> AsyncIterator[dict[str, float]]:
        """Note how many cores each process, the shared services and the machine used during the block; the
        yielded dict holds the same figures afterwards, and `seconds`, when given, the CPU seconds of each."""
        meter = CpuMeter(procs)
        cores: dict[str, float] = {}
        yield cores
        used = meter.seconds()
        cores.update(meter.cores(used))
        if seconds is not None:
            seconds.update(used)
        used = ", ".join(f"{name} {value:.2f}" for name, value in cores.items())
        self.notes.append(f"CPU in cores (of {os.cpu_count()}) during {label}: {used}.")

    # -- the service, as a user ---------------------------------------------------------------------------
    async def call(self, api: Server, method: str, path: str, key: str, body: Any = None) -> Any:
        async with httpx.AsyncClient(base_url=api.base, timeout=30, trust_env=False) as client:
            answer = await client.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})
        if answer.status_code >= 300:
            raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:300]}")
        return answer.json() if answer.content else None

    async def client_key(self, api: Server) -> str:
        """A client key made with the admin key, as an operator would for a real client."""
        created = await self.call(api, "POST", "/api/v1/api-keys", self.env.admin_key, {"client_id": CLIENT_ID})
        return str(created["api_key"])

    async def wait_succeeded(self, count: int, within: float, what: str, client_id: str | None = None) -> None:
        """Until `count` jobs succeeded (of one client, when others' jobs succeed beside them)."""

        async def done() -> bool:
            return await self.db.succeeded(client_id) >= count

        await until(done, within, what, interval=0.2)


def default_lane_only(consumers: int) -> dict[str, int]:
    """Job-worker settings that consume the default lane alone, with `consumers` consumers."""
    return {"job_consumers_default": consumers, "job_consumers_critical": 0, "job_consumers_bulk": 0}


def read_ids(path: Path) -> dict[str, float]:
    """`<job id> <send time>` lines from the load generator."""
    sent = {}
    if path.exists():
        for line in path.read_text().splitlines():
            job_id, _, at = line.partition(" ")
            sent[job_id] = float(at)
    return sent


async def records(receiver: Server) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
        answer = await client.get(f"{receiver.base}/records")
    result: dict[str, Any] = answer.json()
    return result


async def reset_receiver(receiver: Server) -> None:
    async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
        await client.post(f"{receiver.base}/reset")
