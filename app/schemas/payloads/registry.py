"""Every job type's payload spec, by name: what the API checks a submit against. `app/handlers/registry.py` pairs
each with the handler that runs it. The built-in types, then those of the installed plugins (docs/plugins.md)."""

from app.schemas.payloads import document, echo, flaky, image, notification, sleep
from app.schemas.payloads.base import PayloadSpec
from app.schemas.payloads.plugins import plugin_types

BUILT_IN: dict[str, PayloadSpec] = {
    module.SPEC.name: module.SPEC for module in (echo, sleep, flaky, document, image, notification)
}
PAYLOADS: dict[str, PayloadSpec] = BUILT_IN | {
    name: job_type.spec for name, job_type in plugin_types(list(BUILT_IN)).items()
}
