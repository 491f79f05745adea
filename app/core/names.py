"""Every exchange, queue, routing key and Redis key, built from the namespace in one place."""

from dataclasses import dataclass
from enum import StrEnum

from app.core.backoff import Tier
from app.core.statuses import JobStatus


def event_type(status: str) -> str:
    """The type of the event that follows a job's change to `status` (pg_batch writes it in SQL alike)."""
    return f"job.{status}"


# The changes a client acts on, whose events an endpoint may subscribe to: a job's (an endpoint's default) and a
# workflow's end (docs/workflows.md), which an endpoint asks for by name.
SUBSCRIBABLE_STATUSES = (JobStatus.SUCCEEDED, JobStatus.DEAD_LETTERED, JobStatus.RETRYING, JobStatus.CANCELLED)
JOB_EVENTS = tuple(event_type(status) for status in SUBSCRIBABLE_STATUSES)
WORKFLOW_EVENTS = ("workflow.succeeded", "workflow.failed", "workflow.cancelled")
# A running job's progress report (docs/progress.md): not a status, an event an endpoint asks for by name.
PROGRESS = "progress"
PROGRESS_EVENT = event_type(PROGRESS)
SUBSCRIBABLE_EVENTS = (*JOB_EVENTS, PROGRESS_EVENT, *WORKFLOW_EVENTS)
TEST_EVENT = "webhook.test"


class Lane(StrEnum):
    CRITICAL = "critical"
    DEFAULT = "default"
    BULK = "bulk"


# Job priority 1 (most urgent) .. 10, split into lanes; inside a lane the broker's priority orders messages.
LANE_PRIORITIES: dict[Lane, range] = {
    Lane.CRITICAL: range(1, 4),
    Lane.DEFAULT: range(4, 8),
    Lane.BULK: range(8, 11),
}


def lane_of(priority: int) -> Lane:
    """The lane a job of this priority travels in."""
    for lane, priorities in LANE_PRIORITIES.items():
        if priority in priorities:
            return lane
    raise ValueError(f"priority must be 1..10, got {priority}")


def broker_priority(priority: int) -> int:
    """AMQP priority inside the lane: higher is more urgent, so the lane's most urgent job gets the top."""
    priorities = LANE_PRIORITIES[lane_of(priority)]
    return priorities.stop - priority


def lane_max_priority(lane: Lane) -> int:
    return len(LANE_PRIORITIES[lane])


