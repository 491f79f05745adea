"""The webhook worker: fans job events out to endpoints, then signs, sends, logs and retries each delivery."""

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from aio_pika.abc import AbstractIncomingMessage
from loguru import logger

from app.core.backoff import Tier, jittered_ms, tier_at_most, tier_for_wait
from app.core.broker import Outgoing
from app.core.logging import worker_request_id
from app.core.messages import OPERATOR_HEADER, REQUEST_ID_HEADER
from app.core.names import SUBSCRIBABLE_EVENTS
from app.core.resources import Resources
from app.core.secret_box import SecretBox
from app.core.signing import signed_headers
from app.core.ssrf import UnsafeURL, post, resolve
from app.core.statuses import WorkerState
from app.models.types import utcnow
from app.services.deliveries import parse_event
from app.services.outbox import Outbox
from app.workers.consumers import ConsumerGroup
from app.workers.endpoint_guard import EndpointGuard, Gate
from app.workers.job_store import Defer, Drop, ToDeadLetters
from app.workers.retry_policy import DeadLetter, DeadReason, Retry, delivery_plan, parse_retry_after
from app.workers.webhook_store import GONE, Attempt, Send, WebhookStore

LEASE_MARGIN = 5.0


@dataclass
class WebhookWorker:
    resources: Resources
    outbox: Outbox
    name: str = "webhook_worker"

    def __post_init__(self) -> None:
        settings = self.resources.settings
        names = self.resources.names
        lease = settings.webhook_timeout_seconds + LEASE_MARGIN
        box = SecretBox(settings.secret_encryption_key)
        disable_after = settings.webhook_disable_after_seconds
        self.store = WebhookStore(self.resources.engine, names, box, lease, disable_after)
        self.guard = EndpointGuard(
            self.resources.redis,
            names,
            settings.webhook_breaker_failures,
            settings.webhook_breaker_cooldown_seconds,
            settings.webhook_max_in_flight_per_endpoint,
            lease,
        )
        fanout_plan = {names.webhook_events_queue: settings.webhook_fanout_consumers}
        self.fanout = ConsumerGroup(self.resources, f"{self.name}-fanout", fanout_plan, self._fan_out)
        self.senders = ConsumerGroup(
            self.resources, self.name, {names.webhook_deliver_queue: settings.webhook_consumers}, self._deliver
        )
        # trust_env=False: a proxy from the environment would bypass the pinned, checked address.
        self.http = httpx.AsyncClient(follow_redirects=False, trust_env=False, limits=httpx.Limits(max_connections=100))

    def report(self) -> str:
        states = {self.fanout.state, self.senders.state}
        return WorkerState.RUNNING if states == {WorkerState.RUNNING} else WorkerState.STOPPED

    async def start(self) -> None:
        await self.fanout.start()
        await self.senders.start()

    async def stop(self, grace: float | None = None) -> None:
        grace = self.resources.settings.shutdown_grace_seconds if grace is None else grace
        await asyncio.gather(self.fanout.stop(grace), self.senders.stop(grace))
        await self.http.aclose()

    async def _fan_out(self, message: AbstractIncomingMessage) -> None:
        try:
            event = parse_event(message.body)
        except ValueError:
            logger.error("malformed event {}; rejecting it", message.message_id)
            await message.reject(requeue=False)
            return
        if event["type"] not in SUBSCRIBABLE_EVENTS:
            await message.ack()  # queued, running: no endpoint can ask for them, so no database work
            return
        request_id = _header(message, REQUEST_ID_HEADER)
        worker_request_id.set(request_id)
        staged = await self.store.fan_out(event, message.body, request_id)
        await self.outbox.publish(staged)
        await message.ack()

    async def _deliver(self, message: AbstractIncomingMessage) -> None:
        delivery_id = json.loads(message.body).get("delivery_id", "")
        worker_request_id.set(_header(message, REQUEST_ID_HEADER))
        verdict = await self.store.claim(delivery_id)
        match verdict:
            case Drop(why):
                logger.info("dropping delivery message {}: {}", delivery_id, why)
                await message.ack()
            case ToDeadLetters():
                await message.reject(requeue=False)
            case Defer(seconds):
                await self._to_tier(message, tier_for_wait(self.resources.topology.webhook_tiers, seconds), None)
                await message.ack()
            case Send(delivery, secrets):
                await self._send(message, delivery, secrets)

    async def _send(self, message: AbstractIncomingMessage, delivery: dict[str, Any], secrets: list[str]) -> None:
        if not secrets:
            await self.store.abandon(delivery, "the endpoint was deleted or disabled")
            await message.ack()
            return
        guard_key = delivery["endpoint_id"] or f"callback:{urlsplit(delivery['url']).netloc}"
        operator = bool(_header(message, OPERATOR_HEADER))
        gate, wait = (Gate.SEND, 0.0) if operator else await self.guard.admit(guard_key, delivery["id"])
        if gate in (Gate.OPEN, Gate.BUSY):
            # No attempt and no consumer held: back through a delay tier, the retry budget untouched.
            await self.store.release(delivery)
            tiers = self.resources.topology.webhook_tiers
            await self._to_tier(message, tier_at_most(tiers, wait), None)
            await message.ack()
            return
        try:
            attempt = await self._attempt(delivery, secrets)
        except BaseException:
            await self.guard.release(guard_key, delivery["id"])
            raise
        if await self.guard.done(guard_key, delivery["id"], attempt.ok):
            logger.warning("circuit opened for {}: deliveries wait in the delay tiers", guard_key)
        await self._settle(message, delivery, attempt)

    async def _settle(self, message: AbstractIncomingMessage, delivery: dict[str, Any], attempt: Attempt) -> None:
        """Record the attempt, then ack, send to a delay tier, or reject into the webhook DLQ."""
        plan = None if attempt.ok else self._plan(delivery, attempt)
        if not await self.store.record(delivery, attempt, plan):
            await message.ack()  # a newer claim owns it now
            return
        if isinstance(plan, Retry):
            await self._to_tier(message, plan.tier, plan.expiration_ms)
        if isinstance(plan, DeadLetter):
            logger.warning("delivery {} to {} failed for good ({})", delivery["id"], delivery["url"], plan.reason)
            await message.reject(requeue=False)
        else:
            await message.ack()

    def _plan(self, delivery: dict[str, Any], attempt: Attempt) -> Retry | DeadLetter:
        if attempt.status_code == GONE:
            return DeadLetter(DeadReason.GONE)
        now = utcnow()
        retry_after = parse_retry_after(attempt.retry_after, now) if attempt.status_code in (429, 503) else None
        delays, tiers = self.resources.settings.webhook_retry_delays, self.resources.topology.webhook_tiers
        return delivery_plan(delivery["budget_used"] + 1, delays, tiers, now, retry_after)

    async def _attempt(self, delivery: dict[str, Any], secrets: list[str]) -> Attempt:
        settings = self.resources.settings
        started = time.perf_counter()
        try:
            target = await resolve(delivery["url"], settings.webhook_allow_private_networks)
            body, request_id = delivery["body"], delivery["request_id"]
            headers = signed_headers(secrets, delivery["id"], int(time.time()), body, request_id)
            response = await post(self.http, target, body, headers, settings.webhook_timeout_seconds)
        except (UnsafeURL, httpx.HTTPError, OSError) as exc:
            elapsed = (time.perf_counter() - started) * 1000
            return Attempt(None, elapsed, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, None)
        error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"
        return Attempt(response.status_code, response.duration_ms, error, response.body, response.retry_after)

    async def _to_tier(self, message: AbstractIncomingMessage, tier: Tier, expiration_ms: int | None) -> None:
        names = self.resources.names
        queue = names.webhook_tier_queue(tier)
        outgoing = Outgoing(
            names.webhooks_retry_exchange,
            queue,
            message.body,
            {k: v for k, v in (message.headers or {}).items() if k != OPERATOR_HEADER},
            expiration_ms=expiration_ms or jittered_ms(tier),
            message_id=message.message_id,
        )
        await self.resources.broker.publish(outgoing)


def _header(message: AbstractIncomingMessage, name: str) -> str | None:
    value = (message.headers or {}).get(name)
    return value if isinstance(value, str) else None
