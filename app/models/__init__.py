"""Tables. Importing this package registers every table on `Base.metadata`."""

from app.models.api_key import ApiKey
from app.models.base import Base
from app.models.job import Job, JobEvent
from app.models.outbox import OutboxMessage

__all__ = ["ApiKey", "Base", "Job", "JobEvent", "OutboxMessage"]
