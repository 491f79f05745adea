"""Before starting: is every service we need answering? Say which is not, and how to start it."""

import asyncio
from urllib.parse import urlsplit

from app.core.broker import Broker
from app.core.config import Settings
from app.core.failover import node_urls
from app.core.topology import TopologyMismatch, build_topology

TOPOLOGY_CHECK_SECONDS = 5

HOW_TO_START = {
    "RabbitMQ": "start it with `rabbitmq-server -detached` (or `docker compose up -d rabbitmq`)",
    "Redis": "start it with `redis-server --daemonize yes` (or `docker compose up -d redis`)",
    "the database": "check DATABASE_URL, or unset it to use the embedded SQLite database",
}


async def _answers(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


def _endpoint(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


async def _any_answers(endpoints: list[tuple[str, int]]) -> bool:
    return any(await asyncio.gather(*(_answers(host, port) for host, port in endpoints)))


async def missing_services(settings: Settings) -> list[str]:
    """One sentence per service that does not answer (RabbitMQ answers when one of its listed nodes does)."""
    checks = {
        "RabbitMQ": [_endpoint(url, 5672) for url in node_urls(settings.rabbitmq_url)],
        "Redis": [_endpoint(settings.redis_url, 6379)],
    }
    if not settings.database_url.startswith("sqlite"):
        default = 1433 if settings.database_url.startswith("mssql") else 5432
        checks["the database"] = [_endpoint(settings.database_url.replace("+", "-", 1), default)]
    answers = await asyncio.gather(*(_any_answers(endpoints) for endpoints in checks.values()))
    return [
        f"{name} is not answering at {', '.join(f'{host}:{port}' for host, port in endpoints)}; {HOW_TO_START[name]}."
        for (name, endpoints), up in zip(checks.items(), answers, strict=True)
        if not up
    ]


async def topology_problem(settings: Settings) -> str | None:
    """Why this process must not start against the broker's queues (declared with another QUEUE_TYPE, say), or
    None. A broker that does not answer within a few seconds is no problem here: processes wait for it."""
    if not await _any_answers([_endpoint(url, 5672) for url in node_urls(settings.rabbitmq_url)]):
        return None
    broker = Broker(settings.rabbitmq_url, build_topology(settings), settings.publish_timeout_seconds, "preflight")
    try:
        await broker.start(wait=TOPOLOGY_CHECK_SECONDS)
    except TopologyMismatch as exc:
        return str(exc)
    finally:
        await broker.close()
    return None
