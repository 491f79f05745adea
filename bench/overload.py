"""The overload scenario: 300 clients, each sending its next `POST /api/v1/jobs` as soon as the last one was
answered, for a minute, against one API process (no worker). Reported: what it answered (201s, the documented
503s and 429s, anything else), the latency, the jobs/s, and whether every accepted job is in the database."""

from collections import Counter

from bench.harness import Harness, read_ids
from bench.report import Row, num
from bench.sizes import Sizes

CLIENTS = 300
SHED = {"503", "429"}  # answers the contract documents for a service that cannot take more now


async def overload(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("overload", job_workers="none: the API alone")
    await h.env.reset()
    api = await h.start_api(name="api-overload")
    key = await h.client_key(api)
    ids = h.work / "overload.ids"
    async with h.metered(f"overload, {CLIENTS} clients", {"API": api.proc}):
        result = await h.loadgen(
            api.jobs_url,
            key,
            concurrency=CLIENTS,
            requests=10_000_000,
            max_seconds=sizes.overload_seconds,
            ids_out=ids,
            name="loadgen-overload",
        )
    alive = api.proc.alive()
    await api.proc.stop()
    statuses = Counter({code: int(n) for code, n in result["statuses"].items()})
    accepted = list(read_ids(ids))
    saved = await h.db.saved_of(accepted)
    unexpected = sum(n for code, n in statuses.items() if code.startswith("5") and code not in SHED)
    shed = sum(statuses[code] for code in SHED)
    latency = result["latency_ms"]
    answered = sum(statuses.values())
    h.notes.append(
        f"overload: {CLIENTS} closed-loop clients for {sizes.overload_seconds:g} s, one keep-alive connection each, "
        f"against one API process; answers {dict(statuses)}, {result['errors']} requests without an answer; "
        f"the API process {'was still running' if alive else 'had exited'} at the end."
    )
    return [
        Row("overload", f"jobs/s accepted, {CLIENTS} clients", num(result["per_s"])),
        Row(
            "overload",
            "p50 / p99 / max ms",
            f"{num(latency.get('p50'))} / {num(latency.get('p99'))} / {num(latency.get('max'))}",
        ),
        Row("overload", "load shed (503 and 429 answers), of all answers", f"{shed} of {answered}"),
        Row(
            "overload",
            "5xx other than the documented 503, and requests without an answer",
            f"{unexpected} · {result['errors']}",
            target="0 · 0",
            met=unexpected == 0 and result["errors"] == 0,
        ),
        Row(
            "overload",
            "accepted jobs missing from the database",
            str(len(accepted) - saved),
            f"of {len(accepted)} accepted",
            target="0",
            met=saved == len(accepted) and alive,
        ),
    ]
