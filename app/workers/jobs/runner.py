"""Run one attempt of a job: validate the payload, call the handler, bound it by the timeout."""

import asyncio
from typing import Any

from pydantic import ValidationError

from app.core.messages import dumps, loads
from app.core.secret_box import SecretBox, SecretsUnavailable
from app.handlers.base import JobContext
from app.handlers.errors import JobTimeout, PermanentError
from app.handlers.registry import get_job_type
from app.models.rows import JobRow
from app.services.payload_secrets import opened


async def run_attempt(ctx: JobContext, payload: Any, limit_seconds: float) -> Any:
    """The handler's JSON result; raises TransientError, PermanentError or anything unexpected."""
    job_type = get_job_type(ctx.job_type)
    if job_type is None:
        raise PermanentError(f"this job worker has no handler for job type {ctx.job_type!r} (docs/plugins.md)")
    try:
        model = job_type.payload_model.model_validate(payload)
    except ValidationError as exc:
        raise PermanentError(f"payload does not fit {ctx.job_type}: {exc.error_count()} error(s)") from exc
    scope = asyncio.timeout(limit_seconds)
    try:
        async with scope:
            result = await job_type.handler(ctx, model)
    except TimeoutError as exc:
        if scope.expired():
            raise JobTimeout(f"attempt {ctx.attempt} ran past its {limit_seconds:g}s timeout") from exc
        raise
    try:
        return loads(dumps(result))
    except TypeError as exc:
        raise PermanentError(f"the handler's result is not JSON: {exc}") from exc


async def run_sealed(ctx: JobContext, job: JobRow, sealed: str, box: SecretBox, limit_seconds: float) -> Any:
    """An attempt with the payload's credentials put back, for the handler alone."""
    try:
        payload = opened(job["payload"], sealed, box)
    except SecretsUnavailable as exc:
        raise PermanentError(f"the job's credentials cannot be opened: {exc}") from exc
    return await run_attempt(ctx, payload, limit_seconds)
