"""The scenarios, by name, in the order a run takes them. Each starts what it needs, measures, stops what
it started and returns table rows.

- ingest (bench/ingest.py): `POST /api/v1/jobs` at 1, 8, 32 and 128 clients against the service's API (no
  worker) and `POST /api/v1/jobs/batch` 500 jobs at a time; the single-job load against the bare baseline
  API; raw confirmed publishes, the broker's floor for one message per job.
- end-to-end (bench/end_to_end.py): N queued jobs drained by one job worker with C consumers, beside raw
  consumers (a: no-op, b: claim + finish by hand with asyncpg) and Celery and Dramatiq draining N no-op
  tasks; then submit -> succeeded latency at a fixed moderate rate.
- webhooks (bench/webhooks.py): N job events delivered by one webhook worker to a signature-verifying
  receiver, beside raw httpx POSTs at the same concurrency; then submit -> callback latency at 100 jobs/s.
- slow_endpoint (bench/slow_endpoint.py): submit -> callback latency of a fast endpoint at a steady rate,
  alone and then beside the same client's endpoint that answers after 10 s, through one webhook worker.
- metrics_cost (bench/metrics_cost.py): the drain and the ingest with the metrics as shipped and with every
  metric update a no-op, taking turns; what moving the metrics costs the hot paths.
- retention (bench/retention.py): the drain beside N jobs that finished long ago, with the job worker's
  retention loop pruning them and with their retention off, taking turns; what pruning costs the drain.
- flow (bench/flow.py): the drain with its jobs spread over concurrency keys and without, taking turns; and how
  soon a slot a finished job frees is taken by the next job of its key.
- tracing (bench/tracing.py): the drain with tracing off, with its code path taken out, and on (every span
  exported over OTLP/HTTP to a sink), taking turns; what tracing costs when unused and when used.
- progress (bench/progress.py): the drain of short sleep jobs reporting progress every 10 ms and without
  progress, taking turns; what the reports (throttled to one write a second per job) cost.
- noisy (bench/noisy.py): a client's 20,000-job backlog drained while another client submits a job a second:
  the second's submit -> running, with fair turns and without, and the first's drain with and without it.
- workflows (bench/workflows.py): one workflow of 1,000 jobs feeding one, submit -> the last succeeded, beside
  1,001 independent jobs through the batch endpoint; a chain's handoff from a job's finish to the next one's
  start, beside a concurrency key of limit 1 and a client that waits and submits; a workflow's submit beside a
  batch's.
- cancel (bench/cancel.py): running jobs cancelled one at a time, a `sleep` (its task cancelled) and an `image`
  job in the CPU pool (its process killed): cancel -> cancelled, p50 and p99.
- dlq-groups (bench/dlq_groups.py): `GET /api/v1/dlq/groups` over 100,000 dead jobs in 400 failure groups of
  five clients, beside a plain `GET /api/v1/dlq`, with the admin key and a client's: p50 and p95 of each.
- overload (bench/overload.py): 300 closed-loop clients for a minute against one API process: what it
  answered, its latency, and whether every accepted job was saved.
- scaling (bench/scaling.py): the drain with 1, 2 and 4 job-worker processes and the ingest with 1 and 2 API
  processes, on classic and on quorum queues; which resource saturates first, from the CPU of each.
- soak (bench/soak.py): many echo jobs through API and worker; resident memory at start, at the checkpoint
  and at the end; lost and duplicated jobs.
- overview (bench/overview.py): `GET /api/v1/overview` as the admin and as a client over a million jobs, cold
  and warm, beside `GET /api/v1/dlq/stats` and `GET /health` in the same process.
"""

from collections.abc import Awaitable, Callable

from bench.cancel import cancel
from bench.dlq_groups import dlq_groups
from bench.end_to_end import end_to_end
from bench.flow import flow
from bench.harness import Harness
from bench.ingest import ingest
from bench.metrics_cost import metrics_cost
from bench.noisy import noisy
from bench.overload import overload
from bench.overview import overview
from bench.progress import progress
from bench.report import Row
from bench.retention import retention
from bench.scaling import scaling
from bench.sizes import FULL, QUICK, Sizes
from bench.slow_endpoint import slow_endpoint
from bench.soak import soak
from bench.tracing import tracing
from bench.webhooks import webhooks
from bench.workflows import workflows

__all__ = ["FULL", "QUICK", "SCENARIOS", "Scenario", "Sizes"]

Scenario = Callable[[Harness, Sizes], Awaitable[list[Row]]]
SCENARIOS: dict[str, Scenario] = {
    "ingest": ingest,
    "end-to-end": end_to_end,
    "webhooks": webhooks,
    "slow_endpoint": slow_endpoint,
    "metrics_cost": metrics_cost,
    "retention": retention,
    "flow": flow,
    "tracing": tracing,
    "progress": progress,
    "noisy": noisy,
    "workflows": workflows,
    "cancel": cancel,
    "dlq-groups": dlq_groups,
    "overload": overload,
    "scaling": scaling,
    "soak": soak,
    "overview": overview,
}
