"""PostgreSQL, Redis and a RabbitMQ node of the run's own, on free loopback ports, in a folder of their own, so
that a fault run (`make chaos`) or a test that needs an outage can stop and restart each without touching the
services the rest of the machine uses.

Each is started from the machine's own packages (Debian's postgresql, redis-server and rabbitmq-server) and
stopped and removed on the way out, whatever happened. Redis and RabbitMQ also die with the process that started
them (the thread that started them, on Linux), so a killed run leaves none behind.
"""

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from app.core import parent
from tests.local.cluster import Node
from tests.local.ports import free_port, free_ports

START_WITHIN = 90.0


def _until(check: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {within:.0f} s")
        time.sleep(0.2)


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run its commands as the postgres user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@dataclass
class PrivatePostgres:
    folder: Path
    port: int = field(default_factory=free_port)

    def __post_init__(self) -> None:
        versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
        if not versions:
            raise RuntimeError("PostgreSQL's server programs are missing: apt-get install postgresql")
        self.bin = versions[-1]
        self.data = self.folder / "pg"

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            _as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), *args]),
            check=True,
            capture_output=True,
            timeout=START_WITHIN,
        )

    def create(self) -> None:
        self.data.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.data, "postgres", "postgres")
        initdb = [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"]
        subprocess.run(_as_postgres(initdb), check=True, capture_output=True, timeout=START_WITHIN)
        self.start()

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off"
        self._ctl("-o", options, "-l", str(self.data / "server.log"), "-w", "start")

    def crash_and_start(self) -> None:
        """Stop at once, as a crash would (recovery replays the log at the next start), then start."""
        self._ctl("-m", "immediate", "-w", "stop")
        self.start()

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._ctl("-m", "fast", "-w", "stop")


@dataclass
class PrivateRedis:
    folder: Path
    port: int = field(default_factory=free_port)
    process: "subprocess.Popen[bytes] | None" = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = (self.folder / "redis.log").open("ab")
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=log,
                cwd=self.folder,
                preexec_fn=partial(parent.die_with_parent, signal.SIGTERM),
            )
        _until(self._answers, START_WITHIN, f"Redis on port {self.port} answering")

    def _answers(self) -> bool:
        ping = subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True, timeout=5)
        return ping.stdout.strip() == b"PONG"

    def restart(self) -> None:
        """Stop (what it held is gone: it keeps nothing on disk, as the machine's Redis) and start again."""
        self.stop()
        self.start()

    def stop(self) -> None:
        """Stop it (SIGKILL when SIGTERM is not enough within 30 s) and wait until it is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)


@dataclass
class PrivateRabbit:
    """One RabbitMQ node, run as tests/local/cluster.py runs each node of its cluster, with a cookie of its own."""

    folder: Path
    prefix: str = "taskq-chaos"

    def __post_init__(self) -> None:
        amqp, dist = free_ports(2)
        self.node = Node(f"{self.prefix}-{uuid.uuid4().hex[:8]}@localhost", amqp, dist, self.folder / "rabbitmq")

    @property
    def url(self) -> str:
        return self.node.url

    def start(self) -> None:
        self.node.prepare(secrets.token_hex(20))
        self.node.start(die_with_parent=True)

    def stop_app(self) -> None:
        self.node.ctl("stop_app")

    def start_app(self) -> None:
        self.node.ctl("start_app")
        self.node.await_startup()

    def stop(self) -> None:
        self.node.stop()


@dataclass
class PrivateServices:
    postgres: PrivatePostgres
    redis: PrivateRedis
    rabbit: PrivateRabbit


@contextlib.contextmanager
def private_services(folder: Path) -> Iterator[PrivateServices]:
    """All three, started in `folder` (made readable for the postgres user) and always stopped and removed."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    services = PrivateServices(PrivatePostgres(folder), PrivateRedis(folder), PrivateRabbit(folder))
    try:
        services.postgres.create()
        services.redis.start()
        services.rabbit.start()
        yield services
    finally:
        services.rabbit.stop()
        services.redis.stop()
        services.postgres.stop()


@contextlib.contextmanager
def running_redis(folder: Path) -> Iterator[PrivateRedis]:
    """A Redis of its own, started in `folder`; stopped and `folder` removed on the way out, whatever happened."""
    folder.mkdir(parents=True, exist_ok=True)
    redis = PrivateRedis(folder)
    try:
        redis.start()
        yield redis
    finally:
        redis.stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def running_rabbit(folder: Path, prefix: str = "taskq-private") -> Iterator[PrivateRabbit]:
    """A RabbitMQ node of its own, named `<prefix>-<random>@localhost`, started in `folder`; stopped and `folder`
    removed on the way out, whatever happened."""
    folder.mkdir(parents=True, exist_ok=True)
    rabbit = PrivateRabbit(folder, prefix)
    try:
        rabbit.start()
        yield rabbit
    finally:
        rabbit.stop()
        shutil.rmtree(folder, ignore_errors=True)
