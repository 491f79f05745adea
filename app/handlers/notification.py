"""`notification`: one outbound HTTP call, signed like a webhook delivery when the payload has a secret; any service
can be a job's handler this way (docs/job-types.md#http-targets): its 2xx answer's JSON body is the job's result,
and its Retry-After on a 429 or 503 sets the retry's delay."""

import json
import time
from datetime import UTC, datetime
from typing import Any

import httpx

from app.core.backoff import parse_retry_after
from app.core.masking import mask_urls
from app.core.messages import loads
from app.core.signing import signed_headers
from app.core.ssrf import UnsafeURL
from app.handlers.base import HttpAnswer, JobContext, JobType
from app.handlers.errors import PermanentError, TransientError
from app.schemas.payloads.notification import SPEC, NotificationPayload


async def handle(ctx: JobContext, payload: NotificationPayload) -> dict[str, Any]:
    tools = ctx.require_tools()
    value = payload.body
    if payload.include_dependencies:  # the schema allows it only with an object or null body
        value = {**(value if isinstance(value, dict) else {}), "dependencies": dict(ctx.dependencies)}
    body = b"" if value is None else json.dumps(value, separators=(",", ":")).encode()
    headers = _headers(ctx, payload, body)
    try:
        answer = await tools.call(payload.method, payload.url, headers, body, payload.timeout, RESULT_BODY_MAX + 1)
    except UnsafeURL as exc:
        raise PermanentError(str(exc)) from exc
    except (httpx.HTTPError, OSError) as exc:  # timeouts included: httpx.TimeoutException, TimeoutError
        why = mask_urls(str(exc)) or type(exc).__name__
        raise TransientError(f"{payload.method} {mask_urls(payload.url)} failed ({why})") from exc
    _check(payload, answer)
    return {"status_code": answer.status_code, "duration_ms": round(answer.duration_ms, 1)} | _body(answer.body)


def _body(text: str) -> dict[str, Any]:
    """The answer's body as the result keeps it: its JSON under `body`, or, when it is too big or not JSON, a note
    under `body_note` saying why it was left out; nothing for an empty body."""
    if not text.strip():
        return {}
    if len(text.encode()) > RESULT_BODY_MAX:
        return {"body_note": f"the answer's body is over {RESULT_BODY_MAX} bytes; it is not kept"}
    try:
        return {"body": loads(text)}
    except ValueError:
        return {"body_note": "the answer's body is not JSON; it is not kept"}


def _headers(ctx: JobContext, payload: NotificationPayload, body: bytes) -> dict[str, str]:
    ours = {"Content-Type": "application/json", "Idempotency-Key": ctx.job_id}
    if payload.secret is not None:
        # One message id per job, so a receiver can drop the copies a retry sends.
        msg_id = f"msg_{ctx.job_id.replace('-', '')}"
        ours |= signed_headers([payload.secret], msg_id, int(time.time()), body, ctx.request_id)
    # Ours win over the caller's, whatever the case the caller wrote them in.
    taken = {name.lower() for name in ours}
    return {name: value for name, value in payload.headers.items() if name.lower() not in taken} | ours


RETRYABLE_4XX = (408, 429)
ASKS_TO_WAIT = (429, 503)  # whose Retry-After sets the retry's delay
RESULT_BODY_MAX = 64 * 1024  # bytes of a 2xx answer's JSON body kept in the result


def _check(payload: NotificationPayload, answer: HttpAnswer) -> None:
    if 200 <= answer.status_code < 300:
        return
    # 4xx will not change by asking again, nor will a redirect (never followed); 408 and 429 ask us to wait.
    retry_later = answer.status_code >= 500 or answer.status_code in RETRYABLE_4XX
    excerpt = answer.body[:200].strip()
    detail = f": {excerpt}" if excerpt else ""
    message = f"{payload.method} {mask_urls(payload.url)} answered {answer.status_code}{detail}"
    if not retry_later:
        raise PermanentError(message)
    asked = answer.retry_after if answer.status_code in ASKS_TO_WAIT else None
    raise TransientError(message, retry_after=parse_retry_after(asked, datetime.now(UTC)))


JOB_TYPE = JobType(SPEC, handle)
