"""`python -m app worker jobs --processes N`: N copies of one worker, so a worker uses more than one core.

Each child is an ordinary worker process (its own connections, consumers and heartbeat); the parent only
starts them, passes SIGTERM/SIGINT on (each child then stops gracefully, rule 9), starts again a child that
died on its own, and exits when all have stopped. On Linux a child also dies with its parent (SIGKILL
included), so killing the parent never leaves orphans consuming.

The parent serves the children's metrics together on METRICS_PORT (prometheus_client's multiprocess mode, their
values shared in a folder, as `api --processes N` does): N children take one port, so a worker of another kind on
the next port runs beside them.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from loguru import logger
from prometheus_client import CollectorRegistry, multiprocess, start_http_server

from app.core.config import Settings, get_settings
from app.core.parent import die_with_parent

RESTART_PAUSE = 1.0
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"


def _spawn(kind: str, env: dict[str, str]) -> "subprocess.Popen[bytes]":
    preexec = die_with_parent if sys.platform.startswith("linux") else None
    return subprocess.Popen([sys.executable, "-m", "app", "worker", kind], preexec_fn=preexec, env=env)


@contextmanager
def shared_metrics(settings: Settings) -> Iterator[dict[str, str]]:
    """The children's environment: their values in one folder (emptied first: old values would be summed in),
    no metrics port of their own; this parent serves them all on METRICS_PORT meanwhile (0: not at all)."""
    chosen = os.environ.get(MULTIPROC_DIR)
    folder = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="taskq-metrics-"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.db"):
        old.unlink()
    server = None
    if settings.metrics_port:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, str(folder))  # type: ignore[no-untyped-call]
        try:
            server, _ = start_http_server(settings.metrics_port, addr=settings.host, registry=registry)
            logger.info("metrics of every child on http://{}:{}/metrics", settings.host, settings.metrics_port)
        except OSError as exc:
            logger.error("cannot serve metrics on {}:{}: {}", settings.host, settings.metrics_port, exc)
    try:
        yield {**os.environ, MULTIPROC_DIR: str(folder), "METRICS_PORT": "0"}
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        if not chosen:
            shutil.rmtree(folder, ignore_errors=True)


def _gone(child: "subprocess.Popen[bytes]", env: dict[str, str]) -> None:
    """A child that exited: its live gauge samples go, its counts stay in the sums."""
    multiprocess.mark_process_dead(child.pid, env[MULTIPROC_DIR])  # type: ignore[no-untyped-call]


def supervise(kind: str, processes: int) -> int:
    """Run `processes` worker children until signalled; return the worst exit status among them."""
    with shared_metrics(get_settings()) as env:
        return _supervise(kind, processes, env)


def _supervise(kind: str, processes: int, env: dict[str, str]) -> int:
    stopping = False

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    children = [_spawn(kind, env) for _ in range(processes)]
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    logger.info("supervising {} {} worker processes: {}", processes, kind, [c.pid for c in children])
    while not stopping:
        for i, child in enumerate(children):
            if child.poll() is not None and not stopping:
                logger.warning("{} worker {} exited with {}; starting another", kind, child.pid, child.returncode)
                _gone(child, env)
                time.sleep(RESTART_PAUSE)
                children[i] = _spawn(kind, env)
        time.sleep(0.2)
    codes = [abs(child.wait()) for child in children]
    for child in children:
        _gone(child, env)
    return max(codes)
