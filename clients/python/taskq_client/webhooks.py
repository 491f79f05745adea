"""Verifying a webhook delivery (the Standard Webhooks scheme, docs/webhooks.md): the HMAC-SHA256 of
`{webhook-id}.{webhook-timestamp}.{body}` under the endpoint's secret (`whsec_` and base64), compared in constant
time with each `v1,` signature of `webhook-signature` (two during a rotation), and the timestamp within a tolerance."""

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

PREFIX = "whsec_"
TOLERANCE_SECONDS = 300


class WebhookVerificationError(Exception):
    """The delivery is not one the service signed with this secret, or it is too old (or too new) to trust."""


def _key(secret: str) -> bytes:
    encoded = secret.removeprefix(PREFIX)
    try:
        return base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except ValueError as exc:
        raise ValueError("an endpoint secret is `whsec_` followed by base64") from exc


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    tolerance: float = TOLERANCE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """The event a delivery carries, once its signature and timestamp check out; else `WebhookVerificationError`.
    `headers` as received (any case); `body` the raw bytes, before any JSON parsing."""
    found = {name.lower(): value for name, value in headers.items()}
    try:
        msg_id, stamp, signatures = found["webhook-id"], found["webhook-timestamp"], found["webhook-signature"]
    except KeyError as exc:
        raise WebhookVerificationError(f"the delivery has no {exc.args[0]} header") from None
    try:
        sent_at = int(stamp)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not a number of seconds") from None
    if abs((time.time() if now is None else now) - sent_at) > tolerance:
        raise WebhookVerificationError(f"webhook-timestamp is more than {tolerance:g} s from now")
    raw = body.encode() if isinstance(body, str) else body
    digest = hmac.new(_key(secret), f"{msg_id}.{stamp}.".encode() + raw, hashlib.sha256).digest()
    expected = base64.b64encode(digest).decode("ascii")
    given = [part.removeprefix("v1,") for part in signatures.split() if part.startswith("v1,")]
    if not any(hmac.compare_digest(expected, signature) for signature in given):
        raise WebhookVerificationError("no signature matches this secret")
    event: dict[str, Any] = json.loads(raw)
    return event
