"""Settings, read from the environment and `.env` in one place."""

from functools import lru_cache
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core.dns_cache import DNS_MAX_SECONDS, DNS_MIN_SECONDS


class Settings(BaseSettings):
    """Every knob of the service; names are part of the contract."""

    model_config = SettingsConfigDict(
        env_file=".env", extra="ignore", env_ignore_empty=True, use_attribute_docstrings=True
    )

    # Each field's docstring is its description: `python -m app settings-doc` writes .env.example and
    # docs/settings.md from them, and tests/core/test_settings_doc.py fails when those files drift from this model.

    database_url: str = "sqlite+aiosqlite:///./var/app.db"
    """SQLAlchemy async URL of the database: sqlite+aiosqlite://, postgresql+asyncpg:// or mssql+aioodbc://."""
    rabbitmq_url: str = "amqp://guest:guest@127.0.0.1:5672/"
    """AMQP URL of RabbitMQ; for a cluster, each node's URL, comma-separated: a process connects to the first that
    answers and, when that node goes away, to the next that does (docs/scaling.md)."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """URL of Redis (the job locks; when it is down, workers carry on with the database lease alone)."""
    host: str = "127.0.0.1"
    """Address the API listens on."""
    port: int = 8000
    """TCP port the API listens on."""
    admin_api_key: str | None = None
    """A bearer key with admin rights. Leave it unset: `make run` creates one, saves it in `.env` and prints it
    once."""
    secret_encryption_key: str | None = None
    """Fernet key that encrypts webhook secrets and notification jobs' credentials at rest. Leave it unset: `make
    run` creates one and saves it in `.env`. Never lose it once secrets are stored: they could not be read any more.
    To rotate it, list the new key first, comma-separated (`new,old`: the first encrypts, every one decrypts);
    `python -m app rotate-secrets` then re-encrypts every stored secret with the first key (in batches, and says how
    many), and the old key can go."""
    namespace: str = Field(default="taskq", pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    """Prefix of every exchange, queue and Redis key, so deployments (or test runs) can share a broker and a
    Redis."""
    environment: Literal["development", "production"] = "development"
    """development or production; chooses the default log format."""
    log_level: str = "INFO"
    """Lowest level that is logged: DEBUG, INFO, WARNING, ERROR."""
    log_format: Literal["text", "json"] | None = None
    """text or json; unset means text in development and json in production."""

    rate_limit_per_minute: int = Field(default=100, ge=1)
    """Jobs a client may submit per minute (a sliding window in Redis): each POST /api/v1/jobs counts one, each
    job of a batch counts one. Over it the answer is 429 with Retry-After."""
    idempotency_ttl_seconds: int = Field(default=24 * 3600, ge=1)
    """How long (seconds) an idempotency key remembers its job in Redis; the database keeps the guarantee after
    that."""
    breaker_failure_rate: float = Field(default=0.5, gt=0, le=1)
    """Per-job-type circuit breaker: it opens when at least BREAKER_MIN_CALLS runs in a BREAKER_WINDOW_SECONDS
    window failed transiently at this rate or more."""
    breaker_min_calls: int = Field(default=20, ge=1)
    """Runs of a job type in the window before its circuit breaker judges the failure rate."""
    breaker_window_seconds: float = Field(default=60, gt=0)
    """The window, in seconds, over which a job type's failure rate is measured."""
    breaker_cooldown_seconds: float = Field(default=30, gt=0)
    """Seconds an open job-type circuit stays open before it half-opens (one probe)."""
    max_body_bytes: int = Field(default=256 * 1024, ge=1024)
    """Largest request body of every call but a batch, in bytes (262144 = 256 KiB); larger is a 413."""
    max_batch_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """Largest request body POST /api/v1/jobs/batch and POST /api/v1/workflows accept (up to 500 jobs), in bytes
    (4194304 = 4 MiB); larger is a 413."""
    max_workflow_jobs: int = Field(default=500, ge=1, le=5000)
    """Most jobs one workflow may hold (POST /api/v1/workflows); more is a 422."""
    request_body_timeout_seconds: float = Field(default=30, gt=0)
    """Seconds a request's whole body may take to arrive; a body sent slower (a byte at a time) is answered 408."""
    webhook_allow_private_networks: bool = False
    """Allow webhook and job URLs on loopback/private/link-local/reserved addresses. `make run` turns it on for
    local development and logs a warning saying so."""
    embedded_workers: bool = False
    """Run the job and webhook workers inside the API process (`python -m app api`); `make run` turns it on."""
    live_buffer_events: int = Field(default=256, ge=1)
    """Live status streams (GET /api/v1/jobs/{id}/stream, /api/v1/events/stream): the events a client may fall
    behind by before its stream is closed (it reconnects with Last-Event-ID and catches up from the audit
    trail)."""
    live_ping_seconds: float = Field(default=15, gt=0, le=15)
    """Seconds between keep-alive comments on an idle live status stream (at most 15)."""

    job_timeout_seconds: float = Field(default=300, gt=0, le=1500)
    """Default time limit of one attempt, in seconds; a job may ask for up to 1500 (RabbitMQ's consumer timeout
    is 30 min)."""
    job_type_modules: str = ""
    """Modules to import for job types of your own, comma-separated (`myteam.jobs,myteam.reports`): each defines
    JOB_TYPE or JOB_TYPES (docs/plugins.md). Installed packages can register theirs through the `taskq.job_types`
    entry-point group instead. One that fails to import, or whose type's name a built-in type or another plugin has,
    stops start-up with a message saying which."""
    publish_timeout_seconds: float = Field(default=5, gt=0)
    """How long a publish waits for the broker's confirm before it counts as failed, in seconds. A relay pass holds
    the outbox rows it took for three times this."""
    retry_base_delay: float = Field(default=2, gt=0)
    """Retry k waits about min(RETRY_MAX_DELAY, RETRY_BASE_DELAY * 2^(k-1)) seconds, plus up to 20 % jitter."""
    retry_max_delay: float = Field(default=600, gt=0)
    """The longest wait before a job's retry, in seconds (see RETRY_BASE_DELAY)."""
    lock_ttl_seconds: float = Field(default=30, gt=0)
    """The job lease in seconds (Redis lock and DB lease together); renewed every third of it while a handler
    runs."""
    shutdown_grace_seconds: float = Field(default=30, ge=0)
    """On SIGTERM, how long in-flight jobs may run on before they are cancelled (and later redelivered), in
    seconds."""

    job_consumers_critical: int = Field(default=2, ge=0)
    """Consumers (each its own channel, prefetch 1) of the critical lane, priorities 1-3; they serve only
    critical work."""
    job_consumers_default: int = Field(default=4, ge=0)
    """Consumers of the default lane, priorities 4-7."""
    job_consumers_bulk: int = Field(default=2, ge=0)
    """Consumers of the bulk lane, priorities 8-10."""
    job_batch_size: int = Field(default=128, ge=1, le=1000)
    """The most claims or outcomes one transaction of the job worker holds (group commit)."""
    queue_type: Literal["classic", "quorum"] = "classic"
    """RabbitMQ queue type of every durable queue: classic, or quorum for a cluster (replicated; at-least-once
    dead-lettering, a delivery limit of 1000, and the lanes alone carry priority: RabbitMQ 3.x quorum queues take no
    x-max-priority). A NAMESPACE keeps the type it was first declared with: start another type under a new one."""

    outbox_relay_interval: float = Field(default=1.0, gt=0)
    """Seconds between two passes of the relay that publishes outbox rows the fast path missed."""
    outbox_relay_after: float = Field(default=3.0, ge=0)
    """Age in seconds an outbox row must reach before the relay takes it (at least PUBLISH_TIMEOUT_SECONDS +
    1)."""
    outbox_batch_size: int = Field(default=200, ge=1)
    """Outbox rows per relay pass and per cleanup batch."""

    webhook_retry_schedule: str = "5,300,1800,7200,18000,36000,36000"
    """Seconds before each webhook retry, comma-separated; its length is the number of retries."""
    webhook_timeout_seconds: float = Field(default=15, gt=0)
    """Time limit of one delivery attempt, in seconds."""
    webhook_consumers: int = Field(default=32, ge=0)
    """Consumers (one channel each, prefetch 1) per webhook worker that send deliveries."""
    webhook_fanout_consumers: int = Field(default=16, ge=0)
    """Consumers per webhook worker that fan job events out into deliveries."""
    webhook_max_in_flight_per_endpoint: int = Field(default=4, ge=1)
    """At most this many deliveries to one endpoint in flight at once, across all webhook workers."""
    webhook_breaker_failures: int = Field(default=5, ge=1)
    """Consecutive failed attempts that open an endpoint's circuit breaker."""
    webhook_breaker_cooldown_seconds: float = Field(default=30, gt=0)
    """How long an endpoint's circuit stays open (seconds) before one probe is sent."""
    webhook_disable_after_seconds: float = Field(default=5 * 24 * 3600, gt=0)
    """An endpoint that has failed every attempt for this long (seconds; 432000 = 5 days) is disabled."""
    webhook_max_connections: int = Field(default=100, ge=1)
    """Outgoing HTTP of each worker process (webhooks and the job types that call URLs): at most this many open
    connections in all."""
    webhook_keepalive_seconds: float = Field(default=30, ge=0)
    """Seconds an idle outgoing connection is kept for reuse."""
    webhook_dns_cache_seconds: float = Field(default=30, ge=DNS_MIN_SECONDS, le=DNS_MAX_SECONDS)
    """Each new outgoing connection's addresses are checked as it is dialled; a DNS answer is kept for its TTL,
    or for this many seconds (1 to 300) when it has none."""

    retention_delivery_days: float = Field(default=30, gt=0)
    """Delivery attempts and finished deliveries older than this many days are deleted."""
    retention_job_days: float = Field(default=30, gt=0)
    """Audit rows of jobs that finished more than this many days ago are deleted."""
    job_retention_days: float = Field(default=30, ge=0)
    """`succeeded` and `cancelled` jobs that finished more than this many days ago are deleted, with their audit
    rows, deliveries and artifacts (a deleted job answers 404); 0 keeps them forever."""
    dead_job_retention_days: float = Field(default=90, ge=0)
    """The same for `dead_lettered` jobs, whose messages leave the broker's DLQ with them; 0 keeps them forever."""
    retention_interval_seconds: float = Field(default=3600, gt=0)
    """Seconds between two cleanup passes."""
    retention_batch_size: int = Field(default=1000, ge=1)
    """Rows per delete of a cleanup pass."""
    dlq_janitor_interval_seconds: float = Field(default=60, gt=0)
    """Seconds between two passes of the DLQ janitor, which removes broker DLQ messages of replayed jobs and
    redelivered webhook deliveries, and the extra copies of a dead job's message."""
    background_backoff_base_seconds: float = Field(default=60, gt=0)
    """A background loop (outbox relay, janitor, retention, ...) whose cycles fail three times in a row waits
    this many seconds, doubling after each further failure, until a cycle succeeds."""
    background_backoff_max_seconds: float = Field(default=1800, gt=0)
    """The longest wait of a failing background loop, in seconds."""

    scheduler_enabled: bool = True
    """Run the scheduler in this process: the background worker that queues jobs submitted with run_at or
    delay_seconds when they are due and fires recurring schedules (docs/scheduling.md). Any number of processes
    may run it at once."""
    scheduler_interval_seconds: float = Field(default=1.0, gt=0, le=60)
    """Seconds between two passes of the scheduler: about how late a due job may start."""
    scheduler_batch_size: int = Field(default=200, ge=1, le=200)
    """The most due jobs (or schedules) one statement of the scheduler claims; at most 200, which keeps every
    statement within MSSQL's 2,100 parameters."""

    pause_refresh_seconds: float = Field(default=1.0, gt=0, le=60)
    """Seconds between two reads of the paused job types by each job worker (about how long a pause takes to hold
    every new job of its type), and between two passes that release the held jobs of types resumed since
    (docs/flow-control.md)."""

    fair_share: int = Field(default=32, ge=0, le=100_000)
    """Fair turns in a lane (docs/flow-control.md): the fewest of one client's jobs that wait in a lane at once; a
    client's share is the larger of this and twice the lane's consumers, its other new jobs wait in the database
    and go to the lane as its share drains. 0 turns fair turns off: a lane is then one queue in submission order."""

    db_pool_size: int = Field(default=10, ge=1)
    """Connections per database pool; the pool may open as many again as overflow (ignored for SQLite)."""

    metrics_port: int = Field(default=9100, ge=0, le=65535)
    """A worker process started on its own (`python -m app worker jobs|webhooks`) serves Prometheus metrics on
    http://HOST:METRICS_PORT/metrics; 0 turns that off. The API serves its own at /metrics on PORT. With
    `--processes N` the parent serves every child's on METRICS_PORT (one port, so a worker of the other kind may
    take the next). The N processes of `python -m app api --processes N` answer /metrics together, from values
    shared in a temporary folder (prometheus_client's PROMETHEUS_MULTIPROC_DIR variable names another)."""
    metrics_interval_seconds: float = Field(default=10, gt=0)
    """Seconds between two readings of the gauges that need I/O: queue depths, outbox backlog, circuits,
    heartbeats."""

    worker_heartbeat_seconds: float = Field(default=2, gt=0)
    """Seconds between two heartbeats of a process's workers into Redis; three missed and it drops out of
    /api/v1/workers."""
    overview_cache_seconds: float = Field(default=5.0, ge=0, le=60)
    """Seconds an API process keeps a caller's `GET /api/v1/overview` before reading the database again (0: never
    kept); the figures are at most this old (docs/dashboard.md)."""
    rabbitmq_management_url: str | None = None
    """URL of RabbitMQ's management API (such as http://guest:guest@127.0.0.1:15672), optional: when set,
    `GET /api/v1/queues` adds each queue's publish and deliver rates from it; without it the rates are the change
    of each queue's depth between two reads (docs/dashboard.md)."""

    cpu_pool_size: int = Field(default=2, ge=1)
    """Processes in each job worker's pool for PDF and image work (a timed-out job's process is killed)."""
    artifact_storage: Literal["database", "directory"] = "database"
    """Where job files (PDFs, images) live: database (any API process serves them) or directory."""
    artifact_dir: str = "./var/artifacts"
    """The directory for ARTIFACT_STORAGE=directory; every API and worker process must see the same one."""
    retention_artifact_days: float = Field(default=30, gt=0)
    """Job artifacts older than this many days are deleted (rows and files)."""

    failpoints: str = ""
    """Tests only: comma-separated crash points (after_claim_commit, after_finish_commit, after_record_commit,
    after_submit_commit, after_replay_commit) where a process kills itself. Leave it empty."""

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _schedule_is_numbers(cls, value: str) -> str:
        try:
            delays = [float(part) for part in value.split(",") if part.strip()]
        except ValueError as exc:
            raise ValueError("WEBHOOK_RETRY_SCHEDULE must be comma-separated seconds, e.g. 5,300,1800") from exc
        if any(delay <= 0 for delay in delays):
            raise ValueError("WEBHOOK_RETRY_SCHEDULE delays must be positive")
        return value

    @field_validator("failpoints")
    @classmethod
    def _known_failpoints(cls, value: str) -> str:
        from app.core.failpoints import Failpoints

        Failpoints.parse(value)
        return value

    @property
    def webhook_retry_delays(self) -> list[float]:
        """The webhook retry schedule as seconds, one per retry."""
        return [float(part) for part in self.webhook_retry_schedule.split(",") if part.strip()]

    @property
    def json_logs(self) -> bool:
        """JSON lines in production, readable text in development, unless LOG_FORMAT says otherwise."""
        if self.log_format is not None:
            return self.log_format == "json"
        return self.environment == "production"


@lru_cache
def get_settings() -> Settings:
    """The process's settings, read once on first use."""
    return Settings()
