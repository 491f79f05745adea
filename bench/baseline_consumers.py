"""End-to-end baselines: raw aio-pika prefetch-1 consumers on a job lane, as one process with C consumers.

`python -m bench.baseline_consumers --mode noop|asyncpg --queue <lane> --consumers C --expect N`

- `noop` (baseline a): each message is acked, nothing else.
- `asyncpg` (baseline b): each message is parsed (the service's job message JSON), its job claimed with one
  compare-and-set UPDATE on the `jobs` table, the `echo` result recorded in one transaction (UPDATE result +
  INSERT audit row + INSERT outbox row holding the `job.succeeded` event), then the message is acked. By hand
  with asyncpg; the pool is as large as the service's engine may grow (DB_POOL_SIZE + overflow).

Like the job worker: one robust connection, one channel per consumer with prefetch 1, manual ack after the
commit. It stops by itself after N messages (or `--max-seconds`) and prints one JSON line with the time from
the first message received to the N-th ack.
"""

import argparse
import asyncio
import contextlib
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import aio_pika
import asyncpg  # type: ignore[import-untyped]
from aio_pika.abc import AbstractIncomingMessage

CLAIM = """
UPDATE jobs SET status = 'running', attempts = attempts + 1, runs = runs + 1, seq = seq + 1,
       lease_until = $2, next_attempt_at = NULL, started_at = COALESCE(started_at, $3), updated_at = $3
WHERE id = $1 AND status IN ('pending', 'queued', 'retrying')
RETURNING runs, seq, attempts, payload, job_type
"""
FINISH = """
UPDATE jobs SET status = 'succeeded', result = $2, error = NULL, finished_at = $3, lease_until = NULL,
       seq = seq + 1, updated_at = $3
WHERE id = $1 AND runs = $4 AND status = 'running'
RETURNING seq
"""
AUDIT = "INSERT INTO job_events (job_id, event, detail, created_at) VALUES ($1, $2, $3, $4)"
OUTBOX = """
INSERT INTO outbox (exchange, routing_key, body, headers, priority, message_id, job_id, created_at)
VALUES ($1, $2, $3, $4, NULL, $5, NULL, $6)
"""
LEASE = timedelta(seconds=30)


class Drain:
    def __init__(self, expect: int, pool: Any, events_exchange: str) -> None:
        self.expect = expect
        self.pool = pool
        self.events_exchange = events_exchange
        self.done = 0
        self.skipped = 0
        self.first: float | None = None
        self.last: float | None = None
        self.finished = asyncio.Event()

    async def on_message(self, message: AbstractIncomingMessage) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        if self.pool is not None:
            await self.claim_and_finish(json.loads(message.body)["job_id"])
        await message.ack()
        self.done += 1
        self.last = time.perf_counter()
        if self.done >= self.expect:
            self.finished.set()

    async def claim_and_finish(self, job_id: str) -> None:
        now = datetime.now(UTC)
        async with self.pool.acquire() as conn:
            claimed = await conn.fetchrow(CLAIM, job_id, now + LEASE, now)
        if claimed is None:
            self.skipped += 1
            return
        result = claimed["payload"]  # echo: the payload is the result (JSON text as stored)
        now = datetime.now(UTC)
        async with self.pool.acquire() as conn, conn.transaction():
            seq = await conn.fetchval(FINISH, job_id, result, now, claimed["runs"])
            if seq is None:
                return
            detail = json.dumps({"from": "running", "to": "succeeded", "attempt": claimed["attempts"]})
            await conn.execute(AUDIT, job_id, "succeeded", detail, now)
            event = {
                "id": f"evt_{job_id.replace('-', '')}_{seq}",
                "type": "job.succeeded",
                "created_at": now.isoformat(),
                "seq": seq,
                "data": {"job": {"id": job_id, "status": "succeeded", "result": json.loads(result)}},
            }
            key = f"job.{claimed['job_type']}.succeeded"
            body = json.dumps(event, separators=(",", ":")).encode()
            await conn.execute(OUTBOX, self.events_exchange, key, body, "{}", event["id"], now)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    pool = None
    if args.mode == "asyncpg":
        pool = await asyncpg.create_pool(args.dsn, min_size=1, max_size=args.pool_size)
    drain = Drain(args.expect, pool, args.events_exchange)
    connection = await aio_pika.connect_robust(args.amqp)
    try:
        for _ in range(args.consumers):
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=1)
            queue = await channel.declare_queue(args.queue, passive=True)
            await queue.consume(drain.on_message)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(drain.finished.wait(), args.max_seconds)
    finally:
        await connection.close()
        if pool is not None:
            await pool.close()
    elapsed = (drain.last or 0) - (drain.first or 0)
    return {
        "mode": args.mode,
        "consumers": args.consumers,
        "count": drain.done,
        "skipped": drain.skipped,
        "elapsed_s": round(elapsed, 4),
        "per_s": round(drain.done / elapsed, 2) if elapsed > 0 else 0.0,
        "complete": drain.done >= args.expect,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.baseline_consumers", description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["noop", "asyncpg"], required=True)
    parser.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--queue", required=True)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--dsn", default="")
    parser.add_argument("--pool-size", type=int, default=20)
    parser.add_argument("--events-exchange", default="")
    parser.add_argument("--max-seconds", type=float, default=300)
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
