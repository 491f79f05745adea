"""Every operation of the API as a typed method, generated from its OpenAPI document by generate.py:
`Ops` for `Client`, `AsyncOps` for `AsyncClient`. Each sends its request through `_call` and reads the
answer into its model; an error answer raises `ApiError`."""

from collections.abc import Mapping
from typing import Any, cast

from taskq_client import models
from taskq_client._base import AsyncTransport, Op, SyncTransport

API_VERSION = "1.0.0"

READ_METRICS = Op("GET", "/metrics", str)
HEALTH = Op("GET", "/health", Any)
READY = Op("GET", "/ready", models.ReadyOut)
LIST_API_KEYS = Op("GET", "/api/v1/api-keys", list[models.ApiKeyOut])
CREATE_API_KEY = Op("POST", "/api/v1/api-keys", models.ApiKeyCreated)
REVOKE_API_KEY = Op("DELETE", "/api/v1/api-keys/{key_id}", None)
SUBMIT_JOB = Op("POST", "/api/v1/jobs", models.JobOut)
LIST_JOBS = Op("GET", "/api/v1/jobs", models.JobPage)
SUBMIT_BATCH = Op("POST", "/api/v1/jobs/batch", models.BatchOut)
BULK_ACTION = Op("POST", "/api/v1/jobs/bulk", models.BulkOut)
GET_JOB = Op("GET", "/api/v1/jobs/{job_id}", models.JobOut)
JOB_EVENTS = Op("GET", "/api/v1/jobs/{job_id}/events", list[models.JobEventOut])
JOB_LOGS = Op("GET", "/api/v1/jobs/{job_id}/logs", list[models.DeliveryOut])
CANCEL_JOB = Op("POST", "/api/v1/jobs/{job_id}/cancel", models.JobOut)
RETRY_JOB = Op("POST", "/api/v1/jobs/{job_id}/retry", models.JobOut)
JOB_ARTIFACT = Op("GET", "/api/v1/jobs/{job_id}/artifact", bytes)
JOB_CONCURRENCY = Op("GET", "/api/v1/jobs/{job_id}/concurrency", models.KeyStateOut)
CREATE_SCHEDULE = Op("POST", "/api/v1/schedules", models.ScheduleOut)
LIST_SCHEDULES = Op("GET", "/api/v1/schedules", models.SchedulePage)
GET_SCHEDULE = Op("GET", "/api/v1/schedules/{schedule_id}", models.ScheduleOut)
UPDATE_SCHEDULE = Op("PATCH", "/api/v1/schedules/{schedule_id}", models.ScheduleOut)
DELETE_SCHEDULE = Op("DELETE", "/api/v1/schedules/{schedule_id}", None)
TRIGGER_SCHEDULE = Op("POST", "/api/v1/schedules/{schedule_id}/trigger", models.JobOut)
LIST_WEBHOOKS = Op("GET", "/api/v1/webhooks", list[models.WebhookOut])
CREATE_WEBHOOK = Op("POST", "/api/v1/webhooks", models.WebhookCreated)
DEFAULT_SECRET = Op("GET", "/api/v1/webhooks/default-secret", models.SecretOut)
GET_WEBHOOK = Op("GET", "/api/v1/webhooks/{webhook_id}", models.WebhookOut)
UPDATE_WEBHOOK = Op("PATCH", "/api/v1/webhooks/{webhook_id}", models.WebhookOut)
DELETE_WEBHOOK = Op("DELETE", "/api/v1/webhooks/{webhook_id}", None)
ROTATE_SECRET = Op("POST", "/api/v1/webhooks/{webhook_id}/rotate-secret", models.SecretOut)
SEND_TEST = Op("POST", "/api/v1/webhooks/{webhook_id}/test", models.DeliveryQueued)
LIST_DELIVERIES = Op("GET", "/api/v1/webhooks/{webhook_id}/deliveries", list[models.DeliveryOut])
WEBHOOK_STATS = Op("GET", "/api/v1/webhooks/{webhook_id}/stats", models.WebhookStatsOut)
RECOVER = Op("POST", "/api/v1/webhooks/{webhook_id}/recover", models.RecoverOut)
REDELIVER = Op("POST", "/api/v1/deliveries/{delivery_id}/redeliver", models.DeliveryQueued)
LIST_EVENT_TYPES = Op("GET", "/api/v1/event-types", list[models.EventTypeOut])
START_REDRIVE = Op("POST", "/api/v1/dlq/redrives", models.RedriveOut)
LIST_REDRIVES = Op("GET", "/api/v1/dlq/redrives", models.RedrivePage)
GET_REDRIVE = Op("GET", "/api/v1/dlq/redrives/{redrive_id}", models.RedriveOut)
RETIME_REDRIVE = Op("PATCH", "/api/v1/dlq/redrives/{redrive_id}", models.RedriveOut)
PAUSE_REDRIVE = Op("POST", "/api/v1/dlq/redrives/{redrive_id}/pause", models.RedriveOut)
RESUME_REDRIVE = Op("POST", "/api/v1/dlq/redrives/{redrive_id}/resume", models.RedriveOut)
CANCEL_REDRIVE = Op("POST", "/api/v1/dlq/redrives/{redrive_id}/cancel", models.RedriveOut)
LIST_DEAD_JOBS = Op("GET", "/api/v1/dlq", models.DeadJobPage)
DLQ_STATS = Op("GET", "/api/v1/dlq/stats", models.DlqStats)
REPLAY = Op("POST", "/api/v1/dlq/replay", models.ReplayOut)
FAILURE_GROUPS = Op("GET", "/api/v1/dlq/groups", models.FailureGroupPage)
FAILURE_GROUP = Op("GET", "/api/v1/dlq/groups/{group_id}", models.FailureGroupOut)
REPLAY_ONE = Op("POST", "/api/v1/dlq/{job_id}/replay", models.JobOut)
LIST_CIRCUITS = Op("GET", "/api/v1/circuits", list[models.CircuitOut])
LIST_JOB_TYPES = Op("GET", "/api/v1/job-types", models.JobTypesOut)
PAUSE_JOB_TYPE = Op("POST", "/api/v1/job-types/{job_type}/pause", models.JobTypeOut)
RESUME_JOB_TYPE = Op("POST", "/api/v1/job-types/{job_type}/resume", models.JobTypeOut)
RECENT_LOGS = Op("GET", "/api/v1/logs", list[models.LogRecordOut])
LIST_WORKERS = Op("GET", "/api/v1/workers", models.WorkersOut)
GET_WORKER = Op("GET", "/api/v1/workers/{name}", models.WorkersOut)
STOP_WORKER = Op("POST", "/api/v1/workers/{name}/stop", models.AcceptedOut)
START_WORKER = Op("POST", "/api/v1/workers/{name}/start", models.AcceptedOut)
WHO_AM_I = Op("GET", "/api/v1/me", models.WhoAmIOut)
LIST_QUEUES = Op("GET", "/api/v1/queues", models.QueuesOut)
OVERVIEW = Op("GET", "/api/v1/overview", models.OverviewOut)
SUBMIT_WORKFLOW = Op("POST", "/api/v1/workflows", models.WorkflowOut)
LIST_WORKFLOWS = Op("GET", "/api/v1/workflows", models.WorkflowPage)
GET_WORKFLOW = Op("GET", "/api/v1/workflows/{workflow_id}", models.WorkflowOut)
CANCEL_WORKFLOW = Op("POST", "/api/v1/workflows/{workflow_id}/cancel", models.WorkflowOut)


