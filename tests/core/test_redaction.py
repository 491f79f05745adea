"""Secrets taken out of log text and error messages."""

from typing import Any

import pytest
from starlette.responses import Response

from app.core.redaction import REDACTED, Redactor
from app.core.signing import new_secret
from app.services.api_keys import new_key
from app.workers.jobs.worker import JobWorker
from tests.api.test_logs import configured_logging, logging_api
from tests.conftest import make_settings
from tests.receiver import Receiver
from tests.support import Api, until_status, wait_for

__all__ = ["configured_logging", "logging_api"]  # fixtures

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


def test_a_url_s_user_info_and_credential_query_values_are_written_masked() -> None:
    line = (
        "POST https://bob:hunter2@api.test/hook?access_token=tok123&page=2&API_KEY=k9&sig=x&X-Amz-Signature=s1"
        "#frag answered 500; GET http://api.test/?token=t0k;key=k2&password=p%20w&secret=s&refresh_token=r"
    )
    assert redact(line) == (
        "POST https://***@api.test/hook?access_token=***&page=2&API_KEY=***&sig=x&X-Amz-Signature=***"
        "#frag answered 500; GET http://api.test/?token=***;key=***&password=***&secret=***&refresh_token=***"
    )
    assert redact("http://user@host.test/x?keyboard=qwerty") == "http://***@host.test/x?keyboard=qwerty"
    assert redact('{"url": "https://u:p@h.test/a?api_key=abc"}') == '{"url": "https://***@h.test/a?api_key=***"}'


@pytest.mark.parametrize(
    "body",
    [
        {"job_type": "notification", "payload": {"url": "http://bob:hunter2@example.com/x"}},
        {"job_type": "notification", "payload": {"url": "ftp://bob:hunter2@example.com/x"}},
        {"job_type": "notification", "payload": {"url": "http://bob:hunter2@exa mple.com/x"}},
        {"job_type": "echo", "payload": {}, "callback_url": "http://bob:hunter2@example.com/x"},
    ],
)
async def test_a_refused_url_is_not_echoed_with_its_password(api: Api, body: dict[str, Any]) -> None:
    headers = await api.new_client("redaction-422")
    answer = await api.client.post("/api/v1/jobs", json=body, headers=headers)
    assert answer.status_code == 422, answer.text
    assert "hunter2" not in answer.text and "bob" not in answer.text
    webhook = await api.client.post(
        "/api/v1/webhooks", json={"url": "http://bob:hunter2@example.com/x"}, headers=headers
    )
    assert webhook.status_code == 422 and "hunter2" not in webhook.text


async def test_a_failed_call_s_url_credentials_reach_neither_the_job_nor_the_logs(
    logging_api: Api, worker: JobWorker, receiver: Receiver
) -> None:
    headers = await logging_api.new_client("redaction-url")
    receiver.answer = lambda request: Response(status_code=403)
    url = receiver.url("/deny") + "?access_token=url-token-5d2e&page=2"
    job = (await logging_api.submit(headers, job_type="notification", payload={"url": url}, max_retries=0)).json()
    done = await until_status(logging_api, headers, job["id"], 30, "dead_lettered")
    assert done["error"]["message"].startswith(f"POST {receiver.url('/deny')}?access_token=***&page=2 answered 403")

    async def listed() -> str | None:
        answer = await logging_api.client.get("/api/v1/logs", params={"limit": 1000}, headers=logging_api.admin)
        return answer.text if f"job {job['id']} dead-lettered" in answer.text else None

    text = await wait_for(listed, within=15)
    assert text is not None and "url-token-5d2e" not in text and "access_token=***" in text
