"""A pool of long-lived processes for CPU-bound handlers (PDF, images), so a big job never stalls the event loop
that acks messages and renews leases. A run that is cancelled (its job timed out) has its process killed and
replaced: never abandoned to finish in the background (rule 8)."""

import asyncio
import multiprocessing
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from loguru import logger

from app.core import cpu_reports
from app.handlers.base import ProgressSink

T = TypeVar("T")
_SPAWN = multiprocessing.get_context("spawn")  # no inherited event loop, threads or sockets


def _serve(conn: Connection) -> None:
    """The child's loop: run each function it is sent, send back its reports as it makes them (cpu_reports), then
    (ok, value)."""
    cpu_reports.attach(conn.send)
    while True:
        try:
            fn, args = conn.recv()
        except EOFError:
            return
        try:
            conn.send((True, fn(*args)))
        except BaseException as exc:  # the parent re-raises it; the child lives on
            conn.send((False, exc))


@dataclass
class _Slot:
    process: BaseProcess
    conn: Connection

    @classmethod
    def start(cls) -> "_Slot":
        parent, child = _SPAWN.Pipe()
        process = _SPAWN.Process(target=_serve, args=(child,), daemon=True, name="cpu-pool")
        process.start()
        child.close()
        return cls(process, parent)

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.conn.close()


class CpuPool:
    def __init__(self, size: int) -> None:
        self._size = size
        self._free: asyncio.Queue[_Slot] | None = None

    def _slots(self) -> asyncio.Queue[_Slot]:
        if self._free is None:  # started on first use: a worker with no CPU-bound jobs spawns nothing
            self._free = asyncio.Queue()
            for _ in range(self._size):
                self._free.put_nowait(_Slot.start())
        return self._free

    async def run(self, fn: Callable[..., T], *args: Any, progress: ProgressSink | None = None) -> T:
        """Run `fn(*args)` in a pool process; its exception is raised here, its reports go to `progress`."""
        free = self._slots()
        slot = await free.get()
        try:
            ok, value = await self._exchange(slot, fn, args, progress)
        except BaseException:
            logger.warning("killing a CPU pool process whose job was cancelled or timed out")
            slot.kill()
            slot = _Slot.start()
            raise
        finally:
            free.put_nowait(slot)
        if not ok:
            raise value
        result: T = value
        return result

    async def _exchange(
        self, slot: _Slot, fn: Callable[..., Any], args: tuple[Any, ...], progress: ProgressSink | None
    ) -> tuple[bool, Any]:
        await asyncio.to_thread(slot.conn.send, (fn, args))  # a large payload may fill the pipe
        while True:
            item = await self._receive(slot)
            if not cpu_reports.is_report(item):
                result: tuple[bool, Any] = item
                return result
            if progress is not None:
                progress(item[1], item[2])

    async def _receive(self, slot: _Slot) -> Any:
        """The next thing the process sends: a report, or the outcome."""
        if not slot.conn.poll():
            loop = asyncio.get_running_loop()
            ready = asyncio.Event()
            loop.add_reader(slot.conn.fileno(), ready.set)
            try:
                await ready.wait()
            finally:
                loop.remove_reader(slot.conn.fileno())
        if not slot.process.is_alive() and not slot.conn.poll():
            raise RuntimeError("a CPU pool process died")
        return await asyncio.to_thread(slot.conn.recv)

    def close(self) -> None:
        if self._free is None:
            return
        while not self._free.empty():
            self._free.get_nowait().kill()
        self._free = None  # a later run starts fresh processes
