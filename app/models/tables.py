"""The tables as SQLAlchemy Core objects, for the hot paths that skip the ORM."""

from typing import cast

from sqlalchemy import Table

from app.models.api_key import ApiKey
from app.models.artifact import Artifact
from app.models.flow import FlowKey, FlowStart
from app.models.job import Job, JobEvent
from app.models.job_type import JobTypePause
from app.models.outbox import OutboxMessage
from app.models.redrive import Redrive, RedriveEvent, RedriveItem
from app.models.schedule import Schedule
from app.models.webhook import ClientSecret, Delivery, DeliveryAttempt, WebhookEndpoint
from app.models.workflow import JobDependency, Workflow

JOBS = cast(Table, Job.__table__)
JOB_EVENTS = cast(Table, JobEvent.__table__)
JOB_TYPE_PAUSES = cast(Table, JobTypePause.__table__)
FLOW_KEYS = cast(Table, FlowKey.__table__)
FLOW_STARTS = cast(Table, FlowStart.__table__)
OUTBOX = cast(Table, OutboxMessage.__table__)
API_KEYS = cast(Table, ApiKey.__table__)
ENDPOINTS = cast(Table, WebhookEndpoint.__table__)
CLIENT_SECRETS = cast(Table, ClientSecret.__table__)
DELIVERIES = cast(Table, Delivery.__table__)
ATTEMPTS = cast(Table, DeliveryAttempt.__table__)
ARTIFACTS = cast(Table, Artifact.__table__)
SCHEDULES = cast(Table, Schedule.__table__)
WORKFLOWS = cast(Table, Workflow.__table__)
JOB_DEPENDENCIES = cast(Table, JobDependency.__table__)
REDRIVES = cast(Table, Redrive.__table__)
REDRIVE_ITEMS = cast(Table, RedriveItem.__table__)
REDRIVE_EVENTS = cast(Table, RedriveEvent.__table__)
