"""`notification`: one outbound HTTP call, signed like a webhook delivery when the payload has a secret."""

import json
import time

import httpx

from app.core.masking import mask_urls
from app.core.signing import signed_headers
from app.core.ssrf import UnsafeURL
from app.handlers.base import HttpAnswer, JobContext, JobType
from app.handlers.errors import PermanentError, TransientError
from app.schemas.payloads.notification import SPEC, NotificationPayload


async def handle(ctx: JobContext, payload: NotificationPayload) -> dict[str, int | float]:
    tools = ctx.require_tools()
    value = payload.body
    if payload.include_dependencies:  # the schema allows it only with an object or null body
        value = {**(value if isinstance(value, dict) else {}), "dependencies": dict(ctx.dependencies)}
    body = b"" if value is None else json.dumps(value, separators=(",", ":")).encode()
    headers = _headers(ctx, payload, body)
    try:
        answer = await tools.call(payload.method, payload.url, headers, body, payload.timeout)
    except UnsafeURL as exc:
        raise PermanentError(str(exc)) from exc
    except (httpx.HTTPError, OSError) as exc:  # timeouts included: httpx.TimeoutException, TimeoutError
        why = mask_urls(str(exc)) or type(exc).__name__
        raise TransientError(f"{payload.method} {mask_urls(payload.url)} failed ({why})") from exc
    _check(payload, answer)
    return {"status_code": answer.status_code, "duration_ms": round(answer.duration_ms, 1)}


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


def _check(payload: NotificationPayload, answer: HttpAnswer) -> None:
    if 200 <= answer.status_code < 300:
        return
    # 4xx will not change by asking again, nor will a redirect (never followed); 408 and 429 ask us to wait.
    retry_later = answer.status_code >= 500 or answer.status_code in RETRYABLE_4XX
    error = TransientError if retry_later else PermanentError
    excerpt = answer.body[:200].strip()
    detail = f": {excerpt}" if excerpt else ""
    raise error(f"{payload.method} {mask_urls(payload.url)} answered {answer.status_code}{detail}")


JOB_TYPE = JobType(SPEC, handle)
