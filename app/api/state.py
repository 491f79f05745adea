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
from app.services.job_type_breakers import JobTypeBreakers
from app.services.job_types import JobTypeService
from app.services.jobs import JobService
from app.services.rate_limit import RateLimiter
from app.services.scheduling.schedules import ScheduleService
from app.services.streams import LiveStreams
from app.services.waiting import Waiting
from app.services.webhooks import WebhookService
from app.services.worker_directory import WorkerDirectory
from app.services.workflows import WorkflowService


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
    dlq_groups: DlqGroups = field(init=False)

    def __post_init__(self) -> None:
        self.waiting = Waiting(self.jobs, self.replies)
        self.schedules = ScheduleService(self.resources.stores.schedules, self.jobs)
        self.workflows = WorkflowService(self.jobs, self.dlq.stops)
        self.dlq_groups = DlqGroups(self.resources.engine)
