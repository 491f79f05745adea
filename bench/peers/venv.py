"""The peers' own virtualenv, bench/.venv-peers (ignored by git), created and filled from
bench/peers/requirements.txt when it is missing or was filled from other requirements.

A stamp inside it holds the digest of the requirements it was filled from; a lock file keeps two bench runs
from filling it at once. Nothing here touches the service's venv.
"""

import fcntl
import hashlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench.env import ROOT

REQUIREMENTS = Path(__file__).with_name("requirements.txt")
VENV = ROOT / "bench" / ".venv-peers"
STAMP = VENV / ".installed"
LOCK = ROOT / "bench" / ".venv-peers.lock"
PIP_SECONDS = 900


def python() -> Path:
    return VENV / "bin" / "python"


def _digest() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()


def ready() -> bool:
    return python().exists() and STAMP.exists() and STAMP.read_text().strip() == _digest()


def _run(command: list[str], within: float) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=within, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed:\n{(result.stdout + result.stderr)[-2000:]}")


def ensure(say: Callable[[str], None] = lambda text: None) -> Path:
    """The peers' interpreter, after creating and filling the virtualenv if need be (blocking: run it in a
    thread)."""
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            return python()
        if not python().exists():
            say(f"creating the peers' virtualenv in {VENV.relative_to(ROOT)}")
            _run([sys.executable, "-m", "venv", str(VENV)], 300)
        say(f"installing {REQUIREMENTS.relative_to(ROOT)} into it")
        STAMP.unlink(missing_ok=True)
        _run([str(python()), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)], PIP_SECONDS)
        STAMP.write_text(_digest() + "\n")
    return python()
