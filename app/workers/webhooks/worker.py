"""The webhook worker: fans job events out to endpoints, then signs, sends, logs and retries each delivery."""

import asyncio
import json
import time
from dataclasses import dataclass, replace
from typing import Any

import httpx
from loguru import logger

from app.core import metrics, safe_http, tracing
from app.core.backoff import Tier, busy_wait, jittered_ms, parse_retry_after, tier_at_most, tier_for_wait
from app.core.failpoints import Failpoints
from app.core.group_commit import GroupCommit
from app.core.incoming import Message
from app.core.logging import worker_request_id
from app.core.messages import BUSY_HEADER, ENDPOINT_HEADER, OPERATOR_HEADER, REQUEST_ID_HEADER, JobEvent, events_of
from app.core.names import SUBSCRIBABLE_EVENTS
from app.core.resources import Resources
from app.core.safe_http import SafeClient, safe_client
from app.core.signing import signed_headers
from app.core.ssrf import UnsafeURL
from app.core.statuses import DeadReason, WorkerKind, WorkerState
from app.models.rows import DeliveryRow
from app.models.types import utcnow
from app.services.outbox import Outbox
from app.stores.deliveries import GONE, Attempt, Event
from app.workers import unprocessable
from app.workers.consumers import ConsumerGroup, consumer_report
from app.workers.reports import WorkerReport
from app.workers.retry_policy import DeadLetter, Retry, delivery_plan
from app.workers.tiers import to_tier
from app.workers.verdicts import Defer, Drop, ToDeadLetters
from app.workers.webhooks.batches import DeliveryBatches
from app.workers.webhooks.breakers import LEASE_MARGIN_SECONDS, Admission, Gate, endpoint_breakers
from app.workers.webhooks.claims import Send
from app.workers.webhooks.gate import EndpointGate
from app.workers.webhooks.outcomes import EndpointHealth, recording
from app.workers.webhooks.slots import EndpointSlots


