"""The job-type registry: every type the service knows, by name."""

from app.handlers import document, echo, flaky, image, notification, sleep
from app.handlers.base import JobType

JOB_TYPES: dict[str, JobType] = {
    module.JOB_TYPE.name: module.JOB_TYPE for module in (echo, sleep, flaky, document, image, notification)
}


def get_job_type(name: str) -> JobType | None:
    """The job type called `name`, or None when there is none."""
    return JOB_TYPES.get(name)
