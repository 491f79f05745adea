"""Drain the same N no-op tasks with Celery and with Dramatiq, on the same RabbitMQ, and time them.

For each peer: its queues and Redis keys are removed, N tasks are sent by the peer's own client while no
worker runs (and the bench waits until the queue holds all N), then its worker starts. The drain is from the
earliest task start to the latest task finish, both recorded in Redis by the tasks (bench/peers/tasks.py); the
bench polls the Redis count to know when the N-th task finished. The worker's CPU is the sum over its process
tree (master and children, from /proc) between the first recorded task and the N-th, divided by the tasks
finished in between. Queues, exchanges and keys are removed afterwards, also after an error.
"""

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench import costs
from bench.costs import Cost
from bench.env import RABBITMQ_URL, REDIS_URL
from bench.harness import Harness
from bench.peers import venv
from bench.procs import Proc, process_tree, until
from bench.sizes import drain_budget

KEYS = ("first", "last", "done")  # the Redis keys each task updates (bench/peers/tasks.py), after the prefix


@dataclass(frozen=True)
class Peer:
    system: str  # the module's name: celery | dramatiq
    label: str
    how: str  # how its worker runs, for the notes

    def worker_args(self, queue: str) -> list[str]:
        if self.system == "celery":
            common = ["-A", "bench.peers.celery_app", "worker", "--pool", "prefork", "-c", str(os.cpu_count() or 1)]
            quiet = ["--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "WARNING"]
            return ["-m", "celery", *common, "-Q", queue, *quiet]
        return ["-m", "dramatiq", "bench.peers.dramatiq_app", "-p", "2", "-t", "8", "-Q", queue]

    def queues(self, queue: str) -> list[str]:
        return [queue] if self.system == "celery" else [queue, f"{queue}.DQ", f"{queue}.XQ"]

    def exchanges(self, queue: str) -> list[str]:
        return [queue] if self.system == "celery" else []


PEERS = (
    Peer("celery", "Celery", f"prefork -c {os.cpu_count()}, acks late, prefetch multiplier 1, no result backend"),
    Peer("dramatiq", "Dramatiq", "RabbitMQ broker, -p 2 -t 8, default middleware and prefetch"),
)


@dataclass(frozen=True)
class PeerResult:
    label: str
    tasks: int
    per_s: float
    cpu_ms: float | None  # worker process tree CPU per task
    cores: float  # the tree's cores during the drain
    cost: Cost | None = None  # per task, by service (bench/costs.py)


@dataclass
class Run:
    """One peer's drain: where its tasks go and record themselves."""

    h: Harness
    peer: Peer
    python: Path
    queue: str
    keys: str
    redis: Redis

    def env(self) -> dict[str, str]:
        names = {"QUEUE": self.queue, "KEYS": self.keys, "AMQP": RABBITMQ_URL, "REDIS": REDIS_URL}
        return {**self.h.env.process_env(), **{f"BENCH_PEER_{k}": v for k, v in names.items()}}

    async def done(self) -> int:
        return int(await self.redis.get(f"{self.keys}:done") or 0)

    async def forget(self) -> None:
        await self.redis.delete(*(f"{self.keys}:{key}" for key in KEYS))
        channel = await self.h.broker.channel()
        for queue in self.peer.queues(self.queue):
            await channel.queue_delete(queue)
        for exchange in self.peer.exchanges(self.queue):
            await channel.exchange_delete(exchange)


async def drain_all(h: Harness, count: int, say: Any) -> list[PeerResult]:
    """Each peer's drain of `count` tasks, after making sure the peers' virtualenv is there."""
    python = await asyncio.to_thread(venv.ensure, say)
    return [await drain(h, peer, python, count) for peer in PEERS]


async def drain(h: Harness, peer: Peer, python: Path, count: int) -> PeerResult:
    queue = f"{h.env.namespace}.peers.{peer.system}"
    h.env.extra_queues.update(peer.queues(queue))
    h.env.extra_exchanges.update(peer.exchanges(queue))
    run = Run(h, peer, python, queue, f"{h.env.namespace}:peers:{peer.system}", Redis.from_url(REDIS_URL))
    try:
        await run.forget()
        await _enqueue(run, count)
        window = costs.Window(None)  # a peer has no database
        await window.open()
        worker = h.procs.start(f"peer-{peer.system}", peer.worker_args(queue), run.env(), python=str(python))
        try:
            result, used, counted = await _measure(run, worker, count)
        finally:
            await _stop(worker)
        return replace(result, cost=await window.close(result.tasks, used, counted))
    finally:
        try:
            await run.forget()
        finally:
            await run.redis.aclose()


async def _enqueue(run: Run, count: int) -> None:
    args = ["-m", "bench.peers.enqueue", run.peer.system, str(count)]
    name = f"peer-enqueue-{run.peer.system}"
    await run.h.procs.run_tool(name, args, run.env(), within=max(120.0, count / 50), python=str(run.python))

    async def all_queued() -> bool:
        return (await run.h.broker.depth_and_consumers(run.queue))[0] >= count

    await until(all_queued, 60, f"{count} {run.peer.label} tasks in {run.queue}", interval=0.1)


async def _measure(run: Run, worker: Proc, count: int) -> tuple[PeerResult, dict[str, float], int]:
    """The drain's result, the CPU seconds of the worker and the services while it was metered, and the tasks
    run meanwhile."""

    async def started() -> int:
        if not worker.alive():
            raise RuntimeError(f"{worker.name} exited with {worker.popen.returncode}:\n{worker.tail()}")
        return await run.done()

    await until(started, 120, f"{run.peer.label}'s first task", interval=0.02)
    before, used, at = await run.done(), dict[str, float](), time.monotonic()

    async def finished() -> bool:
        return await started() >= count

    async with run.h.metered(f"the {run.peer.label} drain", {"worker": worker}, used):
        await until(finished, drain_budget(count), f"{run.peer.label} drain of {count} tasks", interval=0.05)
        wall = max(time.monotonic() - at, 1e-6)
    cpu = used["worker"]
    first, last, done = [float(value or 0) for value in await run.redis.mget(*(f"{run.keys}:{key}" for key in KEYS))]
    elapsed, counted = last - first, int(done) - before
    result = PeerResult(
        run.peer.label,
        int(done),
        done / elapsed if elapsed > 0 else 0.0,
        cpu * 1000 / counted if counted > 0 else None,
        cpu / wall,
    )
    return result, used, counted


def _started_at(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


async def _stop(worker: Proc) -> None:
    """SIGTERM to the worker (its own graceful stop), then SIGKILL to any of its processes still running."""
    tree = {pid: _started_at(pid) for pid in process_tree(worker.pid)}
    await worker.stop(grace=20)
    for pid, started in tree.items():
        if started is not None and _started_at(pid) == started:  # the same process, not a reused pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
