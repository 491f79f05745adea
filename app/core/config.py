"""Settings, read from the environment and `.env` in one place."""

from functools import lru_cache
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core.safe_http import DNS_MAX_SECONDS, DNS_MIN_SECONDS


class Settings(BaseSettings):
    """Every knob of the service; names are part of the contract."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", env_ignore_empty=True)

    database_url: str = "sqlite+aiosqlite:///./var/app.db"
    rabbitmq_url: str = "amqp://guest:guest@127.0.0.1:5672/"
    redis_url: str = "redis://127.0.0.1:6379/0"
    host: str = "127.0.0.1"
    port: int = 8000
    admin_api_key: str | None = None
    secret_encryption_key: str | None = None
    namespace: str = Field(default="taskq", pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    environment: Literal["development", "production"] = "development"
    log_level: str = "INFO"
    log_format: Literal["text", "json"] | None = None

    rate_limit_per_minute: int = Field(default=100, ge=1)
    idempotency_ttl_seconds: int = Field(default=24 * 3600, ge=1)
    breaker_failure_rate: float = Field(default=0.5, gt=0, le=1)
    breaker_min_calls: int = Field(default=20, ge=1)
    breaker_window_seconds: float = Field(default=60, gt=0)
    breaker_cooldown_seconds: float = Field(default=30, gt=0)
    max_body_bytes: int = Field(default=256 * 1024, ge=1024)
    max_batch_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    request_body_timeout_seconds: float = Field(default=30, gt=0)
    webhook_allow_private_networks: bool = False
    embedded_workers: bool = False
    # Live status streams (SSE): the events one subscriber may fall behind by before it is disconnected, and
    # how often an idle stream gets a keep-alive comment.
    live_buffer_events: int = Field(default=256, ge=1)
    live_ping_seconds: float = Field(default=15, gt=0, le=15)

    job_timeout_seconds: float = Field(default=300, gt=0, le=1500)
    publish_timeout_seconds: float = Field(default=5, gt=0)
    retry_base_delay: float = Field(default=2, gt=0)
    retry_max_delay: float = Field(default=600, gt=0)
    lock_ttl_seconds: float = Field(default=30, gt=0)
    shutdown_grace_seconds: float = Field(default=30, ge=0)

    job_consumers_critical: int = Field(default=2, ge=0)
    job_consumers_default: int = Field(default=4, ge=0)
    job_consumers_bulk: int = Field(default=2, ge=0)
    # The most claims or outcomes one transaction of the job worker holds (rule 17).
    job_batch_size: int = Field(default=128, ge=1, le=1000)
    queue_type: Literal["classic", "quorum"] = "classic"

    outbox_relay_interval: float = Field(default=1.0, gt=0)
    outbox_relay_after: float = Field(default=3.0, ge=0)
    outbox_batch_size: int = Field(default=200, ge=1)

    webhook_retry_schedule: str = "5,300,1800,7200,18000,36000,36000"
    webhook_timeout_seconds: float = Field(default=15, gt=0)
    webhook_consumers: int = Field(default=8, ge=0)
    webhook_fanout_consumers: int = Field(default=16, ge=0)
    webhook_max_in_flight_per_endpoint: int = Field(default=4, ge=1)
    webhook_breaker_failures: int = Field(default=5, ge=1)
    webhook_breaker_cooldown_seconds: float = Field(default=30, gt=0)
    webhook_disable_after_seconds: float = Field(default=5 * 24 * 3600, gt=0)
    # The outgoing HTTP pool of each worker process (webhooks and the job types that call URLs).
    webhook_max_connections: int = Field(default=100, ge=1)
    webhook_keepalive_seconds: float = Field(default=30, ge=0)
    webhook_dns_cache_seconds: float = Field(default=30, ge=DNS_MIN_SECONDS, le=DNS_MAX_SECONDS)

    retention_delivery_days: float = Field(default=30, gt=0)
    retention_job_days: float = Field(default=30, gt=0)
    retention_interval_seconds: float = Field(default=3600, gt=0)
    retention_batch_size: int = Field(default=1000, ge=1)
    dlq_janitor_interval_seconds: float = Field(default=60, gt=0)
    # A background loop whose cycles keep failing waits this long, doubling up to the maximum (seed 003).
    background_backoff_base_seconds: float = Field(default=60, gt=0)
    background_backoff_max_seconds: float = Field(default=1800, gt=0)

    db_pool_size: int = Field(default=10, ge=1)

    # A worker process started on its own serves /metrics on this port (0: not at all); the API serves its own.
    metrics_port: int = Field(default=9100, ge=0, le=65535)
    # Seconds between two readings of the gauges that need I/O (queue depths, outbox, circuits, heartbeats).
    metrics_interval_seconds: float = Field(default=10, gt=0)

    # Every process writes its workers' reports to Redis this often; one that misses three beats drops out.
    worker_heartbeat_seconds: float = Field(default=2, gt=0)

    cpu_pool_size: int = Field(default=2, ge=1)
    artifact_storage: Literal["database", "directory"] = "database"
    artifact_dir: str = "./var/artifacts"
    retention_artifact_days: float = Field(default=30, gt=0)

    # Crash points for the crash tests (app/core/failpoints.py); empty in every real deployment.
    failpoints: str = ""

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
