"""Optional profiling (`python -m bench --profile DIR`): py-spy samples a service process while a scenario
loads it, and the collapsed stacks are summed into the functions that take the most CPU.

py-spy is a dev dependency (requirements-dev.txt); without it `--profile` is refused at start. For each
recording, DIR gets `<name>.txt` (py-spy's raw collapsed stacks, one `frame;frame;... count` per line, usable
by any flame-graph tool) and `<name>.md`: the top functions by own time and by inclusive time, in % of the
samples taken while a thread held the GIL (so: of the Python CPU time). Profiled runs are slower; do not
read their figures as the benchmark's.
"""

import asyncio
import contextlib
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from bench.env import ROOT

RATE = 100  # samples per second


def py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


@dataclass
class Profiler:
    out: Path
    binary: str

    @classmethod
    def create(cls, out: Path) -> "Profiler":
        binary = py_spy()
        if binary is None:
            raise SystemExit("--profile needs py-spy: pip install -r requirements-dev.txt")
        out.mkdir(parents=True, exist_ok=True)
        return cls(out, binary)

    @contextlib.asynccontextmanager
    async def record(self, name: str, pid: int) -> AsyncIterator[None]:
        raw = self.out / f"{name}.txt"
        proc = await asyncio.create_subprocess_exec(
            *[self.binary, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw", "-o", str(raw)],
            # --gil: only samples holding the GIL (CPU spent in Python, not idle pool threads);
            # --nonblocking: never pause the process, so the profiled run keeps its speed.
            "--gil",
            "--nonblocking",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield
        finally:
            proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if raw.exists():
            (self.out / f"{name}.md").write_text(summarise(raw.read_text(), name))


def summarise(collapsed: str, name: str, top: int = 25) -> str:
    """Sample shares from py-spy's raw (collapsed) output: own time by package and by function, and inclusive
    time of the service's own functions. Stacks may start mid-way (SQLAlchemy runs statements in greenlets,
    whose stacks py-spy reports apart; non-blocking sampling truncates some), so inclusive shares of `app`
    functions are lower bounds, while own-time shares are exact to the sample."""
    packages: Counter[str] = Counter()
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(frame) for frame in stack.split(";")]
        total += count
        own[frames[-1]] += count
        packages[_package(stack.split(";")[-1])] += count
        for frame in {f for f in frames if f.endswith("(app)") or "(app/" in f}:
            inclusive[frame] += count
    if not total:
        return f"# {name}\n\nno samples\n"

    def block(title: str, counts: Counter[str]) -> list[str]:
        rows = [f"| {100 * n / total:.1f} | `{what}` |" for what, n in counts.most_common(top)]
        return ["", f"## {title}", "", "| % | what |", "|---|---|", *rows]

    lines = [f"# {name}: {total} samples at {RATE}/s while holding the GIL"]
    lines += block("own time by package", packages)
    lines += block("own time by function", own)
    lines += block("inclusive time of the service's functions (lower bounds)", inclusive)
    return "\n".join(lines) + "\n"


def _package(frame: str) -> str:
    """The top-level package or standard-library module of a raw frame (`sqlalchemy`, `asyncio`, `app`)."""
    path = frame.rpartition(" (")[2].rsplit(":", 1)[0]
    for marker in ("site-packages/", f"{ROOT}/", "/lib/python3.11/", "/lib/python3.12/", "/lib/python3.13/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return path.split("/", 1)[0].removesuffix(".py") or "?"


def _short(frame: str) -> str:
    """`function (path/to/module.py:123)` -> `function (module path from site-packages or the repo)`."""
    function, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0]
    for marker in ("site-packages/", f"{ROOT}/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{function} ({path})"
