"""Before starting: is every service we need answering? Say which is not, and how to start it."""

import asyncio
from urllib.parse import urlsplit

from app.core.config import Settings

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


async def missing_services(settings: Settings) -> list[str]:
    """One sentence per service that does not answer."""
    checks = {
        "RabbitMQ": _endpoint(settings.rabbitmq_url, 5672),
        "Redis": _endpoint(settings.redis_url, 6379),
    }
    if not settings.database_url.startswith("sqlite"):
        default = 1433 if settings.database_url.startswith("mssql") else 5432
        checks["the database"] = _endpoint(settings.database_url.replace("+", "-", 1), default)
    answers = await asyncio.gather(*(_answers(host, port) for host, port in checks.values()))
    return [
        f"{name} is not answering at {host}:{port}; {HOW_TO_START[name]}."
        for (name, (host, port)), up in zip(checks.items(), answers, strict=True)
        if not up
    ]
