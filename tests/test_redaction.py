"""Secrets taken out of log text."""

from app.core.redaction import REDACTED, Redactor
from app.core.signing import new_secret
from app.services.api_keys import new_key
from tests.conftest import make_settings

redact = Redactor.of(["the-encryption-key-value"])


def test_api_keys_and_webhook_secrets_are_redacted_wherever_they_stand() -> None:
    key, secret = new_key(), new_secret()
    text = redact(f"key={key}, secret {secret}; ({key})")
    assert key not in text and secret not in text
    assert text == f"key={REDACTED}, secret {REDACTED}; ({REDACTED})"


def test_authorization_values_are_redacted_and_the_header_name_stays() -> None:
    assert redact("Authorization: Bearer abc.def-ghi") == f"Authorization: {REDACTED}"
    assert redact("{'authorization': 'Basic dXNlcjpwdw=='}") == f"{{'authorization': '{REDACTED}'}}"
    assert redact('"Authorization":"opaque-token"') == f'"Authorization":"{REDACTED}"'
    assert redact("sent bearer opaque.token.value") == f"sent bearer {REDACTED}"


def test_configured_values_are_redacted_but_short_ones_are_not_words_to_hunt() -> None:
    assert redact("key the-encryption-key-value!") == f"key {REDACTED}!"
    assert Redactor.of(["short", None, ""]).literals == ()
    settings = make_settings()
    assert settings.secret_encryption_key and settings.admin_api_key
    for_settings = Redactor.for_settings(settings)
    assert for_settings(f"{settings.secret_encryption_key} {settings.admin_api_key}") == f"{REDACTED} {REDACTED}"


def test_ordinary_text_is_left_alone() -> None:
    text = "job 3f2a dead-lettered (retries_exhausted): tq_ prefix, whsec_ too short, a bearer of news"
    assert redact(text) == text
