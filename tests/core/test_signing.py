"""Delivery signatures: the spec's test vector, the Standard Webhooks reference library and the seed's snippet."""

import base64
import hashlib
import hmac
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app.core.secret_box import SecretBox, SecretsUnavailable
from app.core.signing import new_secret, signed_headers, standard_signature

BODY = b'{"id": "evt_1", "type": "job.succeeded", "created_at": "2026-01-01T00:00:00Z", "seq": 4, "data": {}}'
TAMPERED = BODY.replace(b'"seq": 4', b'"seq": 5')


# The verifier the seed's README gives receivers, copied verbatim.
def verify(secret_key: str, raw_body: bytes, signature: str) -> bool:
    expected = hmac.new(secret_key.encode(), raw_body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


def sign(secrets: list[str], body: bytes = BODY, request_id: str | None = "req_42") -> dict[str, str]:
    return signed_headers(secrets, "msg_2Kq9", int(time.time()), body, request_id)


def test_the_spec_test_vector() -> None:
    signature = standard_signature(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
    )
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_a_delivery_carries_every_header_and_verifies_with_the_reference_library() -> None:
    secret = new_secret()
    headers = sign([secret])
    assert set(headers) == {
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "X-Task-Queue-Signature",
        "X-Task-Queue-Timestamp",
        "X-Request-ID",
        "Content-Type",
    }
    assert headers["webhook-id"] == "msg_2Kq9"
    assert headers["webhook-timestamp"] == headers["X-Task-Queue-Timestamp"]
    assert headers["X-Request-ID"] == "req_42"
    assert headers["Content-Type"] == "application/json"
    assert Webhook(secret).verify(BODY, headers)["seq"] == 4


def test_during_a_rotation_each_secret_alone_verifies() -> None:
    new, old = new_secret(), new_secret()
    headers = sign([new, old])
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(new).verify(BODY, headers)
    Webhook(old).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(BODY, headers)


def test_a_tampered_body_fails_the_reference_library() -> None:
    new, old = new_secret(), new_secret()
    headers = sign([new, old])
    for secret in (new, old):
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(TAMPERED, headers)


def test_the_legacy_header_verifies_with_the_seed_snippet_and_the_newest_secret() -> None:
    new, old = new_secret(), new_secret()
    headers = sign([new, old])
    assert verify(new, BODY, headers["X-Task-Queue-Signature"])
    assert not verify(new, TAMPERED, headers["X-Task-Queue-Signature"])
    assert not verify(old, BODY, headers["X-Task-Queue-Signature"])


def test_a_secret_without_the_whsec_form_signs_only_the_legacy_header() -> None:
    headers = sign(["seed-era-secret"], request_id=None)
    assert "webhook-signature" not in headers
    assert "X-Request-ID" not in headers
    assert headers["webhook-id"] == "msg_2Kq9"
    assert headers["webhook-timestamp"]
    assert verify("seed-era-secret", BODY, headers["X-Task-Queue-Signature"])


def test_rotating_away_from_a_legacy_secret_signs_the_standard_header_with_the_new_one() -> None:
    new = new_secret()
    headers = sign([new, "seed-era-secret"])
    assert len(headers["webhook-signature"].split(" ")) == 1
    Webhook(new).verify(BODY, headers)
    assert verify(new, BODY, headers["X-Task-Queue-Signature"])


def test_new_secrets_are_whsec_and_random() -> None:
    first, second = new_secret(), new_secret()
    assert first.startswith("whsec_")
    assert len(base64.b64decode(first.removeprefix("whsec_"), validate=True)) >= 24
    assert first != second


def test_a_secret_is_decrypted_once_however_many_attempts_it_signs_and_a_rotation_is_opened_anew() -> None:
    box = SecretBox("test-key-for-the-cache")
    first, rotated = box.seal("whsec_" + "a" * 32), box.seal("whsec_" + "b" * 32)
    assert [box.open(first) for _ in range(50)] == ["whsec_" + "a" * 32] * 50
    assert box.decryptions == 1
    assert box.open(rotated) == "whsec_" + "b" * 32 and box.open(first) == "whsec_" + "a" * 32
    assert box.decryptions == 2
    with pytest.raises(SecretsUnavailable):
        SecretBox("another-key").open(first)
