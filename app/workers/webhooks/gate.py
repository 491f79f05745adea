"""An endpoint's gate (rule 11): one attempt's way through its endpoint's in-flight cap and breaker. A slot is taken
here first (this process's share of the cap, `slots.EndpointSlots`), then the shared slot and the breaker's word
asked in Redis; after the attempt both slots are given back with its answer at once. What goes to Redis is
batched: admissions, answers and slots given back unused share one batcher, so an answer that frees a slot and
the admission waiting for it go in one round trip, the answer first, and a slot an answer handed over is given
back (if its heir sends nothing after all) only after it was handed."""

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from app.core.database import is_unreachable
from app.core.group_commit import GroupCommit
from app.core.messages import endpoint_key
from app.models.rows import DeliveryRow
from app.stores.deliveries import DeliveryStore
from app.workers.webhooks.breakers import Admission, Ask, EndpointBreakers, Gate, Result
from app.workers.webhooks.slots import EndpointSlots

# An admission asked (the delivery, whether an operator sent it), an answer, or a slot given back unused.
Gating = tuple[DeliveryRow, bool] | Result | Ask
WAIT = (Gate.OPEN, Gate.BUSY)
BUSY = Admission(Gate.BUSY)
SEND = Admission(Gate.SEND)


def breaker_key(delivery: DeliveryRow) -> str:
    return endpoint_key(delivery["endpoint_id"], delivery["url"])


@dataclass(frozen=True)
class Passage:
    """An attempt let through: the delivery as claimed, its endpoint, whether an operator sent it, and when its
    slot here was taken."""

    delivery: DeliveryRow
    key: str
    operator: bool
    since: float


class EndpointGate:
    def __init__(self, slots: EndpointSlots, breakers: EndpointBreakers, store: DeliveryStore, max_batch: int = 128):
        self.slots = slots
        self.breakers = breakers
        self.store = store  # a delivery told to wait has its lease given back
        self.asks = GroupCommit("endpoint-gates", self._gate, max_batch)
        self.returns = GroupCommit("delivery-lease-returns", self._give_back, max_batch, is_unreachable)

    def busy(self, key: str) -> bool:
        """Whether every slot of a slow endpoint is busy here: a delivery to it is not to wait (nor claim)."""
        return self.slots.full(key) and not self.slots.wait_bound(key)

    async def enter(self, delivery: DeliveryRow, operator: bool) -> Passage | Admission:
        """Take the endpoint's slot here (waiting as `slots` allows; an operator's as for a fast endpoint, so the
        cap holds for a recover of many deliveries), then ask for the shared one and the breaker's word (an
        operator's goes through the circuit as its probe). A slot handed over by a success is sent without asking:
        the success closed the circuit, and its shared slot came with it. The way through, or the admission that
        says wait (BUSY, or OPEN for `wait` seconds), the delivery's lease and its slots given back."""
        key = breaker_key(delivery)
        slot = await self.slots.take(key, delivery["id"], patient=operator)
        if slot is None:
            await self.returns.run(delivery)
            return BUSY
        since = time.perf_counter()
        try:
            admission = SEND if slot.heir_of else await self._admit(delivery, operator)
        except BaseException:
            self.slots.give(key, None)
            raise
        if admission.gate in WAIT:
            self.slots.give(key, None)
            return admission
        return Passage(delivery, key, operator, since)

    def leave(self, passage: Passage, ok: bool) -> "asyncio.Future[Admission | None]":
        """Give the slots back with the attempt's answer. Here at once: after a success, straight to the next
        delivery waiting for it, shared slot and all (an operator's success hands over only this one: it may not
        have been the probe, so its heir still asks). Shared, with the answer for the breaker, batched: in line
        now, before any admission asked after this call; await the future for it to be done."""
        delivery = passage.delivery
        succeeded = delivery["id"] if ok and not passage.operator else None
        heir = self.slots.give(passage.key, time.perf_counter() - passage.since, succeeded)
        return self.asks.submit(Result(passage.key, delivery["id"], ok, heir or ""))

    async def abandon(self, passage: Passage) -> None:
        """Give the slots back (and the probe) when nothing was sent after all."""
        try:
            await self.asks.run(Ask(passage.key, passage.delivery["id"], False))
        finally:
            self.slots.give(passage.key, None)

    async def _admit(self, delivery: DeliveryRow, operator: bool) -> Admission:
        admission = await self.asks.run((delivery, operator))
        assert admission is not None
        return admission

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

    @property
    def batchers(self) -> "tuple[GroupCommit[Any, Any], ...]":
        return (self.asks, self.returns)