@dataclass
class WebhookWorker:
    resources: Resources
    outbox: Outbox
    name: str = "webhook_worker"
    kind: WorkerKind = WorkerKind.WEBHOOK

    def __post_init__(self) -> None:
        settings = self.resources.settings
        names = self.resources.names
        lease = settings.webhook_timeout_seconds + LEASE_MARGIN_SECONDS
        health = EndpointHealth(self.resources.stores.endpoints, settings.webhook_disable_after_seconds)
        failpoints = Failpoints.parse(settings.failpoints)
        store = self.resources.stores.deliveries
        self.batches = DeliveryBatches(store, self.outbox, lease, health, failpoints=failpoints)
        slots = EndpointSlots(settings.webhook_max_in_flight_per_endpoint)
        self.gate = EndpointGate(slots, endpoint_breakers(self.resources), store)
        self.waited = 0
        fanout_plan = {names.webhook_events_queue: settings.webhook_fanout_consumers}
        self.fanout = ConsumerGroup(self.resources, f"{self.name}-fanout", fanout_plan, self._fan_out)
        self.senders = ConsumerGroup(
            self.resources,
            self.name,
            {names.webhook_deliver_queue: settings.webhook_consumers},
            self._deliver,
            self._give_up,
        )
        self.http = self._http_client()

    def _http_client(self) -> SafeClient:
        # Pooled per (scheme, host, port), every connection checked where it is dialled (rule 12). Connections to
        # an endpoint stay within its in-flight cap (one per attempt); endpoints sharing a host do not share a cap.
        settings = self.resources.settings
        return safe_client(
            settings.webhook_allow_private_networks,
            max_connections=settings.webhook_max_connections,
            keepalive_seconds=settings.webhook_keepalive_seconds,
            dns_default_seconds=settings.webhook_dns_cache_seconds,
        )

    @property
    def tiers(self) -> list[Tier]:
        """The webhook delay tiers: retries' and waits' alike."""
        return self.resources.topology.webhook_tiers

    @property
    def state(self) -> WorkerState:
        states = {self.fanout.state, self.senders.state}
        return WorkerState.RUNNING if states == {WorkerState.RUNNING} else WorkerState.STOPPED

    def report(self) -> WorkerReport:
        return consumer_report(self.name, self.kind, self.state, self.consumer_groups)

    @property
    def consumer_groups(self) -> tuple[ConsumerGroup, ...]:
        return (self.fanout, self.senders)

    @property
    def batchers(self) -> "tuple[GroupCommit[Any, Any], ...]":
        fanouts, claims, records = self.batches.batchers
        return (fanouts, claims, *self.gate.batchers, records)

    async def start(self) -> None:
        for batcher in self.batchers:
            batcher.reopen()
        await self.fanout.start()
        await self.senders.start()

    async def stop(self, grace: float | None = None) -> None:
        grace = self.resources.settings.shutdown_grace_seconds if grace is None else grace
        await asyncio.gather(self.fanout.stop(grace), self.senders.stop(grace))
        for batcher in self.batchers:
            await batcher.close()
        for batcher in self.batchers:
            logger.info("{}: {} item(s) in {} batch(es)", batcher.name, batcher.items, batcher.batches)
        logger.info("{}: {} delivery message(s) sent to wait in a delay tier", self.name, self.waited)
        await self.http.aclose()

    async def _fan_out(self, message: Message) -> None:
        """Fan out the event the message holds, or every event of a bundle (each batched with whatever else
        arrives), then ack: a redelivered bundle fans out again, and makes no second delivery (rule 10)."""
        try:
            events = [(JobEvent.from_bytes(body), body) for body in events_of(message.body)]
        except ValueError:
            logger.error("malformed event {}; rejecting it", message.message_id)
            await message.reject(requeue=False)
            return
        alone = len(events) == 1  # a bundle's events carry their request ids in their jobs, not in a header
        wanted = [
            (event, body, _header(message, REQUEST_ID_HEADER) if alone else _request_id(event))
            for event, body in events
            if event.type in SUBSCRIBABLE_EVENTS  # queued, running: no endpoint can ask for them
        ]
        if wanted and tracing.enabled():
            await asyncio.gather(*(self._traced_fan_out(item, message, alone) for item in wanted))
        elif wanted:
            await asyncio.gather(*(self.batches.fan_out(item) for item in wanted))
        await message.ack()

    async def _traced_fan_out(self, item: Event, message: Message, alone: bool) -> None:
        """One event's fan-out in a span that continues its run's trace; its deliveries continue the span's."""
        event, body, request_id = item
        parent = tracing.event_trace(message.headers, event.id, alone)
        with tracing.consuming("webhook.fan_out", parent, **{"event.id": event.id, "event.type": event.type}):
            await self.batches.fan_out((replace(event, trace=tracing.headers()), body, request_id))

    async def _deliver(self, message: Message) -> None:
        delivery_id = json.loads(message.body).get("delivery_id", "")
        worker_request_id.set(_header(message, REQUEST_ID_HEADER))
        operator, key = bool(_header(message, OPERATOR_HEADER)), _header(message, ENDPOINT_HEADER)
        if key is not None and not operator and self.gate.busy(key):
            await self._wait_busy(message)  # a slow endpoint with every slot here busy: no database work
            return
        with tracing.consuming("webhook.deliver", message.headers, **{"delivery.id": delivery_id}):
            await self._claimed(message, delivery_id, operator)

    async def _claimed(self, message: Message, delivery_id: str, operator: bool) -> None:
        match await self.batches.claim(delivery_id):
            case Drop(why):
                logger.info("dropping delivery message {}: {}", delivery_id, why)
                await message.ack()
            case ToDeadLetters():
                await message.reject(requeue=False)
            case Defer(seconds, in_flight):
                # An operator's message that finds an attempt in flight waits for that alone: it comes back as
                # soon as a tier allows, still the operator's. Any other waits until the delivery is due.
                waits_for_attempt = operator and in_flight
                tier = tier_at_most(self.tiers, seconds) if waits_for_attempt else tier_for_wait(self.tiers, seconds)
                await self._to_tier(message, tier, None, keep_operator=waits_for_attempt)
                await message.ack()
            case Send() as send:
                await self._send(message, send, operator)

    async def _give_up(self, message: Message, exc: Exception) -> None:
        """The service failed to process this delivery message three times: fail its delivery (when the message
        names one still pending) with the error as `unprocessable`, and reject the message into the webhook DLQ."""
        try:
            delivery_id = json.loads(message.body).get("delivery_id")
        except (ValueError, AttributeError):
            delivery_id = None
        if isinstance(delivery_id, str) and delivery_id:
            error = unprocessable.error_of(exc)
            why = f"{DeadReason.UNPROCESSABLE}: {error['type']}: {error['message']}"
            await self.batches.store.give_up(delivery_id, why)
        await message.reject(requeue=False)

    async def _send(self, message: Message, send: Send, operator: bool) -> None:
        """Through the endpoint's gate, attempt, record (batched), then ack, send to a delay tier, or reject into
        the webhook DLQ. Told to wait, the delivery goes back through a delay tier, its lease given back and its
        retry budget untouched."""
        passage = await self.gate.enter(send.delivery, operator)
        if isinstance(passage, Admission):
            if passage.gate is Gate.OPEN:
                await self._wait_out(message, tier_at_most(self.tiers, passage.wait), None, operator)
            else:
                await self._wait_busy(message, operator)
            return
        try:
            attempt = await self._attempt(send.delivery, send.secrets)
        except BaseException:
            await self.gate.abandon(passage)
            raise
        # The slots given back in line, before the next admission to this endpoint: the shared slot it frees is
        # free by the time that admission is judged.
        await self._record(message, send, attempt, self.gate.leave(passage, attempt.ok))

    async def _record(
        self, message: Message, send: Send, attempt: Attempt, done: "asyncio.Future[Admission | None]"
    ) -> None:
        """Record the attempt (batched, beside `done`, its result for the endpoint's breaker), then ack, send to a
        delay tier for its retry, or reject into the webhook DLQ."""
        delivery = send.delivery
        metrics.WEBHOOK_DURATION.observe(attempt.duration_ms / 1000)
        plan = None if attempt.ok else self._plan(delivery, attempt)
        logged = recording(send, attempt, plan)
        recorded, _ = await asyncio.gather(self.batches.record(logged), done)
        if not recorded:
            await message.ack()  # a newer claim owns it now
            return
        metrics.deliveries(logged.outcome).inc()
        if isinstance(plan, Retry):
            await self._to_tier(message, plan.tier, plan.expiration_ms, busy=0)
        if isinstance(plan, DeadLetter):
            logger.warning("delivery {} to {} failed for good ({})", delivery["id"], delivery["url"], plan.reason)
            await message.reject(requeue=False)
        else:
            await message.ack()

    async def _wait_busy(self, message: Message, operator: bool = False) -> None:
        """Back through a delay tier after finding the endpoint busy: a longer one each time it is found busy
        again (backoff.BUSY_STEPS), counted on the message. An operator's stays the operator's and comes back
        through the shortest, each time: it goes as soon as the endpoint has room."""
        times = 1 if operator else _times_busy(message) + 1
        await self._wait_out(message, busy_wait(self.tiers, times), times, operator)

    async def _wait_out(self, message: Message, tier: Tier, busy: int | None = None, operator: bool = False) -> None:
        self.waited += 1
        await self._to_tier(message, tier, None, keep_operator=operator, busy=busy)
        await message.ack()

    def _plan(self, delivery: DeliveryRow, attempt: Attempt) -> Retry | DeadLetter:
        if attempt.status_code == GONE:
            return DeadLetter(DeadReason.GONE)
        now = utcnow()
        retry_after = parse_retry_after(attempt.retry_after, now) if attempt.status_code in (429, 503) else None
        delays = self.resources.settings.webhook_retry_delays
        return delivery_plan(delivery["budget_used"] + 1, delays, self.tiers, now, retry_after)

    async def _attempt(self, delivery: DeliveryRow, secrets: list[str]) -> Attempt:
        settings = self.resources.settings
        started = time.perf_counter()
        try:
            body, request_id = delivery["body"], delivery["request_id"]
            headers = signed_headers(secrets, delivery["id"], int(time.time()), body, request_id)
            response = await safe_http.post(self.http, delivery["url"], body, headers, settings.webhook_timeout_seconds)
        except (UnsafeURL, httpx.HTTPError, OSError) as exc:
            if isinstance(exc, UnsafeURL):
                logger.warning("delivery {} refused before connecting: {}", delivery["id"], exc)
            elapsed = (time.perf_counter() - started) * 1000
            return Attempt(None, elapsed, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, None)
        error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"
        return Attempt(response.status_code, response.duration_ms, error, response.body, response.retry_after)

    async def _to_tier(
        self,
        message: Message,
        tier: Tier,
        expiration_ms: int | None,
        keep_operator: bool = False,
        busy: int | None = None,
    ) -> None:
        """The message to wait in a delay tier; an operator's mark goes with it only when asked (a retry after
        the operator's attempt is an ordinary one). `busy`: how many times it has found its endpoint busy now
        (0 after an attempt); None keeps the count it carries."""
        names = self.resources.names
        queue = names.webhook_tier_queue(tier)
        headers = {k: v for k, v in (message.headers or {}).items() if keep_operator or k != OPERATOR_HEADER}
        if busy is not None:
            headers.pop(BUSY_HEADER, None)
            if busy:
                headers[BUSY_HEADER] = busy
        # A delivery message carries no priority and no reply address: `to_tier` passes on none.
        expiration = expiration_ms or jittered_ms(tier)
        exchange = names.webhooks_retry_exchange
        await to_tier(self.resources.broker, exchange, queue, message, headers, expiration, message.message_id)


def _request_id(event: JobEvent) -> str | None:
    value = event.job.get("request_id")
    return value if isinstance(value, str) else None


def _times_busy(message: Message) -> int:
    value = (message.headers or {}).get(BUSY_HEADER)
    return value if isinstance(value, int) and value > 0 else 0


def _header(message: Message, name: str) -> str | None:
    value = (message.headers or {}).get(name)
    return value if isinstance(value, str) else None
