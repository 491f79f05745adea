"""Ingest baseline (a): a bare FastAPI endpoint doing one INSERT and one confirmed publish, by hand.

`python -m bench.baseline_api` reads the same settings as the service (DATABASE_URL, RABBITMQ_URL, NAMESPACE, HOST,
PORT, DB_POOL_SIZE, PUBLISH_TIMEOUT_SECONDS) and serves with the same uvicorn settings as `python -m app api`.
`POST /api/v1/jobs` parses the JSON body, INSERTs one row into a small table of its own (asyncpg pool as large as
the service's engine may grow: pool size + overflow), publishes one persistent message with `mandatory` on a
confirming channel to an exchange and queue of its own inside the namespace (lazy, as the service's lanes are),
waits for the confirm, and answers 201 with the id. No auth, no validation, no outbox, no idempotency, no rate
limit: the floor under what the service does per submit.
"""

import json
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import aio_pika
import asyncpg  # type: ignore[import-untyped]
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.core.config import Settings
from bench.env import BASELINE_EXCHANGE, BASELINE_QUEUE_ARGS, BASELINE_TABLE

ROUTING_KEY = "baseline"


def asyncpg_dsn(sqlalchemy_url: str) -> str:
    return sqlalchemy_url.replace("postgresql+asyncpg://", "postgresql://", 1)


def create_app(settings: Settings) -> FastAPI:
    names = f"{settings.namespace}.{BASELINE_EXCHANGE}"

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool = await asyncpg.create_pool(
            asyncpg_dsn(settings.database_url), min_size=1, max_size=2 * settings.db_pool_size
        )
        async with pool.acquire() as conn:
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {BASELINE_TABLE} (id uuid PRIMARY KEY, job_type text NOT NULL, "
                "payload jsonb NOT NULL, created_at timestamptz NOT NULL)"
            )
        connection = await aio_pika.connect_robust(settings.rabbitmq_url)
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        exchange = await channel.declare_exchange(names, aio_pika.ExchangeType.DIRECT, durable=True)
        queue = await channel.declare_queue(names, durable=True, arguments=BASELINE_QUEUE_ARGS)
        await queue.bind(exchange, ROUTING_KEY)
        app.state.pool, app.state.exchange = pool, exchange
        try:
            yield
        finally:
            await connection.close()
            await pool.close()

    app = FastAPI(title="bench baseline", lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/api/v1/jobs", status_code=201)
    async def submit(request: Request) -> JSONResponse:
        data: dict[str, Any] = json.loads(await request.body())
        job_id, now = uuid.uuid4(), datetime.now(UTC)
        payload = json.dumps(data.get("payload"))
        async with request.app.state.pool.acquire() as conn:
            await conn.execute(
                f"INSERT INTO {BASELINE_TABLE} (id, job_type, payload, created_at) VALUES ($1, $2, $3, $4)",
                job_id,
                data.get("job_type", "echo"),
                payload,
                now,
            )
        message = aio_pika.Message(
            body=json.dumps(
                {"job_id": str(job_id), "job_type": data.get("job_type"), "payload": data.get("payload")}
            ).encode(),
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=str(job_id),
        )
        await request.app.state.exchange.publish(
            message, ROUTING_KEY, mandatory=True, timeout=settings.publish_timeout_seconds
        )
        body = {"id": str(job_id), "job_type": data.get("job_type"), "status": "queued", "created_at": now.isoformat()}
        return JSONResponse(body, status_code=201)

    return app


def main() -> int:
    settings = Settings(_env_file=None)
    app = create_app(settings)
    # The same server settings as `python -m app api` (app/__main__.py: serve).
    uvicorn.run(app, host=settings.host, port=settings.port, log_config=None, access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
