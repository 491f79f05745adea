"""Every job type's payload spec, by name: what the API checks a submit against. `app/handlers/registry.py` pairs
each with the handler that runs it."""

from app.schemas.payloads import document, echo, flaky, image, notification, sleep
from app.schemas.payloads.base import PayloadSpec

PAYLOADS: dict[str, PayloadSpec] = {
    module.SPEC.name: module.SPEC for module in (echo, sleep, flaky, document, image, notification)
}
