"""Every Prometheus metric of the service, defined once, and the few calls the hot paths make to move them.

The metrics live in prometheus_client's process-wide registry, as the library intends: defining one opens no
connection, and each process serves its own values (`GET /metrics`, or `METRICS_PORT` for a worker alone).
Label children are resolved once and cached, so moving a metric on the hot path is a dict lookup and an add.

Several API processes behind one port (`python -m app api --processes N`) answer a scrape from whichever
process accepts it, so they share their values through prometheus_client's multiprocess mode (files in
`PROMETHEUS_MULTIPROC_DIR`, which `python -m app api` sets before it starts them): counters and histograms are summed
over every process that ever ran; each gauge keeps one sample per live process (a `pid` label), which the
dashboards and alerts aggregate as they aggregate the instances of several worker processes.
"""

import os
import re
from collections import Counter as Tally
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Generic, TypeVar
from wsgiref.simple_server import WSGIServer

from prometheus_client import Counter, Gauge, Histogram, multiprocess, start_http_server

from app.core.statuses import JobStatus

# How late the scheduler queued a scheduled job or fired a schedule: its cycle is a second or so.
LAG_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600)
# A job's run time and a webhook attempt's: from a few milliseconds up to the longest timeouts allowed.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1500)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)
FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)

# --- seed 000's eight (CONTRACT.md "Metrics"): names and labels are fixed
JOBS_SUBMITTED = Counter("jobs_submitted", "Jobs saved by a submit.", ["job_type", "client_id", "priority"])
JOBS_COMPLETED = Counter("jobs_completed", "Jobs that reached a final status.", ["job_type", "status"])
JOB_DURATION = Histogram("job_duration_seconds", "The handler's run time.", ["job_type"], buckets=DURATION_BUCKETS)
JOB_RETRIES = Counter("job_retries", "Failed runs that were scheduled to run again.", ["job_type"])
JOBS_DEAD_LETTERED = Counter("jobs_dead_lettered", "Jobs moved to the dead-letter queue.", ["job_type"])
LIVE: Final = "liveall"  # several API processes: one sample per live process, labelled by its pid
CIRCUIT_BREAKER_STATE = Gauge(
    "circuit_breaker_state",
    "A job type's circuit: 0 closed, 1 open, 2 half-open.",
    ["task_type"],
    multiprocess_mode=LIVE,
)
RATE_LIMIT_REJECTED = Counter("rate_limit_rejected", "Submits refused with 429 (one per request).", ["client_id"])
WORKER_HEARTBEAT = Gauge(
    "worker_heartbeat_timestamp",
    "When a running worker of this process was last seen alive (Unix s).",
    ["worker_id"],
    multiprocess_mode=LIVE,
)

# --- the project's own
QUEUE_MESSAGES = Gauge(
    "queue_messages",
    "Messages in a queue: ready (broker) or unacked (here).",
    ["queue", "state"],
    multiprocess_mode=LIVE,
)
QUEUE_CONSUMERS = Gauge(
    "queue_consumers", "Consumers of a queue, as the broker counts them.", ["queue"], multiprocess_mode=LIVE
)
OUTBOX_BACKLOG = Gauge("outbox_backlog", "Outbox rows not yet published and confirmed.", multiprocess_mode=LIVE)
OUTBOX_OLDEST_AGE = Gauge(
    "outbox_oldest_age_seconds", "Age of the oldest outbox row (0 when there is none).", multiprocess_mode=LIVE
)
WEBHOOK_DELIVERIES = Counter("webhook_deliveries", "Webhook attempts by what came of them.", ["outcome"])
WEBHOOK_DURATION = Histogram(
    "webhook_delivery_duration_seconds", "One webhook attempt, request to response.", buckets=DURATION_BUCKETS
)
WEBHOOK_CIRCUITS_OPEN = Gauge(
    "webhook_circuits_open", "Webhook endpoints whose circuit is open or half-open.", multiprocess_mode=LIVE
)
GROUP_COMMIT_BATCH = Histogram(
    "group_commit_batch_size", "Items in one group-commit flush.", ["batcher"], buckets=BATCH_BUCKETS
)
GROUP_COMMIT_FLUSH = Histogram(
    "group_commit_flush_seconds", "How long one group-commit flush took.", ["batcher"], buckets=FLUSH_BUCKETS
)
SCHEDULED_WAITING = Gauge(
    "scheduled_jobs_waiting", "Jobs in `scheduled`, waiting for their time.", multiprocess_mode=LIVE
)
SCHEDULED_OVERDUE = Gauge(
    "scheduled_overdue_seconds",
    "How long past its time the most overdue scheduled job or active schedule still waits (0 when none).",
    multiprocess_mode=LIVE,
)
SCHEDULER_LAG = Histogram(
    "scheduler_lag_seconds",
    "From a scheduled job's time (or a schedule's firing time) to the scheduler queueing it.",
    ["source"],
    buckets=LAG_BUCKETS,
)
HELD_JOBS = Gauge(
    "held_jobs",
    "Jobs waiting in the database rather than in a lane, by why (`paused`: their job type is paused).",
    ["reason"],
    multiprocess_mode=LIVE,
)
JOBS_PRUNED = Counter(
    "jobs_pruned",
    "Finished jobs deleted by retention, with their audit rows, deliveries and artifacts.",
    ["status"],
)

