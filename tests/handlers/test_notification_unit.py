"""The `notification` job type without services: its payload's 422s, the call it makes, how failures map."""

import hashlib
import hmac
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any, TypeVar

import httpx
import pytest
from pydantic import ValidationError
from standardwebhooks.webhooks import Webhook

from app.core.signing import new_secret
from app.core.ssrf import UnsafeURL
from app.handlers.base import HttpAnswer, JobContext
from app.handlers.errors import PermanentError, TransientError
from app.handlers.notification import JOB_TYPE
from app.schemas.payloads.notification import NotificationPayload
from tests.fake_tools import FakeTools

T = TypeVar("T")
URL = "https://hooks.example.com/notify"
JOB_ID = "0b6f7c1e-2a4d-4c1b-9f3e-5d2a1c0e9b8a"
OK = HttpAnswer(200, "ok", 12.34)


async def notify(tools: FakeTools, **payload: Any) -> Any:
    ctx = JobContext(job_id=JOB_ID, job_type="notification", attempt=1, runs=1, request_id="req_9", tools=tools)
    return await JOB_TYPE.handler(ctx, NotificationPayload.model_validate({"url": URL} | payload))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({}, "url"),  # missing field
        ({"url": URL, "timeout": "soon"}, "timeout"),  # wrong type
        ({"url": URL, "timeout": 0}, "timeout"),  # out of range
        ({"url": URL, "timeout": 61}, "timeout"),
        ({"url": URL, "method": "OPTIONS"}, "method"),
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "https://user:pw@example.com/"}, "credentials"),
        ({"url": URL, "secret": "s" * 201}, "secret"),
        ({"url": URL, "headers": {"Host": "evil.example"}}, "the Host header is set by the service"),
        ({"url": URL, "headers": {"content-length": "5"}}, "the content-length header is set by the service"),
        ({"url": URL, "headers": {f"X-H{n}": "v" for n in range(51)}}, "headers"),
        ({"url": URL, "headers": {"Bad Name": "v"}}, "not a valid header name"),
        ({"url": URL, "headers": {"X-Evil": "a\r\nInjected: yes"}}, "must be printable ASCII"),
        ({"url": URL, "headers": {"X-Name": "café"}}, "must be printable ASCII"),
        ({"url": URL, "retries": 3}, "retries"),  # extra field
    ],
)
def test_a_bad_payload_is_refused(payload: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        NotificationPayload.model_validate(payload)


async def test_a_2xx_answer_is_the_result_and_the_call_is_as_asked() -> None:
    tools = FakeTools(answer=OK)
    result = await notify(tools, method="PUT", body={"event": "done", "ids": [1, 2]}, timeout=3, headers={"X-A": "1"})

    assert result == {
        "status_code": 200,
        "duration_ms": 12.3,
        "body_note": "the answer's body is not JSON; it is not kept",
    }
    [call] = tools.calls
    assert (call["method"], call["url"], call["timeout"], call["max"]) == ("PUT", URL, 3, 64 * 1024 + 1)
    assert call["body"] == b'{"event":"done","ids":[1,2]}'
    assert call["headers"]["X-A"] == "1"
    assert call["headers"]["Content-Type"] == "application/json"
    assert call["headers"]["Idempotency-Key"] == JOB_ID


async def test_without_a_body_nothing_is_sent_and_without_a_secret_nothing_is_signed() -> None:
    tools = FakeTools(answer=OK)
    await notify(tools, method="GET")
    [call] = tools.calls
    assert call["body"] == b""
    assert not {"webhook-signature", "X-Task-Queue-Signature"} & set(call["headers"])


async def test_our_headers_win_over_the_callers_whatever_their_case() -> None:
    tools = FakeTools(answer=OK)
    await notify(tools, headers={"content-type": "text/plain", "idempotency-key": "mine", "X-Keep": "yes"})
    headers = tools.calls[0]["headers"]
    assert {name.lower() for name in headers} == {"content-type", "idempotency-key", "x-keep"}
    assert headers["Content-Type"] == "application/json"
    assert headers["Idempotency-Key"] == JOB_ID


async def test_a_whsec_secret_signs_like_a_webhook_delivery() -> None:
    secret = new_secret()
    tools = FakeTools(answer=OK)
    await notify(tools, body={"event": "done"}, secret=secret)

    call = tools.calls[0]
    headers, body = call["headers"], call["body"]
    assert Webhook(secret).verify(body, headers) == {"event": "done"}
    assert headers["webhook-id"] == "msg_" + JOB_ID.replace("-", "")
    assert headers["X-Task-Queue-Signature"] == hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Request-ID"] == "req_9"


async def test_any_other_secret_signs_with_the_task_queue_signature_only() -> None:
    tools = FakeTools(answer=OK)
    await notify(tools, body=[1, 2, 3], secret="plain-shared-secret")

    headers, body = tools.calls[0]["headers"], tools.calls[0]["body"]
    assert headers["X-Task-Queue-Signature"] == hmac.new(b"plain-shared-secret", body, hashlib.sha256).hexdigest()
    assert "webhook-signature" not in headers


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        (HttpAnswer(404, "no such hook", 5.0), PermanentError, "POST https://hooks.example.com/notify answered 404"),
        (HttpAnswer(410, "", 5.0), PermanentError, "answered 410$"),
        (HttpAnswer(503, "busy", 5.0), TransientError, "answered 503: busy"),
        (HttpAnswer(302, "", 5.0), PermanentError, "answered 302"),
        (HttpAnswer(429, "slow down", 5.0), TransientError, "answered 429"),
        (HttpAnswer(408, "", 5.0), TransientError, "answered 408"),
        (httpx.ReadTimeout("timed out"), TransientError, "timed out"),
        (httpx.ConnectError(""), TransientError, r"failed \(ConnectError\)"),
        (OSError("network is unreachable"), TransientError, "network is unreachable"),
        (UnsafeURL("resolves to 127.0.0.1, a loopback address"), PermanentError, "a loopback address"),
    ],
)
async def test_failures_map_to_permanent_or_transient(
    answer: HttpAnswer | Exception, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        await notify(FakeTools(answer=answer))


@pytest.mark.parametrize(
    ("body", "kept"),
    [
        ('{"order": 42, "lines": [1, 2]}', {"body": {"order": 42, "lines": [1, 2]}}),
        ("[true, null]", {"body": [True, None]}),
        ("  ", {}),
        ("<html>ok</html>", {"body_note": "the answer's body is not JSON; it is not kept"}),
        ("NaN", {"body_note": "the answer's body is not JSON; it is not kept"}),
        ('"' + "x" * 64 * 1024 + '"', {"body_note": "the answer's body is over 65536 bytes; it is not kept"}),
    ],
)
async def test_a_2xx_answers_json_body_is_kept_in_the_result_within_its_bound(body: str, kept: dict[str, Any]) -> None:
    result = await notify(FakeTools(answer=HttpAnswer(201, body, 7.0)))
    assert result == {"status_code": 201, "duration_ms": 7.0} | kept


@pytest.mark.parametrize(
    ("answer", "retry_after"),
    [
        (HttpAnswer(429, "", 1.0, "7"), 7.0),
        (HttpAnswer(503, "", 1.0, " 120 "), 120.0),
        (HttpAnswer(503, "", 1.0, "Wed, 21 Oct 2015 07:28:00 GMT"), 0.0),  # a date gone by: now
        (HttpAnswer(503, "", 1.0, "soon"), None),
        (HttpAnswer(503, "", 1.0), None),
        (HttpAnswer(500, "", 1.0, "7"), None),  # only a 429 or a 503 asks us to wait
        (HttpAnswer(408, "", 1.0, "7"), None),
    ],
)
async def test_a_retry_after_on_429_or_503_is_the_delay_the_transient_error_asks_for(
    answer: HttpAnswer, retry_after: float | None
) -> None:
    with pytest.raises(TransientError) as raised:
        await notify(FakeTools(answer=answer))
    assert raised.value.retry_after == retry_after


async def test_a_retry_after_as_an_http_date_counts_from_now() -> None:
    when = datetime.now(UTC) + timedelta(seconds=90)
    with pytest.raises(TransientError) as raised:
        await notify(FakeTools(answer=HttpAnswer(503, "", 1.0, format_datetime(when, usegmt=True))))
    assert raised.value.retry_after is not None and 85 <= raised.value.retry_after <= 90
