"""What routes can reach: the services, created in the lifespan and handed over through app.state."""

from collections.abc import Callable
from dataclasses import dataclass, field

from app.core.replies import ReplyInbox
from app.core.resources import Resources
from app.services.api_keys import ApiKeyService
from app.services.artifacts import ArtifactService
from app.services.deliveries import DeliveryService
from app.services.dlq import DlqService
from app.services.dlq_groups import DlqGroups
from app.services.endpoint_circuits import endpoint_circuits
from app.services.job_type_breakers import JobTypeBreakers
from app.services.job_types import JobTypeService
from app.services.jobs import JobService
from app.services.overview import OverviewService
from app.services.queue_rates import QueueRates
from app.services.rate_limit import RateLimiter
from app.services.redrives import RedriveService
from app.services.scheduling.schedules import ScheduleService
from app.services.streams import LiveStreams
from app.services.waiting import Waiting
from app.services.webhook_stats import WebhookStats
from app.services.webhooks import WebhookService
from app.services.worker_directory import WorkerDirectory
from app.services.workflows import WorkflowService
from app.stores.redrives import RedriveStore


@dataclass
class ApiState:
    resources: Resources
    jobs: JobService
    keys: ApiKeyService
    webhooks: WebhookService
    deliveries: DeliveryService
    dlq: DlqService
    artifacts: ArtifactService
    limiter: RateLimiter
    breakers: JobTypeBreakers
    job_types: JobTypeService
    replies: ReplyInbox
    live: LiveStreams
    directory: WorkerDirectory
    # name -> a function that reports the worker's state ("running", "stopped", "disabled")
    workers: dict[str, Callable[[], str]] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)  # the workers of this process an operator stopped
    waiting: Waiting = field(init=False)
    schedules: ScheduleService = field(init=False)
    workflows: WorkflowService = field(init=False)
    webhook_stats: WebhookStats = field(init=False)
    overview: OverviewService = field(init=False)
    queue_rates: QueueRates = field(init=False)
    redrives: RedriveService = field(init=False)
    dlq_groups: DlqGroups = field(init=False)

    def __post_init__(self) -> None:
        self.waiting = Waiting(self.jobs, self.replies)
        self.schedules = ScheduleService(self.resources.stores.schedules, self.jobs)
        self.workflows = WorkflowService(self.jobs, self.dlq.stops)
        self.webhook_stats = WebhookStats(self.resources.engine, endpoint_circuits(self.resources))
        resources, settings = self.resources, self.resources.settings
        self.overview = OverviewService(
            resources.engine, resources.redis, resources.names, settings.overview_cache_seconds
        )
        self.queue_rates = QueueRates(settings.rabbitmq_management_url)
        self.redrives = RedriveService(RedriveStore(self.resources.engine))
        self.dlq_groups = DlqGroups(self.resources.engine)
