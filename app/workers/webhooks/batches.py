"""The webhook path's group commits (rule 17): fan-outs, delivery claims and attempt records of many messages,
each batch one transaction; the endpoints' breakers asked and fed with one Redis round trip per batch; the
messages a batch stages published together, their confirms awaited together."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

from app.core.database import is_unreachable
from app.core.failpoints import Failpoint, Failpoints
from app.core.group_commit import GroupCommit
from app.core.messages import endpoint_key
from app.models.rows import DeliveryRow
from app.services.breakers import Admission, Ask, EndpointBreakers, Gate, Result
from app.services.outbox import Outbox
from app.stores.deliveries import DeliveryStore, Event, Judge, Recording
from app.workers.verdicts import Drop
from app.workers.webhooks import claims
from app.workers.webhooks.claims import Claim, Send

# An admission asked (the delivery, whether an operator sent it), an outcome, or a slot given back unused.
Gating = tuple[DeliveryRow, bool] | Result | Ask


def breaker_key(delivery: DeliveryRow) -> str:
    return endpoint_key(delivery["endpoint_id"], delivery["url"])


@dataclass
class DeliveryBatches:
    """`lease_seconds`: how long a claim leases a delivery; `judge`: what a record batch's attempts do to their
    endpoints' health."""

    store: DeliveryStore
    breakers: EndpointBreakers
    outbox: Outbox
    lease_seconds: float
    judge: Judge
    failpoints: Failpoints = field(default_factory=Failpoints)
    max_batch: int = 128

    def __post_init__(self) -> None:
        self.fanouts = GroupCommit("webhook-fanouts", self._fan_out, self.max_batch, is_unreachable)
        self.claims = GroupCommit("delivery-claims", self._claim, self.max_batch, is_unreachable)
        # Admissions, outcomes and slots given back share one batcher, so an outcome that frees a slot and the
        # admission waiting for it go to Redis in one round trip, the outcome first, and a slot handed over by an
        # outcome is given back (if its heir sends nothing after all) only after it was handed.
        self.gates = GroupCommit("endpoint-gates", self._gate, self.max_batch)
        self.returns = GroupCommit("delivery-lease-returns", self._give_back, self.max_batch, is_unreachable)
        self.records = GroupCommit("delivery-records", self._record, self.max_batch, is_unreachable)

    async def fan_out(self, event: Event) -> None:
        """Stage the event's deliveries and publish their messages (confirmed), batched with other events."""
        await self.fanouts.run(event)

    async def claim(self, delivery_id: str) -> Claim:
        """Lease one delivery, batched; a delivery whose endpoint is gone or disabled is failed here (Drop)."""
        return await self.claims.run(delivery_id)

    async def admit(self, delivery: DeliveryRow, operator: bool) -> Admission:
        """Ask the endpoint's breaker and shared cap, batched; a delivery told to wait has its lease back."""
        admission = await self.gates.run((delivery, operator))
        assert admission is not None
        return admission

    async def give_back(self, delivery: DeliveryRow) -> None:
        """Return a claimed delivery's lease unattempted (it waits in a delay tier), batched."""
        await self.returns.run(delivery)

    async def release(self, delivery: DeliveryRow) -> None:
        """Free the delivery's shared endpoint slot (and probe) when nothing was sent after all, batched."""
        await self.gates.run(Ask(breaker_key(delivery), delivery["id"], False))

    def done(self, delivery: DeliveryRow, ok: bool, heir: str | None = None) -> "asyncio.Future[Admission | None]":
        """Free the delivery's shared endpoint slot (or, after a success, hand it to `heir`, already sending) and
        feed the endpoint's breaker with its answer, batched: in line now, before any admission asked after this
        call (so its slot may be given here at once); await the future for it to be done."""
        return self.gates.submit(Result(breaker_key(delivery), delivery["id"], ok, heir or ""))

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

    async def _gate(self, items: list[Gating]) -> list[Admission | None]:
        results = [item for item in items if isinstance(item, Result)]
        freed = [item for item in items if isinstance(item, Ask)]
        asks = [item for item in items if isinstance(item, tuple)]
        ask = [Ask(breaker_key(d), d["id"], operator) for d, operator in asks]
        _, said = await self.breakers.done_then_admit(results, ask, freed)
        await self.store.release([d for (d, _), a in zip(asks, said, strict=True) if a.gate in WAIT])
        admitted = iter(said)
        return [next(admitted) if isinstance(item, tuple) else None for item in items]

    async def _give_back(self, claimed: list[DeliveryRow]) -> list[None]:
        await self.store.release(claimed)
        return [None] * len(claimed)

    async def _record(self, batch: list[Recording]) -> list[bool]:
        recorded = await self.store.record(batch, self.judge)
        if any(recorded):
            self.failpoints.hit(Failpoint.AFTER_RECORD_COMMIT)
        return recorded

    def reopen(self) -> None:
        for batcher in self.batchers:
            batcher.reopen()

    async def close(self) -> None:
        for batcher in self.batchers:
            await batcher.close()

    @property
    def batchers(self) -> "tuple[GroupCommit[Any, Any], ...]":
        return (self.fanouts, self.claims, self.gates, self.returns, self.records)


WAIT = (Gate.OPEN, Gate.BUSY)
GONE_ENDPOINT = "the endpoint was deleted or disabled"
