"""The `notification` job type without services: its payload's 422s, the call it makes, how failures map."""

import hashlib
import hmac
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

    assert result == {"status_code": 200, "duration_ms": 12.3}
    [call] = tools.calls
    assert (call["method"], call["url"], call["timeout"]) == ("PUT", URL, 3)
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
