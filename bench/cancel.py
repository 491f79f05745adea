"""The cancel scenario: from `POST /api/v1/jobs/{id}/cancel` on a running job to the job `cancelled`.

One API and one job worker (C = 4, default lane) on empty tables. For each of two handlers, `cancel_rounds` jobs,
one at a time: submit; wait until it runs (for the CPU-pool job, until a process under the worker has spent a
second of CPU since the submit: the transform is under way); send the cancel (it must answer 202); wait until the
job is `cancelled`. The figure is the job's `finished_at`, stamped by the worker as it records `cancelled`, minus
the moment the bench sent the cancel (one machine, one clock); p50 and p99 of each handler:

- `sleep` of 600 s, a handler that awaits: its task is cancelled (target p99 <= 1 s);
- `image`, an upscale to 4,000 px rotated three times and saved as WEBP in the worker's CPU pool: its process is
  killed and replaced (target p99 <= 3 s).
"""

import base64
import io
from datetime import UTC, datetime
from statistics import median
from typing import Any

import httpx
from PIL import Image

from bench.harness import Harness
from bench.procs import Proc, cpu_seconds, process_tree, until
from bench.report import Row, num
from bench.sizes import Sizes
from bench.stats import percentile

CONSUMERS = 4
TARGET_P99_S = {"sleep": 1.0, "image": 3.0}
IN_POOL_CPU_S = 1.0  # CPU a process under the worker spends before the bench takes the image job as in the pool
STATUS = "SELECT status, finished_at FROM jobs WHERE id = $1"


def _png(size: int) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), "teal").save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


PAYLOADS: dict[str, dict[str, Any]] = {
    "sleep": {"seconds": 600},
    "image": {
        "image_base64": _png(8),
        "operations": ["resize", "rotate", "rotate", "rotate"],
        "width": 4000,
        "height": 4000,
        "format": "WEBP",
        "quality": 95,
        "angle": 33,
    },
}


async def cancel(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("cancel", job_consumers_default=CONSUMERS)
    await h.env.reset()
    api = await h.start_api(name="api-cancel")
    worker = await h.start_job_worker(CONSUMERS, name="job-worker-cancel")
    seconds: dict[str, list[float]] = {kind: [] for kind in PAYLOADS}
    try:
        key = await h.client_key(api)
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=api.base, headers=headers, timeout=30, trust_env=False) as client:
            for kind, taken in seconds.items():
                for _ in range(sizes.cancel_rounds):
                    taken.append(await _round(h, client, worker, kind))
    finally:
        await worker.stop()
        await api.proc.stop()
    h.notes.append(
        f"cancel: {sizes.cancel_rounds} running jobs of each handler cancelled one at a time; the figure is the "
        "job's finished_at (the worker's `cancelled`) minus the bench's send of the cancel."
    )
    return [_row(kind, taken) for kind, taken in seconds.items()]


async def _round(h: Harness, client: httpx.AsyncClient, worker: Proc, kind: str) -> float:
    """One job submitted, cancelled once it runs: seconds from the cancel's send to its `finished_at`."""
    before = _under(worker)
    submitted = await client.post("/api/v1/jobs", json={"job_type": kind, "payload": PAYLOADS[kind]})
    submitted.raise_for_status()
    job_id = submitted.json()["id"]

    async def running() -> bool:
        return bool(await h.db.pool.fetchval("SELECT status = 'running' FROM jobs WHERE id = $1", job_id))

    await until(running, 60, f"cancel: the {kind} job running", interval=0.01)
    if kind == "image":

        async def in_pool() -> bool:
            return any(spent - before.get(pid, 0.0) >= IN_POOL_CPU_S for pid, spent in _under(worker).items())

        await until(in_pool, 60, "cancel: the image job in the CPU pool", interval=0.02)
    sent = datetime.now(UTC)
    asked = await client.post(f"/api/v1/jobs/{job_id}/cancel")
    if asked.status_code != 202:
        raise RuntimeError(f"cancel of a running {kind} job answered {asked.status_code}: {asked.text[:300]}")

    async def ended() -> datetime | None:
        row = await h.db.pool.fetchrow(STATUS, job_id)
        if row["status"] not in ("running", "cancelled"):
            raise RuntimeError(f"the cancelled {kind} job ended {row['status']}")
        return row["finished_at"] if row["status"] == "cancelled" else None

    finished: datetime = await until(ended, 30, f"cancel: the {kind} job cancelled", interval=0.01)
    return (finished - sent).total_seconds()


def _under(worker: Proc) -> dict[int, float]:
    """CPU seconds of each process under the job worker (its CPU pool), by pid."""
    return {pid: cpu_seconds(pid) for pid in process_tree(worker.pid) if pid != worker.pid}


def _row(kind: str, seconds: list[float]) -> Row:
    p50, p99 = median(seconds), percentile(seconds, 99)
    target = TARGET_P99_S[kind]
    return Row(
        "cancel",
        f"cancel -> cancelled, running `{kind}` ({'CPU pool' if kind == 'image' else 'awaits'}), p50 / p99 s",
        f"{num(p50, 2)} / {num(p99, 2)}",
        target=f"p99 <= {target:g} s",
        met=p99 <= target,
    )
