"""The webhook path's group commits (rule 17): fan-outs, delivery claims and attempt records of many messages,
each batch one transaction; the messages a batch stages published together, their confirms awaited together.
(The endpoints' breakers are asked and fed in batches of their own: gate.py.)"""

from dataclasses import dataclass, field
from typing import Any

from app.core.database import is_unreachable
from app.core.failpoints import Failpoint, Failpoints
from app.core.group_commit import GroupCommit
from app.services.outbox import Outbox
from app.stores.deliveries import DeliveryStore, Event, Judge, Recording
from app.workers.verdicts import Drop
from app.workers.webhooks import claims
from app.workers.webhooks.claims import Claim, Send


@dataclass
class DeliveryBatches:
    """`lease_seconds`: how long a claim leases a delivery; `judge`: what a record batch's attempts do to their
    endpoints' health."""

    store: DeliveryStore
    outbox: Outbox
    lease_seconds: float
    judge: Judge
    failpoints: Failpoints = field(default_factory=Failpoints)
    max_batch: int = 128

    def __post_init__(self) -> None:
        self.fanouts = GroupCommit("webhook-fanouts", self._fan_out, self.max_batch, is_unreachable)
        self.claims = GroupCommit("delivery-claims", self._claim, self.max_batch, is_unreachable)
        self.records = GroupCommit("delivery-records", self._record, self.max_batch, is_unreachable)

    async def fan_out(self, event: Event) -> None:
        """Stage the event's deliveries and publish their messages (confirmed), batched with other events."""
        await self.fanouts.run(event)

    async def claim(self, delivery_id: str) -> Claim:
        """Lease one delivery, batched; a delivery whose endpoint is gone or disabled is failed here (Drop)."""
        return await self.claims.run(delivery_id)

    async def record(self, recording: Recording) -> bool:
        """Log one attempt, batched; False when a newer claim owns it."""
        return await self.records.run(recording)

    async def _fan_out(self, events: list[Event]) -> list[None]:
        staged = await self.store.fan_out(events)
        await self.outbox.publish([p for one in staged for p in one])
        return [None] * len(events)

    async def _claim(self, delivery_ids: list[str]) -> list[Claim]:
        verdicts = await claims.claim(self.store, delivery_ids, self.lease_seconds)
        orphans = [v.delivery for v in verdicts if isinstance(v, Send) and not v.secrets]
        await self.store.abandon(orphans, GONE_ENDPOINT)
        return [Drop(GONE_ENDPOINT) if isinstance(v, Send) and not v.secrets else v for v in verdicts]

    async def _record(self, batch: list[Recording]) -> list[bool]:
        recorded = await self.store.record(batch, self.judge)
        if any(recorded):
            self.failpoints.hit(Failpoint.AFTER_RECORD_COMMIT)
        return recorded

    @property
    def batchers(self) -> "tuple[GroupCommit[Any, Any], ...]":
        return (self.fanouts, self.claims, self.records)


GONE_ENDPOINT = "the endpoint was deleted or disabled"