class Ops(SyncTransport):
    def read_metrics(self, *, extra_query: Mapping[str, str] | None = None) -> str:
        """GET /metrics: Prometheus metrics (no auth)"""
        return cast("str", self._call(READ_METRICS, {}, {}, {}, None, extra_query))

    def health(self, *, extra_query: Mapping[str, str] | None = None) -> Any:
        """GET /health: The process is alive"""
        return cast("Any", self._call(HEALTH, {}, {}, {}, None, extra_query))

    def ready(self, *, extra_query: Mapping[str, str] | None = None) -> models.ReadyOut:
        """GET /ready: Each dependency and worker, and whether this process can serve"""
        return cast("models.ReadyOut", self._call(READY, {}, {}, {}, None, extra_query))

    def list_api_keys(self, *, extra_query: Mapping[str, str] | None = None) -> list[models.ApiKeyOut]:
        """GET /api/v1/api-keys: Every key, newest first, without the keys themselves"""
        return cast("list[models.ApiKeyOut]", self._call(LIST_API_KEYS, {}, {}, {}, None, extra_query))

    def create_api_key(
        self, body: models.ApiKeyCreate | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.ApiKeyCreated:
        """POST /api/v1/api-keys: Create a key for a client"""
        return cast("models.ApiKeyCreated", self._call(CREATE_API_KEY, {}, {}, {}, body, extra_query))

    def revoke_api_key(self, key_id: str, *, extra_query: Mapping[str, str] | None = None) -> None:
        """DELETE /api/v1/api-keys/{key_id}: Revoke a key"""
        self._call(REVOKE_API_KEY, {"key_id": key_id}, {}, {}, None, extra_query)

    def submit_job(
        self,
        body: models.JobRequest | Mapping[str, Any],
        *,
        wait: float | None = None,
        idempotency_key: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.JobOut:
        """POST /api/v1/jobs: Submit a job"""
        return cast(
            "models.JobOut",
            self._call(SUBMIT_JOB, {}, {"wait": wait}, {"idempotency-key": idempotency_key}, body, extra_query),
        )

    def list_jobs(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        status: str | None = None,
        job_type: str | None = None,
        id: str | None = None,
        request_id: str | None = None,
        idempotency_key: str | None = None,
        unique_key: str | None = None,
        concurrency_key: str | None = None,
        q: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.JobPage:
        """GET /api/v1/jobs: List Jobs"""
        return cast(
            "models.JobPage",
            self._call(
                LIST_JOBS,
                {},
                {
                    "limit": limit,
                    "cursor": cursor,
                    "status": status,
                    "job_type": job_type,
                    "id": id,
                    "request_id": request_id,
                    "idempotency_key": idempotency_key,
                    "unique_key": unique_key,
                    "concurrency_key": concurrency_key,
                    "q": q,
                },
                {},
                None,
                extra_query,
            ),
        )

    def submit_batch(
        self, body: Any | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.BatchOut:
        """POST /api/v1/jobs/batch: Submit 1-500 jobs at once, all or nothing"""
        return cast("models.BatchOut", self._call(SUBMIT_BATCH, {}, {}, {}, body, extra_query))

    def bulk_action(
        self, body: models.BulkIn | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.BulkOut:
        """POST /api/v1/jobs/bulk: Cancel or retry up to 500 jobs in one call"""
        return cast("models.BulkOut", self._call(BULK_ACTION, {}, {}, {}, body, extra_query))

    def get_job(
        self, job_id: str, *, wait: float | None = None, extra_query: Mapping[str, str] | None = None
    ) -> models.JobOut:
        """GET /api/v1/jobs/{job_id}: One job"""
        return cast("models.JobOut", self._call(GET_JOB, {"job_id": job_id}, {"wait": wait}, {}, None, extra_query))

    def job_events(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> list[models.JobEventOut]:
        """GET /api/v1/jobs/{job_id}/events: The job's audit trail, oldest first"""
        return cast("list[models.JobEventOut]", self._call(JOB_EVENTS, {"job_id": job_id}, {}, {}, None, extra_query))

    def job_logs(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> list[models.DeliveryOut]:
        """GET /api/v1/jobs/{job_id}/logs: Every webhook delivery of this job's events, each with every attempt"""
        return cast("list[models.DeliveryOut]", self._call(JOB_LOGS, {"job_id": job_id}, {}, {}, None, extra_query))

    def cancel_job(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.JobOut:
        """POST /api/v1/jobs/{job_id}/cancel: A pending, scheduled, waiting, queued or retrying job is cancelled at once (200)"""
        return cast("models.JobOut", self._call(CANCEL_JOB, {"job_id": job_id}, {}, {}, None, extra_query))

    def retry_job(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.JobOut:
        """POST /api/v1/jobs/{job_id}/retry: Replay a dead-lettered job"""
        return cast("models.JobOut", self._call(RETRY_JOB, {"job_id": job_id}, {}, {}, None, extra_query))

    def job_artifact(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> bytes:
        """GET /api/v1/jobs/{job_id}/artifact: The job's file, with its content type"""
        return cast("bytes", self._call(JOB_ARTIFACT, {"job_id": job_id}, {}, {}, None, extra_query))

    def job_concurrency(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.KeyStateOut:
        """GET /api/v1/jobs/{job_id}/concurrency: The job's concurrency key now"""
        return cast("models.KeyStateOut", self._call(JOB_CONCURRENCY, {"job_id": job_id}, {}, {}, None, extra_query))

    def create_schedule(
        self, body: models.ScheduleCreate | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.ScheduleOut:
        """POST /api/v1/schedules: Save a schedule"""
        return cast("models.ScheduleOut", self._call(CREATE_SCHEDULE, {}, {}, {}, body, extra_query))

    def list_schedules(
        self, *, limit: int | None = None, cursor: str | None = None, extra_query: Mapping[str, str] | None = None
    ) -> models.SchedulePage:
        """GET /api/v1/schedules: The caller's schedules, newest first, a page at a time"""
        return cast(
            "models.SchedulePage",
            self._call(LIST_SCHEDULES, {}, {"limit": limit, "cursor": cursor}, {}, None, extra_query),
        )

    def get_schedule(self, schedule_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.ScheduleOut:
        """GET /api/v1/schedules/{schedule_id}: Get Schedule"""
        return cast(
            "models.ScheduleOut", self._call(GET_SCHEDULE, {"schedule_id": schedule_id}, {}, {}, None, extra_query)
        )

    def update_schedule(
        self,
        schedule_id: str,
        body: models.ScheduleUpdate | Mapping[str, Any],
        *,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.ScheduleOut:
        """PATCH /api/v1/schedules/{schedule_id}: Change any field"""
        return cast(
            "models.ScheduleOut", self._call(UPDATE_SCHEDULE, {"schedule_id": schedule_id}, {}, {}, body, extra_query)
        )

    def delete_schedule(self, schedule_id: str, *, extra_query: Mapping[str, str] | None = None) -> None:
        """DELETE /api/v1/schedules/{schedule_id}: No further firing"""
        self._call(DELETE_SCHEDULE, {"schedule_id": schedule_id}, {}, {}, None, extra_query)

    def trigger_schedule(self, schedule_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.JobOut:
        """POST /api/v1/schedules/{schedule_id}/trigger: One run now, besides the cron's"""
        return cast(
            "models.JobOut", self._call(TRIGGER_SCHEDULE, {"schedule_id": schedule_id}, {}, {}, None, extra_query)
        )

    def list_webhooks(self, *, extra_query: Mapping[str, str] | None = None) -> list[models.WebhookOut]:
        """GET /api/v1/webhooks: List Webhooks"""
        return cast("list[models.WebhookOut]", self._call(LIST_WEBHOOKS, {}, {}, {}, None, extra_query))

    def create_webhook(
        self, body: models.WebhookCreate | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.WebhookCreated:
        """POST /api/v1/webhooks: Register an endpoint"""
        return cast("models.WebhookCreated", self._call(CREATE_WEBHOOK, {}, {}, {}, body, extra_query))

    def default_secret(self, *, extra_query: Mapping[str, str] | None = None) -> models.SecretOut:
        """GET /api/v1/webhooks/default-secret: The secret that signs deliveries to your jobs' `callback_url`"""
        return cast("models.SecretOut", self._call(DEFAULT_SECRET, {}, {}, {}, None, extra_query))

    def get_webhook(self, webhook_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.WebhookOut:
        """GET /api/v1/webhooks/{webhook_id}: Get Webhook"""
        return cast("models.WebhookOut", self._call(GET_WEBHOOK, {"webhook_id": webhook_id}, {}, {}, None, extra_query))

    def update_webhook(
        self,
        webhook_id: str,
        body: models.WebhookUpdate | Mapping[str, Any],
        *,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.WebhookOut:
        """PATCH /api/v1/webhooks/{webhook_id}: Change the URL, events, description, or switch it on or off (`active`)"""
        return cast(
            "models.WebhookOut", self._call(UPDATE_WEBHOOK, {"webhook_id": webhook_id}, {}, {}, body, extra_query)
        )

    def delete_webhook(self, webhook_id: str, *, extra_query: Mapping[str, str] | None = None) -> None:
        """DELETE /api/v1/webhooks/{webhook_id}: Nothing more is sent to it"""
        self._call(DELETE_WEBHOOK, {"webhook_id": webhook_id}, {}, {}, None, extra_query)

    def rotate_secret(self, webhook_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.SecretOut:
        """POST /api/v1/webhooks/{webhook_id}/rotate-secret: A new secret"""
        return cast(
            "models.SecretOut", self._call(ROTATE_SECRET, {"webhook_id": webhook_id}, {}, {}, None, extra_query)
        )

    def send_test(self, webhook_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.DeliveryQueued:
        """POST /api/v1/webhooks/{webhook_id}/test: Send a `webhook.test` event to the endpoint now"""
        return cast(
            "models.DeliveryQueued", self._call(SEND_TEST, {"webhook_id": webhook_id}, {}, {}, None, extra_query)
        )

    def list_deliveries(
        self,
        webhook_id: str,
        *,
        status: str | None = None,
        event_type: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> list[models.DeliveryOut]:
        """GET /api/v1/webhooks/{webhook_id}/deliveries: The endpoint's deliveries, each with every attempt"""
        return cast(
            "list[models.DeliveryOut]",
            self._call(
                LIST_DELIVERIES,
                {"webhook_id": webhook_id},
                {
                    "status": status,
                    "event_type": event_type,
                    "since": since,
                    "until": until,
                    "limit": limit,
                    "cursor": cursor,
                },
                {},
                None,
                extra_query,
            ),
        )

    def webhook_stats(
        self, webhook_id: str, *, window: str | None = None, extra_query: Mapping[str, str] | None = None
    ) -> models.WebhookStatsOut:
        """GET /api/v1/webhooks/{webhook_id}/stats: The endpoint's health"""
        return cast(
            "models.WebhookStatsOut",
            self._call(WEBHOOK_STATS, {"webhook_id": webhook_id}, {"window": window}, {}, None, extra_query),
        )

    def recover(
        self,
        webhook_id: str,
        body: models.RecoverIn | Mapping[str, Any],
        *,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.RecoverOut:
        """POST /api/v1/webhooks/{webhook_id}/recover: Recover"""
        return cast("models.RecoverOut", self._call(RECOVER, {"webhook_id": webhook_id}, {}, {}, body, extra_query))

    def redeliver(self, delivery_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.DeliveryQueued:
        """POST /api/v1/deliveries/{delivery_id}/redeliver: Redeliver"""
        return cast(
            "models.DeliveryQueued", self._call(REDELIVER, {"delivery_id": delivery_id}, {}, {}, None, extra_query)
        )

    def list_event_types(self, *, extra_query: Mapping[str, str] | None = None) -> list[models.EventTypeOut]:
        """GET /api/v1/event-types: Every event type an endpoint may receive"""
        return cast("list[models.EventTypeOut]", self._call(LIST_EVENT_TYPES, {}, {}, {}, None, extra_query))

    def start_redrive(
        self, body: models.RedriveIn | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.RedriveOut:
        """POST /api/v1/dlq/redrives: Start a throttled redrive"""
        return cast("models.RedriveOut", self._call(START_REDRIVE, {}, {}, {}, body, extra_query))

    def list_redrives(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.RedrivePage:
        """GET /api/v1/dlq/redrives: List redrives"""
        return cast(
            "models.RedrivePage",
            self._call(LIST_REDRIVES, {}, {"status": status, "limit": limit, "cursor": cursor}, {}, None, extra_query),
        )

    def get_redrive(self, redrive_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.RedriveOut:
        """GET /api/v1/dlq/redrives/{redrive_id}: One redrive"""
        return cast("models.RedriveOut", self._call(GET_REDRIVE, {"redrive_id": redrive_id}, {}, {}, None, extra_query))

    def retime_redrive(
        self,
        redrive_id: str,
        body: models.RedrivePace | Mapping[str, Any],
        *,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.RedriveOut:
        """PATCH /api/v1/dlq/redrives/{redrive_id}: Change a redrive's pace"""
        return cast(
            "models.RedriveOut", self._call(RETIME_REDRIVE, {"redrive_id": redrive_id}, {}, {}, body, extra_query)
        )

    def pause_redrive(self, redrive_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.RedriveOut:
        """POST /api/v1/dlq/redrives/{redrive_id}/pause: Pause a redrive"""
        return cast(
            "models.RedriveOut", self._call(PAUSE_REDRIVE, {"redrive_id": redrive_id}, {}, {}, None, extra_query)
        )

    def resume_redrive(self, redrive_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.RedriveOut:
        """POST /api/v1/dlq/redrives/{redrive_id}/resume: Resume a paused redrive"""
        return cast(
            "models.RedriveOut", self._call(RESUME_REDRIVE, {"redrive_id": redrive_id}, {}, {}, None, extra_query)
        )

    def cancel_redrive(self, redrive_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.RedriveOut:
        """POST /api/v1/dlq/redrives/{redrive_id}/cancel: Cancel a redrive"""
        return cast(
            "models.RedriveOut", self._call(CANCEL_REDRIVE, {"redrive_id": redrive_id}, {}, {}, None, extra_query)
        )

    def list_dead_jobs(
        self,
        *,
        job_type: str | None = None,
        group: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.DeadJobPage:
        """GET /api/v1/dlq: Dead-lettered jobs, newest first, with the reason, attempts and last error"""
        return cast(
            "models.DeadJobPage",
            self._call(
                LIST_DEAD_JOBS,
                {},
                {"job_type": job_type, "group": group, "limit": limit, "cursor": cursor},
                {},
                None,
                extra_query,
            ),
        )

    def dlq_stats(self, *, extra_query: Mapping[str, str] | None = None) -> models.DlqStats:
        """GET /api/v1/dlq/stats: Counts of your dead-lettered jobs"""
        return cast("models.DlqStats", self._call(DLQ_STATS, {}, {}, {}, None, extra_query))

    def replay(
        self, body: models.ReplayIn | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.ReplayOut:
        """POST /api/v1/dlq/replay: Send dead jobs back to work, oldest first"""
        return cast("models.ReplayOut", self._call(REPLAY, {}, {}, {}, body, extra_query))

    def failure_groups(
        self,
        *,
        job_type: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.FailureGroupPage:
        """GET /api/v1/dlq/groups: Dead jobs grouped by failure, biggest group first"""
        return cast(
            "models.FailureGroupPage",
            self._call(
                FAILURE_GROUPS, {}, {"job_type": job_type, "limit": limit, "cursor": cursor}, {}, None, extra_query
            ),
        )

    def failure_group(self, group_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.FailureGroupOut:
        """GET /api/v1/dlq/groups/{group_id}: One failure group of your dead jobs"""
        return cast(
            "models.FailureGroupOut", self._call(FAILURE_GROUP, {"group_id": group_id}, {}, {}, None, extra_query)
        )

    def replay_one(
        self, job_id: str, body: Any | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.JobOut:
        """POST /api/v1/dlq/{job_id}/replay: Send one dead job back to work"""
        return cast("models.JobOut", self._call(REPLAY_ONE, {"job_id": job_id}, {}, {}, body, extra_query))

    def list_circuits(self, *, extra_query: Mapping[str, str] | None = None) -> list[models.CircuitOut]:
        """GET /api/v1/circuits: Each job type's breaker"""
        return cast("list[models.CircuitOut]", self._call(LIST_CIRCUITS, {}, {}, {}, None, extra_query))

    def list_job_types(self, *, extra_query: Mapping[str, str] | None = None) -> models.JobTypesOut:
        """GET /api/v1/job-types: List Job Types"""
        return cast("models.JobTypesOut", self._call(LIST_JOB_TYPES, {}, {}, {}, None, extra_query))

    def pause_job_type(self, job_type: str, *, extra_query: Mapping[str, str] | None = None) -> models.JobTypeOut:
        """POST /api/v1/job-types/{job_type}/pause: Pause a job type in every process"""
        return cast("models.JobTypeOut", self._call(PAUSE_JOB_TYPE, {"job_type": job_type}, {}, {}, None, extra_query))

    def resume_job_type(self, job_type: str, *, extra_query: Mapping[str, str] | None = None) -> models.JobTypeOut:
        """POST /api/v1/job-types/{job_type}/resume: Resume a paused job type"""
        return cast("models.JobTypeOut", self._call(RESUME_JOB_TYPE, {"job_type": job_type}, {}, {}, None, extra_query))

    def recent_logs(
        self, *, level: str | None = None, limit: int | None = None, extra_query: Mapping[str, str] | None = None
    ) -> list[models.LogRecordOut]:
        """GET /api/v1/logs: Recent warnings and errors of every process"""
        return cast(
            "list[models.LogRecordOut]",
            self._call(RECENT_LOGS, {}, {"level": level, "limit": limit}, {}, None, extra_query),
        )

    def list_workers(self, *, extra_query: Mapping[str, str] | None = None) -> models.WorkersOut:
        """GET /api/v1/workers: Every worker of every live process"""
        return cast("models.WorkersOut", self._call(LIST_WORKERS, {}, {}, {}, None, extra_query))

    def get_worker(self, name: str, *, extra_query: Mapping[str, str] | None = None) -> models.WorkersOut:
        """GET /api/v1/workers/{name}: One worker's entries, one per process"""
        return cast("models.WorkersOut", self._call(GET_WORKER, {"name": name}, {}, {}, None, extra_query))

    def stop_worker(self, name: str, *, extra_query: Mapping[str, str] | None = None) -> models.AcceptedOut:
        """POST /api/v1/workers/{name}/stop: Stop a worker in every process"""
        return cast("models.AcceptedOut", self._call(STOP_WORKER, {"name": name}, {}, {}, None, extra_query))

    def start_worker(self, name: str, *, extra_query: Mapping[str, str] | None = None) -> models.AcceptedOut:
        """POST /api/v1/workers/{name}/start: Start a stopped worker in every process"""
        return cast("models.AcceptedOut", self._call(START_WORKER, {"name": name}, {}, {}, None, extra_query))

    def who_am_i(self, *, extra_query: Mapping[str, str] | None = None) -> models.WhoAmIOut:
        """GET /api/v1/me: The client the key belongs to"""
        return cast("models.WhoAmIOut", self._call(WHO_AM_I, {}, {}, {}, None, extra_query))

    def list_queues(self, *, extra_query: Mapping[str, str] | None = None) -> models.QueuesOut:
        """GET /api/v1/queues: Ready messages and consumers of every queue"""
        return cast("models.QueuesOut", self._call(LIST_QUEUES, {}, {}, {}, None, extra_query))

    def overview(self, *, extra_query: Mapping[str, str] | None = None) -> models.OverviewOut:
        """GET /api/v1/overview: Jobs by status and type, the last hour, the DLQ"""
        return cast("models.OverviewOut", self._call(OVERVIEW, {}, {}, {}, None, extra_query))

    def submit_workflow(
        self, body: Any | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.WorkflowOut:
        """POST /api/v1/workflows: Submit 1-500 jobs that depend on one another, all or nothing"""
        return cast("models.WorkflowOut", self._call(SUBMIT_WORKFLOW, {}, {}, {}, body, extra_query))

    def list_workflows(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.WorkflowPage:
        """GET /api/v1/workflows: List Workflows"""
        return cast(
            "models.WorkflowPage",
            self._call(LIST_WORKFLOWS, {}, {"status": status, "limit": limit, "cursor": cursor}, {}, None, extra_query),
        )

    def get_workflow(self, workflow_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.WorkflowOut:
        """GET /api/v1/workflows/{workflow_id}: One workflow with its jobs, each with the refs it depends on"""
        return cast(
            "models.WorkflowOut", self._call(GET_WORKFLOW, {"workflow_id": workflow_id}, {}, {}, None, extra_query)
        )

    def cancel_workflow(self, workflow_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.WorkflowOut:
        """POST /api/v1/workflows/{workflow_id}/cancel: Cancel Workflow"""
        return cast(
            "models.WorkflowOut", self._call(CANCEL_WORKFLOW, {"workflow_id": workflow_id}, {}, {}, None, extra_query)
        )


class AsyncOps(AsyncTransport):
    async def read_metrics(self, *, extra_query: Mapping[str, str] | None = None) -> str:
        """GET /metrics: Prometheus metrics (no auth)"""
        return cast("str", await self._call(READ_METRICS, {}, {}, {}, None, extra_query))

    async def health(self, *, extra_query: Mapping[str, str] | None = None) -> Any:
        """GET /health: The process is alive"""
        return cast("Any", await self._call(HEALTH, {}, {}, {}, None, extra_query))

    async def ready(self, *, extra_query: Mapping[str, str] | None = None) -> models.ReadyOut:
        """GET /ready: Each dependency and worker, and whether this process can serve"""
        return cast("models.ReadyOut", await self._call(READY, {}, {}, {}, None, extra_query))

    async def list_api_keys(self, *, extra_query: Mapping[str, str] | None = None) -> list[models.ApiKeyOut]:
        """GET /api/v1/api-keys: Every key, newest first, without the keys themselves"""
        return cast("list[models.ApiKeyOut]", await self._call(LIST_API_KEYS, {}, {}, {}, None, extra_query))

    async def create_api_key(
        self, body: models.ApiKeyCreate | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.ApiKeyCreated:
        """POST /api/v1/api-keys: Create a key for a client"""
        return cast("models.ApiKeyCreated", await self._call(CREATE_API_KEY, {}, {}, {}, body, extra_query))

    async def revoke_api_key(self, key_id: str, *, extra_query: Mapping[str, str] | None = None) -> None:
        """DELETE /api/v1/api-keys/{key_id}: Revoke a key"""
        await self._call(REVOKE_API_KEY, {"key_id": key_id}, {}, {}, None, extra_query)

    async def submit_job(
        self,
        body: models.JobRequest | Mapping[str, Any],
        *,
        wait: float | None = None,
        idempotency_key: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.JobOut:
        """POST /api/v1/jobs: Submit a job"""
        return cast(
            "models.JobOut",
            await self._call(SUBMIT_JOB, {}, {"wait": wait}, {"idempotency-key": idempotency_key}, body, extra_query),
        )

    async def list_jobs(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        status: str | None = None,
        job_type: str | None = None,
        id: str | None = None,
        request_id: str | None = None,
        idempotency_key: str | None = None,
        unique_key: str | None = None,
        concurrency_key: str | None = None,
        q: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.JobPage:
        """GET /api/v1/jobs: List Jobs"""
        return cast(
            "models.JobPage",
            await self._call(
                LIST_JOBS,
                {},
                {
                    "limit": limit,
                    "cursor": cursor,
                    "status": status,
                    "job_type": job_type,
                    "id": id,
                    "request_id": request_id,
                    "idempotency_key": idempotency_key,
                    "unique_key": unique_key,
                    "concurrency_key": concurrency_key,
                    "q": q,
                },
                {},
                None,
                extra_query,
            ),
        )

    async def submit_batch(
        self, body: Any | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.BatchOut:
        """POST /api/v1/jobs/batch: Submit 1-500 jobs at once, all or nothing"""
        return cast("models.BatchOut", await self._call(SUBMIT_BATCH, {}, {}, {}, body, extra_query))

    async def bulk_action(
        self, body: models.BulkIn | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.BulkOut:
        """POST /api/v1/jobs/bulk: Cancel or retry up to 500 jobs in one call"""
        return cast("models.BulkOut", await self._call(BULK_ACTION, {}, {}, {}, body, extra_query))

    async def get_job(
        self, job_id: str, *, wait: float | None = None, extra_query: Mapping[str, str] | None = None
    ) -> models.JobOut:
        """GET /api/v1/jobs/{job_id}: One job"""
        return cast(
            "models.JobOut", await self._call(GET_JOB, {"job_id": job_id}, {"wait": wait}, {}, None, extra_query)
        )

    async def job_events(
        self, job_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> list[models.JobEventOut]:
        """GET /api/v1/jobs/{job_id}/events: The job's audit trail, oldest first"""
        return cast(
            "list[models.JobEventOut]", await self._call(JOB_EVENTS, {"job_id": job_id}, {}, {}, None, extra_query)
        )

    async def job_logs(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> list[models.DeliveryOut]:
        """GET /api/v1/jobs/{job_id}/logs: Every webhook delivery of this job's events, each with every attempt"""
        return cast(
            "list[models.DeliveryOut]", await self._call(JOB_LOGS, {"job_id": job_id}, {}, {}, None, extra_query)
        )

    async def cancel_job(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.JobOut:
        """POST /api/v1/jobs/{job_id}/cancel: A pending, scheduled, waiting, queued or retrying job is cancelled at once (200)"""
        return cast("models.JobOut", await self._call(CANCEL_JOB, {"job_id": job_id}, {}, {}, None, extra_query))

    async def retry_job(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.JobOut:
        """POST /api/v1/jobs/{job_id}/retry: Replay a dead-lettered job"""
        return cast("models.JobOut", await self._call(RETRY_JOB, {"job_id": job_id}, {}, {}, None, extra_query))

    async def job_artifact(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> bytes:
        """GET /api/v1/jobs/{job_id}/artifact: The job's file, with its content type"""
        return cast("bytes", await self._call(JOB_ARTIFACT, {"job_id": job_id}, {}, {}, None, extra_query))

    async def job_concurrency(self, job_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.KeyStateOut:
        """GET /api/v1/jobs/{job_id}/concurrency: The job's concurrency key now"""
        return cast(
            "models.KeyStateOut", await self._call(JOB_CONCURRENCY, {"job_id": job_id}, {}, {}, None, extra_query)
        )

    async def create_schedule(
        self, body: models.ScheduleCreate | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.ScheduleOut:
        """POST /api/v1/schedules: Save a schedule"""
        return cast("models.ScheduleOut", await self._call(CREATE_SCHEDULE, {}, {}, {}, body, extra_query))

    async def list_schedules(
        self, *, limit: int | None = None, cursor: str | None = None, extra_query: Mapping[str, str] | None = None
    ) -> models.SchedulePage:
        """GET /api/v1/schedules: The caller's schedules, newest first, a page at a time"""
        return cast(
            "models.SchedulePage",
            await self._call(LIST_SCHEDULES, {}, {"limit": limit, "cursor": cursor}, {}, None, extra_query),
        )

    async def get_schedule(
        self, schedule_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.ScheduleOut:
        """GET /api/v1/schedules/{schedule_id}: Get Schedule"""
        return cast(
            "models.ScheduleOut",
            await self._call(GET_SCHEDULE, {"schedule_id": schedule_id}, {}, {}, None, extra_query),
        )

    async def update_schedule(
        self,
        schedule_id: str,
        body: models.ScheduleUpdate | Mapping[str, Any],
        *,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.ScheduleOut:
        """PATCH /api/v1/schedules/{schedule_id}: Change any field"""
        return cast(
            "models.ScheduleOut",
            await self._call(UPDATE_SCHEDULE, {"schedule_id": schedule_id}, {}, {}, body, extra_query),
        )

    async def delete_schedule(self, schedule_id: str, *, extra_query: Mapping[str, str] | None = None) -> None:
        """DELETE /api/v1/schedules/{schedule_id}: No further firing"""
        await self._call(DELETE_SCHEDULE, {"schedule_id": schedule_id}, {}, {}, None, extra_query)

    async def trigger_schedule(
        self, schedule_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.JobOut:
        """POST /api/v1/schedules/{schedule_id}/trigger: One run now, besides the cron's"""
        return cast(
            "models.JobOut", await self._call(TRIGGER_SCHEDULE, {"schedule_id": schedule_id}, {}, {}, None, extra_query)
        )

    async def list_webhooks(self, *, extra_query: Mapping[str, str] | None = None) -> list[models.WebhookOut]:
        """GET /api/v1/webhooks: List Webhooks"""
        return cast("list[models.WebhookOut]", await self._call(LIST_WEBHOOKS, {}, {}, {}, None, extra_query))

    async def create_webhook(
        self, body: models.WebhookCreate | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.WebhookCreated:
        """POST /api/v1/webhooks: Register an endpoint"""
        return cast("models.WebhookCreated", await self._call(CREATE_WEBHOOK, {}, {}, {}, body, extra_query))

    async def default_secret(self, *, extra_query: Mapping[str, str] | None = None) -> models.SecretOut:
        """GET /api/v1/webhooks/default-secret: The secret that signs deliveries to your jobs' `callback_url`"""
        return cast("models.SecretOut", await self._call(DEFAULT_SECRET, {}, {}, {}, None, extra_query))

    async def get_webhook(self, webhook_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.WebhookOut:
        """GET /api/v1/webhooks/{webhook_id}: Get Webhook"""
        return cast(
            "models.WebhookOut", await self._call(GET_WEBHOOK, {"webhook_id": webhook_id}, {}, {}, None, extra_query)
        )

    async def update_webhook(
        self,
        webhook_id: str,
        body: models.WebhookUpdate | Mapping[str, Any],
        *,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.WebhookOut:
        """PATCH /api/v1/webhooks/{webhook_id}: Change the URL, events, description, or switch it on or off (`active`)"""
        return cast(
            "models.WebhookOut", await self._call(UPDATE_WEBHOOK, {"webhook_id": webhook_id}, {}, {}, body, extra_query)
        )

    async def delete_webhook(self, webhook_id: str, *, extra_query: Mapping[str, str] | None = None) -> None:
        """DELETE /api/v1/webhooks/{webhook_id}: Nothing more is sent to it"""
        await self._call(DELETE_WEBHOOK, {"webhook_id": webhook_id}, {}, {}, None, extra_query)

    async def rotate_secret(self, webhook_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.SecretOut:
        """POST /api/v1/webhooks/{webhook_id}/rotate-secret: A new secret"""
        return cast(
            "models.SecretOut", await self._call(ROTATE_SECRET, {"webhook_id": webhook_id}, {}, {}, None, extra_query)
        )

    async def send_test(
        self, webhook_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.DeliveryQueued:
        """POST /api/v1/webhooks/{webhook_id}/test: Send a `webhook.test` event to the endpoint now"""
        return cast(
            "models.DeliveryQueued", await self._call(SEND_TEST, {"webhook_id": webhook_id}, {}, {}, None, extra_query)
        )

    async def list_deliveries(
        self,
        webhook_id: str,
        *,
        status: str | None = None,
        event_type: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> list[models.DeliveryOut]:
        """GET /api/v1/webhooks/{webhook_id}/deliveries: The endpoint's deliveries, each with every attempt"""
        return cast(
            "list[models.DeliveryOut]",
            await self._call(
                LIST_DELIVERIES,
                {"webhook_id": webhook_id},
                {
                    "status": status,
                    "event_type": event_type,
                    "since": since,
                    "until": until,
                    "limit": limit,
                    "cursor": cursor,
                },
                {},
                None,
                extra_query,
            ),
        )

    async def webhook_stats(
        self, webhook_id: str, *, window: str | None = None, extra_query: Mapping[str, str] | None = None
    ) -> models.WebhookStatsOut:
        """GET /api/v1/webhooks/{webhook_id}/stats: The endpoint's health"""
        return cast(
            "models.WebhookStatsOut",
            await self._call(WEBHOOK_STATS, {"webhook_id": webhook_id}, {"window": window}, {}, None, extra_query),
        )

    async def recover(
        self,
        webhook_id: str,
        body: models.RecoverIn | Mapping[str, Any],
        *,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.RecoverOut:
        """POST /api/v1/webhooks/{webhook_id}/recover: Recover"""
        return cast(
            "models.RecoverOut", await self._call(RECOVER, {"webhook_id": webhook_id}, {}, {}, body, extra_query)
        )

    async def redeliver(
        self, delivery_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.DeliveryQueued:
        """POST /api/v1/deliveries/{delivery_id}/redeliver: Redeliver"""
        return cast(
            "models.DeliveryQueued",
            await self._call(REDELIVER, {"delivery_id": delivery_id}, {}, {}, None, extra_query),
        )

    async def list_event_types(self, *, extra_query: Mapping[str, str] | None = None) -> list[models.EventTypeOut]:
        """GET /api/v1/event-types: Every event type an endpoint may receive"""
        return cast("list[models.EventTypeOut]", await self._call(LIST_EVENT_TYPES, {}, {}, {}, None, extra_query))

    async def start_redrive(
        self, body: models.RedriveIn | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.RedriveOut:
        """POST /api/v1/dlq/redrives: Start a throttled redrive"""
        return cast("models.RedriveOut", await self._call(START_REDRIVE, {}, {}, {}, body, extra_query))

    async def list_redrives(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.RedrivePage:
        """GET /api/v1/dlq/redrives: List redrives"""
        return cast(
            "models.RedrivePage",
            await self._call(
                LIST_REDRIVES, {}, {"status": status, "limit": limit, "cursor": cursor}, {}, None, extra_query
            ),
        )

    async def get_redrive(self, redrive_id: str, *, extra_query: Mapping[str, str] | None = None) -> models.RedriveOut:
        """GET /api/v1/dlq/redrives/{redrive_id}: One redrive"""
        return cast(
            "models.RedriveOut", await self._call(GET_REDRIVE, {"redrive_id": redrive_id}, {}, {}, None, extra_query)
        )

    async def retime_redrive(
        self,
        redrive_id: str,
        body: models.RedrivePace | Mapping[str, Any],
        *,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.RedriveOut:
        """PATCH /api/v1/dlq/redrives/{redrive_id}: Change a redrive's pace"""
        return cast(
            "models.RedriveOut", await self._call(RETIME_REDRIVE, {"redrive_id": redrive_id}, {}, {}, body, extra_query)
        )

    async def pause_redrive(
        self, redrive_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.RedriveOut:
        """POST /api/v1/dlq/redrives/{redrive_id}/pause: Pause a redrive"""
        return cast(
            "models.RedriveOut", await self._call(PAUSE_REDRIVE, {"redrive_id": redrive_id}, {}, {}, None, extra_query)
        )

    async def resume_redrive(
        self, redrive_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.RedriveOut:
        """POST /api/v1/dlq/redrives/{redrive_id}/resume: Resume a paused redrive"""
        return cast(
            "models.RedriveOut", await self._call(RESUME_REDRIVE, {"redrive_id": redrive_id}, {}, {}, None, extra_query)
        )

    async def cancel_redrive(
        self, redrive_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.RedriveOut:
        """POST /api/v1/dlq/redrives/{redrive_id}/cancel: Cancel a redrive"""
        return cast(
            "models.RedriveOut", await self._call(CANCEL_REDRIVE, {"redrive_id": redrive_id}, {}, {}, None, extra_query)
        )

    async def list_dead_jobs(
        self,
        *,
        job_type: str | None = None,
        group: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.DeadJobPage:
        """GET /api/v1/dlq: Dead-lettered jobs, newest first, with the reason, attempts and last error"""
        return cast(
            "models.DeadJobPage",
            await self._call(
                LIST_DEAD_JOBS,
                {},
                {"job_type": job_type, "group": group, "limit": limit, "cursor": cursor},
                {},
                None,
                extra_query,
            ),
        )

    async def dlq_stats(self, *, extra_query: Mapping[str, str] | None = None) -> models.DlqStats:
        """GET /api/v1/dlq/stats: Counts of your dead-lettered jobs"""
        return cast("models.DlqStats", await self._call(DLQ_STATS, {}, {}, {}, None, extra_query))

    async def replay(
        self, body: models.ReplayIn | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.ReplayOut:
        """POST /api/v1/dlq/replay: Send dead jobs back to work, oldest first"""
        return cast("models.ReplayOut", await self._call(REPLAY, {}, {}, {}, body, extra_query))

    async def failure_groups(
        self,
        *,
        job_type: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.FailureGroupPage:
        """GET /api/v1/dlq/groups: Dead jobs grouped by failure, biggest group first"""
        return cast(
            "models.FailureGroupPage",
            await self._call(
                FAILURE_GROUPS, {}, {"job_type": job_type, "limit": limit, "cursor": cursor}, {}, None, extra_query
            ),
        )

    async def failure_group(
        self, group_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.FailureGroupOut:
        """GET /api/v1/dlq/groups/{group_id}: One failure group of your dead jobs"""
        return cast(
            "models.FailureGroupOut", await self._call(FAILURE_GROUP, {"group_id": group_id}, {}, {}, None, extra_query)
        )

    async def replay_one(
        self, job_id: str, body: Any | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.JobOut:
        """POST /api/v1/dlq/{job_id}/replay: Send one dead job back to work"""
        return cast("models.JobOut", await self._call(REPLAY_ONE, {"job_id": job_id}, {}, {}, body, extra_query))

    async def list_circuits(self, *, extra_query: Mapping[str, str] | None = None) -> list[models.CircuitOut]:
        """GET /api/v1/circuits: Each job type's breaker"""
        return cast("list[models.CircuitOut]", await self._call(LIST_CIRCUITS, {}, {}, {}, None, extra_query))

    async def list_job_types(self, *, extra_query: Mapping[str, str] | None = None) -> models.JobTypesOut:
        """GET /api/v1/job-types: List Job Types"""
        return cast("models.JobTypesOut", await self._call(LIST_JOB_TYPES, {}, {}, {}, None, extra_query))

    async def pause_job_type(self, job_type: str, *, extra_query: Mapping[str, str] | None = None) -> models.JobTypeOut:
        """POST /api/v1/job-types/{job_type}/pause: Pause a job type in every process"""
        return cast(
            "models.JobTypeOut", await self._call(PAUSE_JOB_TYPE, {"job_type": job_type}, {}, {}, None, extra_query)
        )

    async def resume_job_type(
        self, job_type: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.JobTypeOut:
        """POST /api/v1/job-types/{job_type}/resume: Resume a paused job type"""
        return cast(
            "models.JobTypeOut", await self._call(RESUME_JOB_TYPE, {"job_type": job_type}, {}, {}, None, extra_query)
        )

    async def recent_logs(
        self, *, level: str | None = None, limit: int | None = None, extra_query: Mapping[str, str] | None = None
    ) -> list[models.LogRecordOut]:
        """GET /api/v1/logs: Recent warnings and errors of every process"""
        return cast(
            "list[models.LogRecordOut]",
            await self._call(RECENT_LOGS, {}, {"level": level, "limit": limit}, {}, None, extra_query),
        )

    async def list_workers(self, *, extra_query: Mapping[str, str] | None = None) -> models.WorkersOut:
        """GET /api/v1/workers: Every worker of every live process"""
        return cast("models.WorkersOut", await self._call(LIST_WORKERS, {}, {}, {}, None, extra_query))

    async def get_worker(self, name: str, *, extra_query: Mapping[str, str] | None = None) -> models.WorkersOut:
        """GET /api/v1/workers/{name}: One worker's entries, one per process"""
        return cast("models.WorkersOut", await self._call(GET_WORKER, {"name": name}, {}, {}, None, extra_query))

    async def stop_worker(self, name: str, *, extra_query: Mapping[str, str] | None = None) -> models.AcceptedOut:
        """POST /api/v1/workers/{name}/stop: Stop a worker in every process"""
        return cast("models.AcceptedOut", await self._call(STOP_WORKER, {"name": name}, {}, {}, None, extra_query))

    async def start_worker(self, name: str, *, extra_query: Mapping[str, str] | None = None) -> models.AcceptedOut:
        """POST /api/v1/workers/{name}/start: Start a stopped worker in every process"""
        return cast("models.AcceptedOut", await self._call(START_WORKER, {"name": name}, {}, {}, None, extra_query))

    async def who_am_i(self, *, extra_query: Mapping[str, str] | None = None) -> models.WhoAmIOut:
        """GET /api/v1/me: The client the key belongs to"""
        return cast("models.WhoAmIOut", await self._call(WHO_AM_I, {}, {}, {}, None, extra_query))

    async def list_queues(self, *, extra_query: Mapping[str, str] | None = None) -> models.QueuesOut:
        """GET /api/v1/queues: Ready messages and consumers of every queue"""
        return cast("models.QueuesOut", await self._call(LIST_QUEUES, {}, {}, {}, None, extra_query))

    async def overview(self, *, extra_query: Mapping[str, str] | None = None) -> models.OverviewOut:
        """GET /api/v1/overview: Jobs by status and type, the last hour, the DLQ"""
        return cast("models.OverviewOut", await self._call(OVERVIEW, {}, {}, {}, None, extra_query))

    async def submit_workflow(
        self, body: Any | Mapping[str, Any], *, extra_query: Mapping[str, str] | None = None
    ) -> models.WorkflowOut:
        """POST /api/v1/workflows: Submit 1-500 jobs that depend on one another, all or nothing"""
        return cast("models.WorkflowOut", await self._call(SUBMIT_WORKFLOW, {}, {}, {}, body, extra_query))

    async def list_workflows(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        extra_query: Mapping[str, str] | None = None,
    ) -> models.WorkflowPage:
        """GET /api/v1/workflows: List Workflows"""
        return cast(
            "models.WorkflowPage",
            await self._call(
                LIST_WORKFLOWS, {}, {"status": status, "limit": limit, "cursor": cursor}, {}, None, extra_query
            ),
        )

    async def get_workflow(
        self, workflow_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.WorkflowOut:
        """GET /api/v1/workflows/{workflow_id}: One workflow with its jobs, each with the refs it depends on"""
        return cast(
            "models.WorkflowOut",
            await self._call(GET_WORKFLOW, {"workflow_id": workflow_id}, {}, {}, None, extra_query),
        )

    async def cancel_workflow(
        self, workflow_id: str, *, extra_query: Mapping[str, str] | None = None
    ) -> models.WorkflowOut:
        """POST /api/v1/workflows/{workflow_id}/cancel: Cancel Workflow"""
        return cast(
            "models.WorkflowOut",
            await self._call(CANCEL_WORKFLOW, {"workflow_id": workflow_id}, {}, {}, None, extra_query),
        )
