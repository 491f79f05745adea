"""Webhook baseline: raw httpx POSTs of signed events to the bench receiver, at a fixed concurrency.

`python -m bench.raw_webhooks --url http://127.0.0.1:P/hook --concurrency C --count N` (secret in
BENCH_WEBHOOK_SECRET). Each body looks like a service `job.succeeded` event and is signed with the service's
own `signed_headers`, so the receiver verifies it exactly as it verifies a real delivery. One httpx client,
C tasks, no database, no broker: the floor under a delivery. Prints one JSON line.
"""

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx

from app.core.messages import dumps
from app.core.signing import signed_headers
from bench.stats import summary


def event_body(number: int) -> tuple[str, bytes]:
    job_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    job = {
        "id": job_id,
        "client_id": "bench",
        "job_type": "echo",
        "status": "succeeded",
        "priority": 5,
        "attempts": 1,
        "max_retries": 3,
        "payload": {"n": number, "bench": True},
        "result": {"n": number, "bench": True},
        "error": None,
        "idempotency_key": None,
        "callback_url": None,
        "request_id": uuid.uuid4().hex,
        "created_at": now,
        "updated_at": now,
        "started_at": now,
        "finished_at": now,
    }
    event = {"id": f"evt_{job_id.replace('-', '')}_3", "type": "job.succeeded", "created_at": now, "seq": 3}
    return job_id, dumps({**event, "data": {"job": job}})


async def run(args: argparse.Namespace) -> dict[str, Any]:
    secret = os.environ["BENCH_WEBHOOK_SECRET"]
    counter = iter(range(args.count))
    ok, failed = 0, 0
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=args.concurrency)
    async with httpx.AsyncClient(follow_redirects=False, trust_env=False, limits=limits, timeout=15) as client:

        async def poster() -> None:
            nonlocal ok, failed
            for number in counter:
                _, body = event_body(number)
                msg_id = f"msg_{uuid.uuid4().hex}"
                headers = signed_headers([secret], msg_id, int(time.time()), body, None)
                started = time.perf_counter()
                try:
                    response = await client.post(args.url, content=body, headers=headers)
                except httpx.HTTPError:
                    failed += 1
                    continue
                latencies.append(time.perf_counter() - started)
                if 200 <= response.status_code < 300:
                    ok += 1
                else:
                    failed += 1

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.wait_for(asyncio.gather(*(poster() for _ in range(args.concurrency))), args.max_seconds)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "concurrency": args.concurrency,
        "count": ok + failed,
        "ok": ok,
        "failed": failed,
        "elapsed_s": round(elapsed, 4),
        "per_s": round(ok / elapsed, 2) if elapsed > 0 else 0.0,
        "latency_ms": summary([s * 1000 for s in latencies]),
        "cpu_ms_per_post": round(cpu * 1000 / ok, 3) if ok else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.raw_webhooks", description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--max-seconds", type=float, default=300)
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
