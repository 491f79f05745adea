"""Workers across processes: each process's heartbeat in Redis, the state an operator asked for, and the control
messages that carry a stop or start to every process."""

import json
import time
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from app.core.broker import Broker, Outgoing
from app.core.names import Names
from app.core.statuses import Action, WorkerState

# Every worker name this service can run, so a name no live process reports yet is still known (not a 404).
RUNNABLE = (
    "job_worker",
    "webhook_worker",
    "outbox_relay",
    "overdue_republisher",
    "dlq_janitor",
    "retention",
    "held_release",
    "redrives",
    "metrics_gauges",
)
TTL_BEATS = 3  # a process that misses this many heartbeats has gone


@dataclass(frozen=True)
class Command:
    """One control message: do `action` to the worker `name`, in every process that runs it."""

    name: str
    action: Action

    def encode(self) -> bytes:
        return json.dumps({"name": self.name, "action": str(self.action)}).encode()

    @classmethod
    def decode(cls, body: bytes) -> "Command":
        data = json.loads(body)
        return cls(str(data["name"]), Action(data["action"]))


@dataclass(frozen=True)
class StopRuns:
    """One control message: stop the runs of these jobs, in whichever process runs them (their cancel was asked
    for while they ran). Nothing is kept in Redis for it: each job's request is in the database."""

    jobs: tuple[str, ...]

    def encode(self) -> bytes:
        return json.dumps({"stop_runs": list(self.jobs)}).encode()


def decode(body: bytes) -> Command | StopRuns:
    """A control message as sent (raises KeyError, TypeError or ValueError for anything else)."""
    data = json.loads(body)
    if "stop_runs" in data:
        return StopRuns(tuple(str(job_id) for job_id in data["stop_runs"]))
    return Command.decode(body)


@dataclass(frozen=True)
class WorkerDirectory:
    """The Redis side of the workers API, for one namespace."""

    redis: "Redis"
    names: Names
    heartbeat_seconds: float

    @property
    def ttl_seconds(self) -> float:
        return self.heartbeat_seconds * TTL_BEATS

    async def beat(self, process: str, workers: list[dict[str, Any]]) -> None:
        """Record this process's workers until the TTL passes; processes gone longer are forgotten."""
        now = time.time()
        document = json.dumps({"process": process, "workers": workers})
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(self.names.worker_process_key(process), document, px=round(self.ttl_seconds * 1000))
            pipe.zadd(self.names.worker_processes_key, {process: now})
            pipe.zremrangebyscore(self.names.worker_processes_key, "-inf", now - self.ttl_seconds)
            await pipe.execute()

    async def leave(self, process: str) -> None:
        """A process that stops takes itself out at once, rather than after its TTL."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.delete(self.names.worker_process_key(process))
            pipe.zrem(self.names.worker_processes_key, process)
            await pipe.execute()

    async def workers(self) -> list[dict[str, Any]]:
        """Every worker of every live process, ordered by process, then as each process lists them."""
        since = time.time() - self.ttl_seconds
        processes = await self.redis.zrangebyscore(self.names.worker_processes_key, since, "+inf")
        if not processes:
            return []
        keys = [self.names.worker_process_key(_text(process)) for process in sorted(processes)]
        documents = await self.redis.mget(keys)
        return [worker for document in documents if document for worker in json.loads(document)["workers"]]

    async def desire(self, name: str, action: Action) -> None:
        """Keep what the operator asked, for processes that start later."""
        await self.redis.hset(self.names.worker_desired_key, name, str(action))

    async def stopped(self) -> set[str]:
        """The worker names an operator has stopped."""
        desired = await self.redis.hgetall(self.names.worker_desired_key)
        return {_text(name) for name, action in desired.items() if _text(action) == Action.STOP}


def deployment_state(states: list[str]) -> str:
    """One worker's state across the deployment, from each process's: running when any runs it, stopped when
    every process that has it is stopped (or stopping, or failed), disabled when none has it."""
    present = [state for state in states if state != WorkerState.DISABLED]
    if not present:
        return WorkerState.DISABLED
    return WorkerState.RUNNING if WorkerState.RUNNING in present else WorkerState.STOPPED


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def send_command(broker: Broker, names: Names, command: Command | StopRuns) -> None:
    """Tell every process (raises PublishError when the broker did not take it)."""
    await broker.publish(Outgoing(names.control_exchange, "", command.encode(), mandatory=False))
