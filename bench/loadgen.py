"""The HTTP load generator, run as its own process: `python -m bench.loadgen --url ... --key ...`.

It submits `echo` jobs over real HTTP/1.1 keep-alive connections, one per concurrent client, and prints one
JSON line: requests, answers by status, errors, elapsed seconds, jobs/s and latency percentiles in ms.

Two modes:
- closed loop (default): `--concurrency` clients, each sending its next request when the last one answered,
  until `--requests` were sent (after `--warmup` requests that are not counted);
- open loop (`--rate R`): one request every 1/R seconds on a free connection of at most `--concurrency`.

With `--batch K` each request is `POST {"jobs": [K echo jobs]}` (the batch endpoint) and the jobs answered
are counted too (`jobs`, `jobs_per_s`: the items of each 2xx answer).

With `--ids-out FILE` it writes one line per accepted job: `<job id> <wall-clock send time>`, so latencies
can be joined with the database's or the webhook receiver's clock. A deliberately small client (raw asyncio
streams rather than httpx) keeps the generator's own CPU low on a machine it shares with the server.
"""

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bench.stats import summary

REQUEST_TIMEOUT = 30.0


class HttpError(Exception):
    pass


class Connection:
    """One keep-alive HTTP/1.1 connection that POSTs and reads the whole answer."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        try:
            self.writer.write(head + body)
            status, answer, close = await _read_answer(self.reader)
        except BaseException:
            self.close()
            raise
        if close:
            self.close()
        return status, answer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    line = await reader.readline()
    if not line:
        raise HttpError("connection closed before an answer")
    status = int(line.split(b" ", 2)[1])
    length, chunked, close = None, False, False
    while True:
        header = await reader.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif name == b"connection" and b"close" in value.lower():
            close = True
    if chunked:
        return status, await _read_chunked(reader), close
    if length is not None:
        return status, await reader.readexactly(length), close
    return status, await reader.read(), True


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readline()).split(b";")[0], 16)
        if size == 0:
            await reader.readline()
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readline()


@dataclass
class Results:
    latencies: list[float] = field(default_factory=list)  # seconds, accepted and refused alike
    statuses: dict[int, int] = field(default_factory=dict)
    failures: int = 0  # no answer at all: refused, reset, timed out
    samples: list[str] = field(default_factory=list)
    ids: list[tuple[str, float]] = field(default_factory=list)
    jobs: int = 0  # jobs accepted: one per 2xx answer, or the items of a batch answer
    lateness: list[float] = field(default_factory=list)  # open loop: how late a send left

    def note_failure(self, text: str) -> None:
        self.failures += 1
        if len(self.samples) < 5:
            self.samples.append(text)


@dataclass
class Target:
    host: str
    port: int
    path: str
    key: str
    want_ids: bool
    batch: int = 0  # jobs per request for the batch endpoint; 0: one job, the single-job body

    def request(self, number: int) -> tuple[bytes, bytes]:
        if self.batch:
            jobs = [_job(number * self.batch + i) for i in range(self.batch)]
            body = json.dumps({"jobs": jobs}).encode()
        else:
            body = json.dumps(_job(number)).encode()
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: Bearer {self.key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        return head, body


def _job(number: int) -> dict[str, object]:
    return {"job_type": "echo", "payload": {"n": number, "bench": True}}


async def _one(target: Target, conn: Connection, number: int, results: Results | None) -> None:
    head, body = target.request(number)
    sent_wall, started = time.time(), time.perf_counter()
    try:
        status, answer = await asyncio.wait_for(conn.post(head, body), REQUEST_TIMEOUT)
    except (OSError, TimeoutError, HttpError, asyncio.IncompleteReadError, ValueError) as exc:
        if results is not None:
            results.note_failure(f"{type(exc).__name__}: {exc}")
        return
    if results is None:
        return
    results.latencies.append(time.perf_counter() - started)
    results.statuses[status] = results.statuses.get(status, 0) + 1
    if 200 <= status < 300:
        results.jobs += answer.count(b'"outcome"') if target.batch else 1
        if target.want_ids:
            results.ids.append((json.loads(answer)["id"], sent_wall))
    elif len(results.samples) < 5:
        results.samples.append(f"HTTP {status}: {answer[:200].decode(errors='replace')}")


async def closed_loop(
    target: Target, conns: list[Connection], total: int, results: Results | None, deadline: float
) -> None:
    counter = iter(range(total))

    async def client(conn: Connection) -> None:
        for number in counter:
            if time.monotonic() > deadline:
                return
            await _one(target, conn, number, results)

    await asyncio.gather(*(client(conn) for conn in conns))


async def open_loop(
    target: Target, conns: list[Connection], total: int, rate: float, results: Results, deadline: float
) -> None:
    free: asyncio.Queue[Connection] = asyncio.Queue()
    for conn in conns:
        free.put_nowait(conn)
    tasks = set()
    start = time.perf_counter()

    async def send(conn: Connection, number: int) -> None:
        try:
            await _one(target, conn, number, results)
        finally:
            free.put_nowait(conn)

    for number in range(total):
        due = start + number / rate
        now = time.perf_counter()
        if due > now:
            await asyncio.sleep(due - now)
        if time.monotonic() > deadline:
            break
        conn = await free.get()
        results.lateness.append(max(0.0, time.perf_counter() - due))
        task = asyncio.create_task(send(conn, number))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)


async def run(args: argparse.Namespace) -> tuple[dict[str, object], list[tuple[str, float]]]:
    parts = urlsplit(args.url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
    target = Target(host, port, path, args.key, bool(args.ids_out), args.batch)
    conns = [Connection(target.host, target.port) for _ in range(args.concurrency)]
    deadline = time.monotonic() + args.max_seconds
    if args.warmup:
        await closed_loop(target, conns, args.warmup, None, deadline)
    results = Results()
    started = time.perf_counter()
    if args.rate:
        await open_loop(target, conns, args.requests, args.rate, results, deadline)
    else:
        await closed_loop(target, conns, args.requests, results, deadline)
    elapsed = time.perf_counter() - started
    for conn in conns:
        conn.close()
    answered = len(results.latencies)
    accepted = sum(count for status, count in results.statuses.items() if 200 <= status < 300)
    outcome = {
        "url": args.url,
        "concurrency": args.concurrency,
        "rate": args.rate,
        "requests": answered + results.failures,
        "accepted": accepted,
        "statuses": {str(k): v for k, v in sorted(results.statuses.items())},
        "errors": answered + results.failures - accepted,
        "elapsed_s": round(elapsed, 4),
        "per_s": round(accepted / elapsed, 2) if elapsed > 0 else 0.0,
        "jobs": results.jobs,
        "jobs_per_s": round(results.jobs / elapsed, 2) if elapsed > 0 else 0.0,
        "latency_ms": summary([s * 1000 for s in results.latencies]),
        "late_ms": summary([s * 1000 for s in results.lateness]) if args.rate else None,
        "samples": results.samples,
        "timed_out": time.monotonic() > deadline,
    }
    return outcome, results.ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loadgen", description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8000/api/v1/jobs")
    parser.add_argument("--key", default="none", help="the bearer API key")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=0, help="requests sent first and not counted")
    parser.add_argument("--rate", type=float, default=0.0, help="open loop: requests per second")
    parser.add_argument("--batch", type=int, default=0, help="jobs per request, for the batch endpoint")
    parser.add_argument("--ids-out", default="", help="write `<job id> <send time>` per accepted job here")
    parser.add_argument("--max-seconds", type=float, default=600, help="stop sending after this long")
    args = parser.parse_args(argv)
    result, ids = asyncio.run(run(args))
    if args.ids_out:
        with open(args.ids_out, "w") as out:
            out.writelines(f"{job_id} {sent:.6f}\n" for job_id, sent in ids)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
