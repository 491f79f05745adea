"""Credentials inside a job's payload, sealed at rest (CONTRACT "Secrets in payloads", DESIGN.md rule 21).

A job type that names credentials in its payload (`PayloadSpec.credentials`) has them taken out when the job is
submitted: the stored payload holds `***` where each stood, so every way out (answers, events built in Python or
in SQL, webhook deliveries, SSE, the DLQ, logs) shows the mask with no code of its own, and `jobs.sealed` holds
them, encrypted with the secret box that seals webhook secrets. Only the worker opens them, to hand the handler
its payload whole. Jobs of other types cost one dictionary lookup.
"""

from collections.abc import Mapping
from typing import Any

from app.core.messages import dumps, loads
from app.core.secret_box import SecretBox
from app.schemas.payloads.registry import PAYLOADS

NO_KEY = SecretBox(None)  # seals nothing: a payload with credentials is refused as SECRET_ENCRYPTION_KEY unset


def sealed(job_type: str, payload: Any, box: SecretBox = NO_KEY) -> tuple[Any, str | None]:
    """The payload as it is stored and shown, and its credentials sealed (None when it has none)."""
    split = PAYLOADS[job_type].credentials if job_type in PAYLOADS else None
    if split is None or not isinstance(payload, dict):
        return payload, None
    shown, hidden = split(payload)
    if not hidden:
        return payload, None
    return shown, box.seal(dumps(hidden).decode())


def opened(payload: Any, sealed_credentials: str | None, box: SecretBox) -> Any:
    """The payload as it was submitted: its stored form with the sealed credentials put back where they stood."""
    if sealed_credentials is None:
        return payload
    return _overlay(payload, loads(box.unseal(sealed_credentials)))


def sealed_job(job: dict[str, Any], box: SecretBox) -> tuple[dict[str, Any], str | None]:
    """A job request (a schedule's) as it is stored and shown, and its payload's credentials sealed."""
    payload, sealed_credentials = sealed(job["job_type"], job.get("payload"), box)
    return ({**job, "payload": payload} if sealed_credentials else job), sealed_credentials


def opened_job(schedule: Mapping[str, Any], box: SecretBox) -> dict[str, Any]:
    """A schedule's job request as it was sent, its payload's credentials opened."""
    job: dict[str, Any] = schedule["job"]
    if not schedule.get("sealed"):
        return job
    return {**job, "payload": opened(job.get("payload"), schedule["sealed"], box)}


def _overlay(base: Any, over: Any) -> Any:
    if not isinstance(base, Mapping) or not isinstance(over, Mapping):
        return over
    return {**base, **{name: _overlay(base.get(name), value) for name, value in over.items()}}


def kept(edit: Any, shown: Any, whole: Any) -> Any:
    """An edit of a stored payload with each value left as it was shown (a `***`, a URL with its credentials
    masked) standing for what it hid: `shown` is the stored payload, `whole` the same opened."""
    if edit == shown:
        return whole
    if not (isinstance(edit, Mapping) and isinstance(shown, Mapping) and isinstance(whole, Mapping)):
        return edit
    return {name: kept(value, shown[name], whole.get(name)) if name in shown else value for name, value in edit.items()}
