"""Which failure a dead job died of: its job type, its error's class and its error's message with the numbers, ids
and quoted values masked, so that 3,000 jobs that died of one cause are one group (docs/dlq.md)."""

import hashlib
import re
from typing import Any

# Most specific first: an id or a hash would otherwise be cut into numbers.
MASKS = (
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{12,}\b"), "<hex>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ][\d:.]+(?:Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<value>"),
    (re.compile(r"(?<![A-Za-z])[-+]?\d+(?:\.\d+)?"), "<n>"),
)
MESSAGE_CHARS = 500  # what a group's message keeps of the first error's (the hash covers all of it)


def masked(message: str) -> str:
    """The message with what differs from one job to the next (ids, numbers, times, quoted values) masked."""
    for pattern, mask in MASKS:
        message = pattern.sub(mask, message)
    return message


def error_class(error: dict[str, Any] | None) -> str:
    """The error's class as the worker recorded it (`type`), or `Error` for an error that names none."""
    return str((error or {}).get("type") or "Error")


def group_of(job_type: str, error: dict[str, Any] | None) -> str:
    """The group's id: 16 hex digits of a hash of the job type, the error class and the masked message."""
    message = masked(str((error or {}).get("message") or ""))
    key = "\x00".join((job_type, error_class(error), message))
    return hashlib.sha256(key.encode()).hexdigest()[:16]
