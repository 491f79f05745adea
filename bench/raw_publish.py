"""Ingest floor: raw confirmed publishes with aio-pika, the broker's own cost of one message per job.

`python -m bench.raw_publish --queue <name> --count N --in-flight 100`

Declares the durable queue (inside the run's namespace, lazy as the service's lanes are), then `--in-flight`
publishers share one channel with publisher confirms, each sending its next persistent, mandatory message (a JSON
body about the size of a job message) to the default exchange as soon as the last one was confirmed, until N were
confirmed. A tenth of N (at most 1,000) go first as a warm-up, not counted. Deletes the queue and prints one JSON
line: messages/s from the first counted publish to the N-th confirm.
"""

import argparse
import asyncio
import json
import sys
import time
import uuid
from typing import Any

import aio_pika

from bench.env import BASELINE_QUEUE_ARGS


def message(number: int) -> aio_pika.Message:
    job_id = str(uuid.uuid4())
    body = {
        "job_id": job_id,
        "job_type": "echo",
        "client_id": "bench",
        "payload": {"n": number, "bench": True},
        "priority": 5,
        "max_retries": 3,
        "timeout_seconds": None,
        "request_id": uuid.uuid4().hex,
    }
    return aio_pika.Message(
        body=json.dumps(body, separators=(",", ":")).encode(),
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=job_id,
    )


async def publish(exchange: aio_pika.abc.AbstractExchange, queue: str, count: int, in_flight: int) -> float:
    """Seconds taken by `count` confirmed publishes, `in_flight` at a time."""
    numbers = iter(range(count))

    async def publisher() -> None:
        for number in numbers:
            await exchange.publish(message(number), queue, mandatory=True, timeout=30)

    started = time.perf_counter()
    await asyncio.gather(*(publisher() for _ in range(in_flight)))
    return time.perf_counter() - started


async def run(args: argparse.Namespace) -> dict[str, Any]:
    connection = await aio_pika.connect(args.amqp)
    async with connection:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        await channel.declare_queue(args.queue, durable=True, arguments=BASELINE_QUEUE_ARGS)
        warmup = min(1000, args.count // 10)
        try:
            await publish(channel.default_exchange, args.queue, warmup, args.in_flight)
            elapsed = await publish(channel.default_exchange, args.queue, args.count, args.in_flight)
        finally:
            await channel.queue_delete(args.queue)
    return {
        "count": args.count,
        "warmup": warmup,
        "in_flight": args.in_flight,
        "elapsed_s": round(elapsed, 4),
        "per_s": round(args.count / elapsed, 2) if elapsed > 0 else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.raw_publish", description=__doc__.splitlines()[0])
    parser.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--queue", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--in-flight", type=int, default=100)
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
