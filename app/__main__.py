"""Command line: `python -m app api | migrate | dev | worker jobs | settings-doc | rotate-secrets`."""

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, Literal

from loguru import logger

from app.core.config import Settings, get_settings
from app.core.logging import configure_logging
from app.core.parent import remember_parent

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"


def build_parser() -> argparse.ArgumentParser:
    """The commands and their arguments; docker-compose.yml's commands are checked against it in the tests."""
    parser = argparse.ArgumentParser(prog="python -m app", description="The task queue service.")
    commands = parser.add_subparsers(dest="command", required=True)
    api = commands.add_parser("api", help="serve the HTTP API (workers embedded when EMBEDDED_WORKERS=true)")
    commands.add_parser("migrate", help="bring the database schema up to date (alembic upgrade head)")
    commands.add_parser("dev", help="what `make run` does: check services, create dev keys, migrate, serve")
    docs = commands.add_parser("settings-doc", help="write .env.example and docs/settings.md from the settings")
    docs.add_argument("--check", action="store_true", help="only say whether they are up to date (exit 1 if not)")
    rotate = commands.add_parser(
        "rotate-secrets",
        help="re-encrypt stored secrets (webhooks', notifications') with the first key of SECRET_ENCRYPTION_KEY",
    )
    rotate.add_argument("--batch-rows", type=int, default=500, metavar="N", help="rows per transaction (500)")
    worker = commands.add_parser("worker", help="run a worker process")
    worker.add_argument("kind", choices=["jobs", "webhooks"])
    for command, what in ((api, "the API"), (worker, "the worker")):
        command.add_argument(
            "--processes",
            type=int,
            default=1,
            metavar="N",
            help=f"run N copies of {what} (default 1), say one per core",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "settings-doc":
        return settings_doc(args.check)
    try:
        settings = get_settings()
    except ValueError as exc:
        print(f"Invalid settings: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings)
    if args.command == "migrate":
        return migrate(settings)
    if problem := _plugin_problem():
        print(f"Cannot start: {problem}", file=sys.stderr)
        return 2
    if args.command == "dev":
        return dev()
    if args.command == "rotate-secrets":
        return rotate_secrets(settings, args.batch_rows)
    if problem := _process_count_problem(settings, args.processes) or _topology_problem(settings):
        print(problem, file=sys.stderr)
        return 2
    if args.command == "api":
        return serve(settings, args.processes)
    if args.processes > 1:
        from app.workers.supervisor import supervise

        return supervise(args.kind, args.processes)
    return run_worker(settings, args.kind)


def _process_count_problem(settings: Settings, processes: int) -> str | None:
    if processes < 1:
        return "--processes must be 1 or more."
    if processes > 1 and settings.database_url.startswith("sqlite"):
        return "SQLite serves one process; use PostgreSQL or MSSQL (DATABASE_URL) for --processes."
    return None


def settings_doc(check: bool) -> int:
    from app.core import settings_doc

    changed = settings_doc.stale() if check else settings_doc.write()
    for path in changed:
        verb = "is out of date; run `python -m app settings-doc`" if check else "written"
        print(f"{path.relative_to(settings_doc.ROOT)} {verb}", file=sys.stderr if check else sys.stdout)
    return 1 if check and changed else 0


def _plugin_problem() -> str | None:
    """Why the job type plugins keep this process from starting (docs/plugins.md), or None."""
    from importlib import import_module

    from app.schemas.payloads.plugins import PluginError

    try:
        import_module("app.schemas.payloads.registry")  # its import loads the plugins and checks their names
    except PluginError as exc:
        return str(exc)
    return None


def _topology_problem(settings: Settings) -> str | None:
    from app.preflight import topology_problem

    problem = asyncio.run(topology_problem(settings))
    return None if problem is None else f"Cannot start: {problem}"


def migrate(settings: Settings) -> int:
    from app.core.database import is_unreachable
    from app.core.migrate import upgrade

    try:
        upgrade(settings.database_url)
    except Exception as exc:
        if not is_unreachable(exc):
            raise
        print(f"The database is not reachable ({type(exc).__name__}); check DATABASE_URL.", file=sys.stderr)
        return 1
    logger.info("database schema is up to date")
    return 0


def rotate_secrets(settings: Settings, batch_rows: int) -> int:
    """Re-seal every stored secret with the first key; says how many it re-sealed."""
    from app.core.database import is_unreachable, make_engine
    from app.core.secret_box import SecretBox, SecretsUnavailable, keys_of
    from app.services.upkeep.secret_rotation import rotate_secrets

    if not keys_of(settings.secret_encryption_key) or batch_rows < 1:
        print("Set SECRET_ENCRYPTION_KEY (the new key first) and a --batch-rows of 1 or more.", file=sys.stderr)
        return 2

    async def run() -> int:
        engine = make_engine(settings.database_url)
        try:
            return await rotate_secrets(engine, SecretBox(settings.secret_encryption_key), batch_rows)
        finally:
            await engine.dispose()

    try:
        count = asyncio.run(run())
    except SecretsUnavailable as exc:
        print(f"Stopped: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not is_unreachable(exc):
            raise
        print(f"The database is not reachable ({type(exc).__name__}); check DATABASE_URL.", file=sys.stderr)
        return 1
    print(f"Re-encrypted {count} stored secret(s) with the first key of SECRET_ENCRYPTION_KEY.")
    return 0


def dev() -> int:
    from app.devsetup import ensure_dev_keys
    from app.preflight import missing_services

    admin_key = ensure_dev_keys(Path(".env"))
    os.environ.setdefault("EMBEDDED_WORKERS", "true")
    os.environ.setdefault("WEBHOOK_ALLOW_PRIVATE_NETWORKS", "true")
    get_settings.cache_clear()
    settings = get_settings()
    problems = asyncio.run(missing_services(settings))
    if problems:
        print("Cannot start:\n" + "\n".join(f"  - {p}" for p in problems), file=sys.stderr)
        return 1
    if problem := _topology_problem(settings):
        print(f"Cannot start: {problem}", file=sys.stderr)
        return 1
    if migrate(settings):
        return 1
    if admin_key:
        print(f"\nYour admin API key (saved in .env, shown this once):\n\n    {admin_key}\n", flush=True)
    if settings.webhook_allow_private_networks:
        logger.warning("WEBHOOK_ALLOW_PRIVATE_NETWORKS=true: URLs on private and loopback addresses are allowed")
    return serve(settings)


def serve(settings: Settings, processes: int = 1) -> int:
    import uvicorn

    host, port = settings.host, settings.port
    if processes == 1:
        from app.core.collector import settle
        from app.main import create_app

        app = create_app(settings)
        settle()
        uvicorn.run(app, host=host, port=port, log_config=None, access_log=False)
        return 0
    # uvicorn's own worker processes behind one socket, each building the app from the environment. A scrape
    # reaches one of them, so they share their metric values in a folder (prometheus_client's multiprocess
    # mode); this parent imports no metric, so it adds none of its own.
    chosen = os.environ.get(MULTIPROC_DIR)
    folder = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="taskq-metrics-"))
    _share_metric_values(folder)
    remember_parent()
    target = "app.main:app_from_environment"
    try:
        uvicorn.run(target, factory=True, workers=processes, host=host, port=port, log_config=None, access_log=False)
    finally:
        if not chosen:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def _share_metric_values(folder: Path) -> None:
    """The API processes started after this share their values in `folder`, emptied first (prometheus_client's
    rule: values left by an earlier run would be summed in)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.db"):
        old.unlink()
    os.environ[MULTIPROC_DIR] = str(folder)


def run_worker(settings: Settings, kind: Literal["jobs", "webhooks"]) -> int:
    from app.core.collector import settle
    from app.workers.process import run_worker_process

    settle()
    run_loop(run_worker_process(settings, kind, _stop_signal))
    return 0


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when it is installed: the workers spend much of their time in the event loop itself."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


def _stop_signal(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


if __name__ == "__main__":
    sys.exit(main())
