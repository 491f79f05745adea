"""What an attempt leads to, as the deliveries store records it, and what it says about its endpoint's health."""

from dataclasses import dataclass
from datetime import datetime

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.statuses import DeliveryStatus
from app.services.endpoint_health import EndpointResult, judge_endpoints
from app.stores.deliveries import GONE, Attempt, Recording
from app.stores.endpoints import EndpointStore
from app.workers.retry_policy import DeadLetter, Retry
from app.workers.webhooks.claims import Send


def recording(send: Send, attempt: Attempt, plan: Retry | DeadLetter | None) -> Recording:
    """The attempt to log: `plan` is what follows it (None: it succeeded)."""
    next_at = plan.next_attempt_at if isinstance(plan, Retry) else None
    return Recording(send.delivery, attempt, _status(plan), next_at, send.failing)


def _status(plan: Retry | DeadLetter | None) -> DeliveryStatus:
    if plan is None:
        return DeliveryStatus.SUCCEEDED
    return DeliveryStatus.FAILED if isinstance(plan, DeadLetter) else DeliveryStatus.PENDING


@dataclass(frozen=True)
class EndpointHealth:
    """A record batch's judge: each endpoint's answers tracked, those gone (410) or failing longer than
    `disable_after_seconds` disabled, in the record's transaction."""

    endpoints: EndpointStore
    disable_after_seconds: float

    async def __call__(self, conn: AsyncConnection, judged: list[Recording], now: datetime) -> None:
        results = [
            EndpointResult(r.delivery["endpoint_id"] or "", r.attempt.ok, r.attempt.status_code == GONE) for r in judged
        ]
        disabled = await judge_endpoints(self.endpoints, conn, results, now, self.disable_after_seconds)
        for endpoint_id, reason in disabled:
            logger.warning("webhook endpoint {} disabled: {}", endpoint_id, reason)
