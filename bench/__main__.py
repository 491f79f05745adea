"""`python -m bench [--quick] [--output FILE] [--only SCENARIO ...] [--profile DIR]` (`make bench`).

Creates a fresh PostgreSQL database and namespace, runs each scenario (each starts the service's processes it
needs and stops them), removes everything it created — also on an error, Ctrl-C or SIGTERM — and prints one
markdown table, also written to bench/results/latest.md (a full run of every scenario), bench/results/quick.md
(--quick) or bench/results/partial.md (a full run of some, --only), unless --output says where; then saves the
table's headline ratios as JSON beside it (latest.json) and draws them (bench/chart.py: bench/results/ratios.png
for latest.md, <name>-ratios.png beside any other table). Exits 1 when a scenario failed (its row says why), 0
otherwise: missed targets are reported in the table, not by the exit code.
"""

import argparse
import asyncio
import contextlib
import dataclasses
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from redis.asyncio import Redis

from bench.chart import draw_table
from bench.env import REDIS_URL, ROOT, BenchEnv
from bench.harness import Harness
from bench.procs import Procs, foreign_pytest
from bench.profile import Profiler
from bench.report import Row, date_of, document, header, rabbitmq_version, write_ratios
from bench.scenarios import FULL, QUICK, SCENARIOS, Scenario, Sizes

RESULTS = ROOT / "bench" / "results"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Benchmark the service against baselines.")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a check that everything runs (~2 min)")
    parser.add_argument("--output", type=Path, help="where to write the table (default: bench/results/...)")
    parser.add_argument("--only", nargs="+", choices=list(SCENARIOS), help="run only these scenarios")
    parser.add_argument("--profile", type=Path, help="profile the API and workers with py-spy into this folder")
    parser.add_argument(
        "--peers", action="store_true", help="drain with Celery and Dramatiq in --quick mode too (a full run does)"
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs (their folder is printed)")
    return parser.parse_args(argv)


def say(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


async def redis_version() -> str:
    redis = Redis.from_url(REDIS_URL)
    try:
        return str((await redis.info("server"))["redis_version"])
    finally:
        await redis.aclose()


async def run(args: argparse.Namespace) -> int:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    sizes = QUICK if args.quick else FULL
    if args.peers:
        sizes = dataclasses.replace(sizes, peers=True)
    profiler = Profiler.create(args.profile) if args.profile else None
    env = BenchEnv()
    logs = Path(tempfile.mkdtemp(prefix="taskq-bench-"))
    procs = Procs(logs)
    rows: list[Row] = []
    failed: list[str] = []
    services: dict[str, str] = {}
    notes: list[str] = []
    scenario_settings: dict[str, dict[str, str]] = {}
    disturbed: dict[str, int] = {}  # scenario -> seconds another pytest run was seen
    began = time.monotonic()
    say(f"namespace {env.namespace}, database {env.db_name}, logs in {logs}")
    try:
        await asyncio.to_thread(env.create)
        harness = await Harness.open(env, procs, logs, profiler)
        try:
            services = {
                "PostgreSQL": await harness.db.server_version(),
                "RabbitMQ": await asyncio.to_thread(rabbitmq_version),
                "Redis": await redis_version(),
            }
            for name, scenario in SCENARIOS.items():
                if args.only and name not in args.only:
                    continue
                started = time.monotonic()
                watcher = asyncio.create_task(_watch_for_other_runs(name, disturbed))
                try:
                    rows += await _run_scenario(name, scenario, harness, sizes, procs, notes, failed)
                finally:
                    watcher.cancel()
                notes.append(f"{name} took {time.monotonic() - started:.0f} s.")
                say(f"{name} done in {time.monotonic() - started:.0f} s")
            notes += harness.notes
            scenario_settings = harness.scenario_settings
        finally:
            await harness.close()
    finally:
        await procs.stop_all()
        problems = await env.cleanup()
        for problem in problems:
            say(f"cleanup: {problem}")
        if args.keep_logs:
            say(f"logs kept in {logs}")
        else:
            shutil.rmtree(logs, ignore_errors=True)
    if disturbed:
        notes.append(
            "another pytest run was on the machine for about "
            + ", ".join(f"{seconds} s of {name}" for name, seconds in disturbed.items())
            + " (it competes for the cores and may restart RabbitMQ or Redis): those figures may be disturbed."
        )
    for scenario_name, chosen in scenario_settings.items():
        notes.append(f"{scenario_name} settings: " + ", ".join(f"`{k}={v}`" for k, v in chosen.items()))
    total = time.monotonic() - began
    notes.append(f"the whole run took {total:.0f} s.")
    mode = "quick: tiny sizes, figures not meaningful" if args.quick else "full"
    text = document(header(mode, sizes.shown(), env.shown_settings(), services), rows, notes)
    output = args.output or RESULTS / _default_output(args)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    print(text, flush=True)
    say(f"written to {output}")
    say(f"ratios saved to {write_ratios(rows, output, date_of(text))}")
    say(f"chart drawn to {draw_table(output)}")
    return 1 if failed else 0


def _default_output(args: argparse.Namespace) -> str:
    """latest.md holds full runs of every scenario only: a quick or partial run never replaces it."""
    if args.quick:
        return "quick.md"
    return "partial.md" if args.only and set(args.only) != set(SCENARIOS) else "latest.md"


async def _run_scenario(
    name: str,
    scenario: Scenario,
    harness: Harness,
    sizes: Sizes,
    procs: Procs,
    notes: list[str],
    failed: list[str],
) -> list[Row]:
    """Run one scenario; once more if it fails (a shared broker may have restarted), then report the failure."""
    for attempt in (1, 2):
        say(f"{name} ..." if attempt == 1 else f"{name}: running it again")
        if attempt == 2:  # a shared RabbitMQ that restarted may still be booting: wait for it (at most 2 minutes)
            with contextlib.suppress(Exception):
                await harness.broker.channel()
        try:
            return await scenario(harness, sizes)
        except Exception as exc:  # the other scenarios still run, and the table says what failed
            say(f"{name} failed:\n{traceback.format_exc()}")
            first_line = (str(exc).splitlines() or [""])[0][:200]
            if attempt == 1:
                notes.append(f"{name} failed once ({type(exc).__name__}: {first_line}) and was run again.")
                continue
            failed.append(name)
            return [Row(name, "scenario failed", f"{type(exc).__name__}: {first_line}", met=False)]
        finally:
            await procs.stop_all()
    return []


async def _watch_for_other_runs(name: str, disturbed: dict[str, int], every: int = 2) -> None:
    """Count the seconds during which another pytest run shares the machine (until cancelled)."""
    while True:
        if await asyncio.to_thread(foreign_pytest):
            disturbed[name] = disturbed.get(name, 0) + every
        await asyncio.sleep(every)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        return asyncio.run(run(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        say("interrupted; everything it started was stopped and removed")
        return 130


if __name__ == "__main__":
    sys.exit(main())
