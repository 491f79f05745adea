"""Webhook signatures: the Standard Webhooks scheme and the seed's legacy one, made in one place."""

import base64
import hashlib
import hmac
from secrets import token_bytes

PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    """A fresh endpoint secret: `whsec_` and the base64 of 32 random bytes."""
    return PREFIX + base64.b64encode(token_bytes(SECRET_BYTES)).decode("ascii")


def is_standard(secret: str) -> bool:
    """Whether a secret has the Standard Webhooks form (`whsec_` and base64), so it can sign `webhook-signature`."""
    return secret.startswith(PREFIX) and _key_or_none(secret) is not None


def standard_signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """`v1,` and the base64 HMAC-SHA256 of `{msg_id}.{timestamp}.{body}` under the decoded secret."""
    key = _key_or_none(secret)
    if key is None:
        raise ValueError("a Standard Webhooks secret is `whsec_` followed by base64")
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def legacy_signature(secret: str, body: bytes) -> str:
    """The seed's `X-Task-Queue-Signature`: hex HMAC-SHA256 of the body under the whole secret as UTF-8."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signed_headers(
    secrets: list[str], msg_id: str, timestamp: int, body: bytes, request_id: str | None
) -> dict[str, str]:
    """Every header of a signed delivery; `secrets` newest first (two while a rotation lasts)."""
    if not secrets:
        raise ValueError("signing needs at least one secret")
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "X-Task-Queue-Signature": legacy_signature(secrets[0], body),
        "X-Task-Queue-Timestamp": str(timestamp),
        "Content-Type": "application/json",
    }
    standard = [standard_signature(s, msg_id, timestamp, body) for s in secrets if is_standard(s)]
    if standard:
        headers["webhook-signature"] = " ".join(standard)
    if request_id:
        headers["X-Request-ID"] = request_id
    return headers


def _key_or_none(secret: str) -> bytes | None:
    if not secret.startswith(PREFIX):
        return None
    encoded = secret.removeprefix(PREFIX)
    # Tolerate missing padding, as the reference libraries do.
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except ValueError:  # binascii.Error, or characters outside ASCII
        return None
    return key or None
