"""`python -m app worker jobs --processes N`: N copies of one worker, so a worker uses more than one core.

Each child is an ordinary worker process (its own connections, consumers and heartbeat); the parent only
starts them, passes SIGTERM/SIGINT on (each child then stops gracefully, rule 9), starts again a child that
died on its own, and exits when all have stopped. On Linux a child also dies with its parent (SIGKILL
included), so killing the parent never leaves orphans consuming.
"""

import os
import signal
import subprocess
import sys
import time
from types import FrameType

from loguru import logger

from app.core.config import get_settings
from app.core.parent import die_with_parent

RESTART_PAUSE = 1.0


def _spawn(kind: str, index: int) -> "subprocess.Popen[bytes]":
    """Child `index` serves its metrics on METRICS_PORT + index: one port each."""
    preexec = die_with_parent if sys.platform.startswith("linux") else None
    port = get_settings().metrics_port
    env = {**os.environ, "METRICS_PORT": str(port + index if port else 0)}
    return subprocess.Popen([sys.executable, "-m", "app", "worker", kind], preexec_fn=preexec, env=env)


def supervise(kind: str, processes: int) -> int:
    """Run `processes` worker children until signalled; return the worst exit status among them."""
    stopping = False

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    children = [_spawn(kind, index) for index in range(processes)]
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    logger.info("supervising {} {} worker processes: {}", processes, kind, [c.pid for c in children])
    while not stopping:
        for i, child in enumerate(children):
            if child.poll() is not None and not stopping:
                logger.warning("{} worker {} exited with {}; starting another", kind, child.pid, child.returncode)
                time.sleep(RESTART_PAUSE)
                children[i] = _spawn(kind, i)
        time.sleep(0.2)
    return max(abs(child.wait()) for child in children)
