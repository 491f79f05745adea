"""Tables. Importing this package registers every table on `Base.metadata`."""

from app.models.api_key import ApiKey
from app.models.artifact import Artifact
from app.models.base import Base
from app.models.flow import FlowKey, FlowStart
from app.models.job import Job, JobEvent
from app.models.job_type import JobTypePause
from app.models.outbox import OutboxMessage
from app.models.redrive import Redrive, RedriveEvent, RedriveItem
from app.models.schedule import Schedule
from app.models.webhook import ClientSecret, Delivery, DeliveryAttempt, WebhookEndpoint
from app.models.workflow import JobDependency, Workflow

__all__ = [
    "ApiKey",
    "Artifact",
    "Base",
    "ClientSecret",
    "Delivery",
    "DeliveryAttempt",
    "FlowKey",
    "FlowStart",
    "Job",
    "JobDependency",
    "JobEvent",
    "JobTypePause",
    "OutboxMessage",
    "Redrive",
    "RedriveEvent",
    "RedriveItem",
    "Schedule",
    "WebhookEndpoint",
    "Workflow",
]
