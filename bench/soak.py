"""The soak scenario: many echo jobs through API and worker; resident memory at start, at the checkpoint and
at the end; lost and duplicated jobs."""

import contextlib
import time

from bench.harness import Harness, read_ids
from bench.procs import Proc, until
from bench.report import Row, num
from bench.sizes import Sizes, drain_budget

SOAK_CONSUMERS = 8
SOAK_CLIENTS = 32


async def soak(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("soak", job_consumers_default=SOAK_CONSUMERS, job_consumers_critical=0, job_consumers_bulk=0)
    await h.env.reset()
    api = await h.start_api()
    worker = await h.start_job_worker(SOAK_CONSUMERS, name="job-worker-soak")
    key = await h.client_key(api)
    memory: dict[str, list[float | None]] = {"API": [api.proc.rss_mib()], "worker": [worker.rss_mib()]}
    accepted: list[str] = []
    errors = 0
    started = time.monotonic()
    for part, count in enumerate((sizes.soak_checkpoint, sizes.soak_jobs - sizes.soak_checkpoint), start=1):
        ids = h.work / f"soak-{part}.ids"
        label = f"soak jobs {len(accepted) + 1:,} to {len(accepted) + count:,}"
        async with h.metered(label, {"API": api.proc, "job worker": worker}):
            load = await h.loadgen(
                api.jobs_url,
                key,
                concurrency=SOAK_CLIENTS,
                requests=count,
                ids_out=ids,
                max_seconds=max(900.0, count / 10),
                name=f"loadgen-soak-{part}",
            )
            errors += load["errors"]
            accepted += list(read_ids(ids))
            await _until_drained(h, len(accepted), api.proc, worker)
        memory["API"].append(api.proc.rss_mib())
        memory["worker"].append(worker.rss_mib())
    elapsed = time.monotonic() - started
    check = await h.db.soak_check(accepted)
    await _outbox_settled(h)
    outbox = await h.db.outbox_rows()
    left = await h.db.outbox_by_key()
    await worker.stop()
    await api.proc.stop()

    rows = []
    for name, (start, middle, end) in memory.items():
        growth = (end - middle) / middle * 100 if end and middle else None
        rows.append(
            Row(
                "soak",
                f"{name} resident MiB at start / {sizes.soak_checkpoint:,}th / {sizes.soak_jobs:,}th job",
                f"{num(start)} / {num(middle)} / {num(end)}",
                "—",
                f"{'+' if growth and growth >= 0 else ''}{num(growth)} % from {sizes.soak_checkpoint:,} to end",
                "< 10 % growth",
                growth is not None and growth < 10,
            )
        )
    duplicated = check["reran"] + check["succeeded_twice"]
    rows.append(
        Row(
            "soak",
            f"lost / duplicated of {len(accepted):,} accepted jobs "
            f"({errors} submit errors, {check['extra']} unacknowledged rows)",
            f"{check['lost']} / {duplicated}",
            "—",
            "—",
            "0 / 0",
            check["lost"] == 0 and duplicated == 0,
        )
    )
    rows.append(
        Row(
            "soak",
            f"jobs/s through API and worker together ({SOAK_CLIENTS} clients, C = {SOAK_CONSUMERS}); "
            f"outbox rows left after the drain (the relay given up to {OUTBOX_SETTLE_SECONDS:.0f} s)",
            f"{num(len(accepted) / elapsed)}; {outbox:,} rows ("
            + ", ".join(f"{n:,} {key}" for key, n in left.items())
            + ")",
        )
    )
    return rows


async def _until_drained(h: Harness, count: int, *watch: Proc) -> None:
    async def drained() -> bool:
        for proc in watch:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited:\n{proc.tail()}")
        return await h.db.succeeded() >= count

    await until(drained, drain_budget(count), f"soak drain of {count} jobs", interval=0.5)


OUTBOX_SETTLE_SECONDS = 10.0  # a few relay intervals: confirmed event rows are forgotten in bulk, once a second


async def _outbox_settled(h: Harness) -> None:
    """Give the relay loops their usual few seconds to forget the last confirmed rows; what is left then stays."""

    async def empty() -> bool:
        return await h.db.outbox_rows() == 0

    with contextlib.suppress(TimeoutError):
        await until(empty, OUTBOX_SETTLE_SECONDS, "the outbox to empty")
