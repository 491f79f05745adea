"""The job-type registry: every type this process runs, by name: the built-in types, then the installed plugins'
(docs/plugins.md)."""

from app.handlers import document, echo, flaky, image, notification, sleep
from app.handlers.base import JobType
from app.schemas.payloads.plugins import plugin_types

BUILT_IN: dict[str, JobType] = {
    module.JOB_TYPE.name: module.JOB_TYPE for module in (echo, sleep, flaky, document, image, notification)
}
JOB_TYPES: dict[str, JobType] = BUILT_IN | {
    name: JobType(plugin.spec, plugin.handler) for name, plugin in plugin_types(list(BUILT_IN)).items()
}


def get_job_type(name: str) -> JobType | None:
    """The job type called `name`, or None when there is none."""
    return JOB_TYPES.get(name)
