"""Processes the bench starts (`python -m app ...`, `python -m bench.<tool> ...`): start, wait, measure, stop.

Every process is registered, so `stop_all()` in the orchestrator's `finally` ends each one by its own pid;
on Linux each child also gets SIGKILL if the bench itself dies (PR_SET_PDEATHSIG).
"""

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.core.parent import die_with_parent
from bench.env import ROOT


def rss_mib(pid: int) -> float | None:
    """Resident memory of a process, from /proc; None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SERVICES = {"postgres": "PostgreSQL", "beam.smp": "RabbitMQ", "redis-server": "Redis"}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _parents() -> dict[int, int]:
    """Every process's parent, by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return found


def process_tree(pid: int) -> list[int]:
    """A process and all its descendants still running (a prefork worker's children, say)."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its running descendants (a child that already exited loses
    its share)."""
    return sum(cpu_seconds(member) for member in process_tree(pid))


def _service_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds of each PostgreSQL, RabbitMQ and Redis process, by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if comm in SERVICES:
            found[int(entry.name)] = (SERVICES[comm], cpu_seconds(int(entry.name)))
    return found


def _machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / CLOCK_TICKS


class CpuMeter:
    """Cores used by some processes (each with its children: an API of several processes), the shared services
    and the whole machine over a stretch of time. A process that exits inside the stretch (a closed PostgreSQL
    connection) loses its share."""

    def __init__(self, procs: dict[str, "Proc"]) -> None:
        self.procs = procs
        self.started = time.monotonic()
        self.mine = {name: tree_cpu_seconds(proc.pid) for name, proc in procs.items()}
        self.services = _service_cpu()
        self.machine = _machine_busy()

    def seconds(self) -> dict[str, float]:
        """CPU seconds each used since the meter started."""
        used = {name: tree_cpu_seconds(proc.pid) - self.mine[name] for name, proc in self.procs.items()}
        for name in SERVICES.values():
            used[name] = 0.0
        for pid, (name, seconds) in _service_cpu().items():
            used[name] += seconds - self.services.get(pid, (name, 0.0))[1]
        used["machine"] = _machine_busy() - self.machine
        return used

    def cores(self, used: dict[str, float] | None = None) -> dict[str, float]:
        """Cores each used since the meter started (`used`: its `seconds()`, read already)."""
        wall = max(time.monotonic() - self.started, 1e-6)
        return {name: seconds / wall for name, seconds in (used or self.seconds()).items()}


def foreign_pytest() -> bool:
    """Whether a pytest run other than the one this bench may run under is on the machine (it competes for
    the two cores and may restart RabbitMQ or Redis): the table's notes say so."""
    mine, pid = set(), os.getpid()
    while pid > 1:  # this process and its ancestors
        mine.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            if b"pytest" in (entry / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


@dataclass
class Proc:
    name: str
    popen: "subprocess.Popen[bytes]"
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def rss_mib(self) -> float | None:
        return rss_mib(self.pid)

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    async def wait(self, within: float) -> int | None:
        """Wait for the process to exit by itself; None when it is still running after `within` seconds."""
        deadline = time.monotonic() + within
        while self.popen.poll() is None:
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.05)
        return self.popen.returncode

    async def stop(self, grace: float = 20) -> int | None:
        """SIGTERM (the service's graceful stop), then SIGKILL after `grace` seconds."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            if await self.wait(grace) is None:
                self.kill()
        return self.popen.returncode

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(10)


@dataclass
class Procs:
    """Every process this bench run started."""

    logs: Path
    started: list[Proc] = field(default_factory=list)
    counter: int = 0

    def start(self, name: str, args: list[str], env: dict[str, str], python: str = sys.executable) -> Proc:
        """Run `python <args>` in the repository root, its output in a log file of its own (`python` may be
        another virtualenv's interpreter)."""
        self.counter += 1
        log = self.logs / f"{self.counter:02d}-{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [python, *args],
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        proc = Proc(name, popen, log)
        self.started.append(proc)
        return proc

    def app(self, name: str, command: list[str], env: dict[str, str], module: str = "app") -> Proc:
        """`python -m app <command>`: the service, as an operator starts it (`module`: a bench launcher of it)."""
        return self.start(name, ["-m", module, *command], env)

    async def run_tool(
        self, name: str, args: list[str], env: dict[str, str], within: float, python: str = sys.executable
    ) -> dict[str, Any]:
        """Run a bench tool to its end and return the one JSON line it printed last."""
        proc = self.start(name, args, env, python)
        code = await proc.wait(within)
        if code is None:
            proc.kill()
            raise RuntimeError(f"{name} did not finish within {within:.0f}s; log tail:\n{proc.tail()}")
        lines = [line for line in proc.tail(200_000).splitlines() if line.startswith("{")]
        if code != 0 or not lines:
            raise RuntimeError(f"{name} exited with {code}; log tail:\n{proc.tail()}")
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    async def stop_all(self) -> None:
        """Stop every process still running, newest first; never raises."""
        for proc in reversed(self.started):
            try:
                await proc.stop(grace=10)
            except Exception:
                proc.kill()


async def until(check: Callable[[], Awaitable[Any]], within: float, what: str, interval: float = 0.1) -> Any:
    """Poll `check` until it returns something truthy, for at most `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not done within {within:.0f}s (last: {value!r})")
        await asyncio.sleep(interval)


async def wait_http_ready(proc: Proc, url: str, within: float = 60) -> None:
    """Poll `url` until it answers 200; fail early, with the log, if the process exits."""
    async with httpx.AsyncClient(timeout=2, trust_env=False) as client:

        async def ready() -> bool:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.tail()}")
            try:
                return (await client.get(url)).status_code == 200
            except httpx.HTTPError:
                return False

        await until(ready, within, f"{proc.name} at {url}", interval=0.1)