# --- the API's requests, by route template (never the raw path: one series per route), method and status
HTTP_REQUESTS = Counter("http_requests", "HTTP requests answered.", ["handler", "method", "status"])
HTTP_DURATION = Histogram(
    "http_request_duration_seconds",
    "Seconds from a request's arrival to the start of its answer (a stream's life is not counted).",
    ["handler", "method", "status"],
)

BREAKER_VALUES = {"closed": 0, "open": 1, "half_open": 2}

M = TypeVar("M", Counter, Gauge, Histogram)


class Children(Generic[M]):
    """A metric's label children, each resolved by prometheus_client once and then looked up in a dict."""

    def __init__(self, metric: M) -> None:
        self._metric: M = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


submitted = Children(JOBS_SUBMITTED)
completed = Children(JOBS_COMPLETED)
duration = Children(JOB_DURATION)
retries = Children(JOB_RETRIES)
dead_lettered = Children(JOBS_DEAD_LETTERED)
rate_limited = Children(RATE_LIMIT_REJECTED)
deliveries = Children(WEBHOOK_DELIVERIES)
batch_sizes = Children(GROUP_COMMIT_BATCH)
flush_times = Children(GROUP_COMMIT_FLUSH)
scheduler_lag = Children(SCHEDULER_LAG)
http_requests = Children(HTTP_REQUESTS)
http_duration = Children(HTTP_DURATION)
DELAYED, RECURRING = "run_at", "schedule"  # scheduler_lag_seconds' sources


def count_submitted(jobs: Iterable[tuple[str, str, int]]) -> None:
    """Jobs one commit saved, as (job_type, client_id, priority): one add per distinct label set."""
    for (job_type, client_id, priority), n in Tally(jobs).items():
        submitted(job_type, client_id, str(priority)).inc(n)


def count_outcomes(outcomes: Iterable[tuple[str, str]]) -> None:
    """Recorded runs as (job_type, status): a retry, or a final status (dead-lettered counts twice, as seed 000)."""
    for (job_type, status), n in Tally(outcomes).items():
        if status == JobStatus.RETRYING:
            retries(job_type).inc(n)
            continue
        completed(job_type, status).inc(n)
        if status == JobStatus.DEAD_LETTERED:
            dead_lettered(job_type).inc(n)


def serve(port: int, host: str) -> WSGIServer | None:
    """Serve this process's metrics on `port` from a thread of their own (0: not at all); `shutdown()` stops it."""
    if port == 0:
        return None
    server, _ = start_http_server(port, addr=host)
    return server


def stop_serving(server: WSGIServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()


# --- several API processes sharing their values (see the module's docstring)
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
_LIVE_FILE = re.compile(r"^gauge_live\w+_(\d+)\.db$")


def shared_values_dir() -> Path | None:
    """Where the processes of this API share their values, when they do."""
    folder = os.environ.get(MULTIPROC_DIR)
    return Path(folder) if folder else None


def forget_dead_processes() -> None:
    """Drop the gauge samples of processes that are gone (killed before they could say so themselves)."""
    folder = shared_values_dir()
    if folder is None:
        return
    for path in folder.iterdir():
        if (match := _LIVE_FILE.match(path.name)) and not _alive(int(match.group(1))):
            multiprocess.mark_process_dead(int(match.group(1)), str(folder))  # type: ignore[no-untyped-call]


def leave() -> None:
    """This process stops: its gauge samples go; its counts stay in the sums."""
    if (folder := shared_values_dir()) is not None:
        multiprocess.mark_process_dead(os.getpid(), str(folder))  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