@dataclass(frozen=True)
class Names:
    """Names for one deployment (or one test run), all prefixed by its namespace."""

    ns: str

    # -- jobs
    @property
    def jobs_exchange(self) -> str:
        return f"{self.ns}.jobs"

    def lane_queue(self, lane: Lane) -> str:
        return f"{self.ns}.jobs.{lane}"

    @staticmethod
    def lane_key(lane: Lane) -> str:
        return str(lane)

    @property
    def jobs_retry_exchange(self) -> str:
        return f"{self.ns}.jobs.retry"

    def job_tier_queue(self, lane: Lane, tier: Tier) -> str:
        # The TTL is in the name: redeclaring a queue with other arguments fails.
        return f"{self.ns}.jobs.{lane}.retry.{tier.ttl_ms}ms"

    @property
    def jobs_dlx(self) -> str:
        return f"{self.ns}.jobs.dlx"

    @property
    def jobs_dlq(self) -> str:
        return f"{self.ns}.jobs.dlq"

    # -- events
    @property
    def events_exchange(self) -> str:
        return f"{self.ns}.events"

    @staticmethod
    def event_key(job_type: str, status: str) -> str:
        return f"job.{job_type}.{status}"

    @staticmethod
    def workflow_event_key(status: str) -> str:
        return f"workflow.{status}"

    @property
    def all_events_key(self) -> str:
        """Every job event, whatever its type and status: what a live-status feed binds with."""
        return "job.#"

    @property
    def workflow_events_key(self) -> str:
        """Every workflow event: what a live-status feed and the webhook fan-out bind with besides."""
        return "workflow.*"

    def live_queue(self, token: str) -> str:
        """One API process's exclusive, auto-delete queue of job events for its live streams (not in the durable
        topology). Named here rather than by the server so a robust channel can declare it again on reconnect."""
        return f"{self.ns}.live.{token}"

    # -- worker control
    @property
    def control_exchange(self) -> str:
        """A fanout: every process binds one queue of its own and hears every stop and start, and every run to stop."""
        return f"{self.ns}.control"

    def control_queue(self, token: str) -> str:
        """One process's exclusive, auto-delete queue on the control exchange (not in the durable topology)."""
        return f"{self.ns}.control.{token}"

    # -- webhooks
    @property
    def webhooks_exchange(self) -> str:
        return f"{self.ns}.webhooks"

    @property
    def webhook_events_queue(self) -> str:
        """Job events waiting to be fanned out to endpoints."""
        return f"{self.ns}.webhooks.events"

    @property
    def webhook_deliver_queue(self) -> str:
        return f"{self.ns}.webhooks.deliver"

    @property
    def webhook_deliver_key(self) -> str:
        return "deliver"

    @property
    def webhooks_retry_exchange(self) -> str:
        return f"{self.ns}.webhooks.retry"

    def webhook_tier_queue(self, tier: Tier) -> str:
        return f"{self.ns}.webhooks.retry.{tier.ttl_ms}ms"

    @property
    def webhooks_dlx(self) -> str:
        return f"{self.ns}.webhooks.dlx"

    @property
    def webhooks_dlq(self) -> str:
        return f"{self.ns}.webhooks.dlq"

    # -- redis
    def job_lock_key(self, job_id: str) -> str:
        return f"{self.ns}:lock:job:{job_id}"

    def idempotency_key(self, client_id: str, key: str) -> str:
        return f"{self.ns}:idempotency:{client_id}:{key}"

    @property
    def api_keys_generation_key(self) -> str:
        """Bumped by every revocation: processes trust their cached keys only while it stays the same."""
        return f"{self.ns}:apikeys:generation"

    def rate_limit_key(self, client_id: str) -> str:
        return f"{self.ns}:ratelimit:{client_id}"

    def job_breaker_key(self, job_type: str) -> str:
        return f"{self.ns}:breaker:job:{job_type}"

    def job_probe_key(self, job_type: str) -> str:
        return f"{self.ns}:breaker:probe:{job_type}"

    def endpoint_breaker_key(self, endpoint_id: str) -> str:
        return f"{self.ns}:webhook:breaker:{endpoint_id}"

    def endpoint_probe_key(self, endpoint_id: str) -> str:
        return f"{self.ns}:webhook:probe:{endpoint_id}"

    def endpoint_inflight_key(self, endpoint_id: str) -> str:
        return f"{self.ns}:webhook:inflight:{endpoint_id}"

    @property
    def recent_logs_key(self) -> str:
        """Every process's latest warnings and errors, newest first."""
        return f"{self.ns}:logs:recent"

    @property
    def recent_info_logs_key(self) -> str:
        """Every process's latest records below WARNING (at its LOG_LEVEL), newest first: apart, so that a line per
        finished job never pushes a warning out."""
        return f"{self.ns}:logs:recent:info"

    @property
    def worker_processes_key(self) -> str:
        """A sorted set of the processes that heartbeat, scored by their last beat (epoch seconds)."""
        return f"{self.ns}:workers"

    def worker_process_key(self, process: str) -> str:
        """One process's latest heartbeat: its workers' reports, expiring unless beaten again."""
        return f"{self.ns}:workers:{process}"

    @property
    def worker_desired_key(self) -> str:
        """A hash of worker name -> the state an operator asked for (running or stopped), for every process."""
        return f"{self.ns}:worker_desired"

    @property
    def redis_prefix(self) -> str:
        return f"{self.ns}:"
