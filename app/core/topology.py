"""The RabbitMQ topology, declared explicitly (rules 1, 6, 15): exchanges, lanes, delay tiers, DLX/DLQ."""

from dataclasses import dataclass, field
from typing import Any

from aio_pika import ExchangeType
from aio_pika.abc import AbstractChannel, AbstractQueue
from aiormq.exceptions import ChannelPreconditionFailed
from loguru import logger

from app.core.backoff import Tier, busy_delays, job_tiers, schedule_tiers
from app.core.config import Settings
from app.core.names import PROGRESS, SUBSCRIBABLE_STATUSES, Lane, Names, lane_max_priority

# The deliveries of one message a quorum queue allows before it dead-letters the message (RabbitMQ counts every
# return: a nack with requeue, a consumer's channel or node lost mid-message). The database's retry budget decides
# a job's fate long before this; the limit is a net under a message that keeps coming back, set well above what a
# long outage makes (a consumer whose handler fails returns its message once a second) and set explicitly because
# RabbitMQ 4.x would otherwise impose 20.
QUORUM_DELIVERY_LIMIT = 1000
# Arguments this version gives queues that earlier versions declared without them. A queue declared so keeps
# working as it is (the broker refuses to change a queue's arguments in place): `declare` takes it with the
# arguments it was declared with, and says how to give it the new ones.
ADDED_LATER = ("x-queue-mode",)


class TopologyMismatch(Exception):
    """A queue on the broker was declared with other arguments (another QUEUE_TYPE, say) than these settings."""


@dataclass(frozen=True)
class ExchangeSpec:
    name: str
    type: ExchangeType


@dataclass(frozen=True)
class QueueSpec:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BindingSpec:
    queue: str
    exchange: str
    routing_key: str


@dataclass(frozen=True)
class Topology:
    """Everything one namespace needs on the broker, as data, so tests can read it too."""

    names: Names
    job_tiers: list[Tier]
    webhook_tiers: list[Tier]
    exchanges: list[ExchangeSpec]
    queues: list[QueueSpec]
    bindings: list[BindingSpec]


def _queue_args(settings: Settings, **extra: Any) -> dict[str, Any]:
    if settings.queue_type == "classic":
        return {"x-queue-type": "classic", **extra}
    # Rule 2's promise on quorum queues: the default at-most-once dead-lettering may drop a message on its way from
    # a delay tier back to its lane or into a DLQ; at-least-once holds it until the target queue confirms, and
    # RabbitMQ applies it only with reject-publish overflow.
    return {
        "x-queue-type": "quorum",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
        **extra,
    }


def _work_args(settings: Settings, dead_letter_exchange: str) -> dict[str, Any]:
    """A queue consumers take from: dead-letters to its DLX; on quorum, with the delivery limit. (DLQs get none:
    the janitor returns every message it keeps, which would count against it.)"""
    args = _queue_args(settings, **{"x-dead-letter-exchange": dead_letter_exchange})
    if settings.queue_type == "quorum":
        args["x-delivery-limit"] = QUORUM_DELIVERY_LIMIT
    return args


def _lane_args(settings: Settings, names: Names, lane: Lane) -> dict[str, Any]:
    args = _work_args(settings, names.jobs_dlx)
    if settings.queue_type == "classic":
        # Quorum queues on RabbitMQ 3.x take no x-max-priority: there the lanes alone carry priority (4.x quorum
        # queues serve priorities 5 and up ahead of the rest within a lane, with no argument).
        args["x-max-priority"] = lane_max_priority(lane)
        # A lane is where a backlog gathers. A classic queue of RabbitMQ 3.x keeps its messages in memory too, and
        # the longer it grows the longer the broker stalls now and then, holding every publish's confirm: with
        # 20,000-60,000 jobs waiting in the default lane the API's p99 at 32 clients was 57 ms, against 26 ms with
        # the lane emptied before each round and 27 ms with the lane lazy (messages on disk only), while draining
        # a lazy lane went as fast (bench/README.md, Ingest). RabbitMQ 3.12 and later ignore the argument: their
        # classic queues all behave so.
        args["x-queue-mode"] = "lazy"
    return args


def _tier_args(settings: Settings, tier: Tier, target_exchange: str, target_key: str) -> dict[str, Any]:
    # Dead-lettering bypasses `mandatory`: these two names decide whether a retry ever comes back.
    return _queue_args(
        settings,
        **{
            "x-message-ttl": tier.ttl_ms,
            "x-dead-letter-exchange": target_exchange,
            "x-dead-letter-routing-key": target_key,
        },
    )


def _job_part(settings: Settings, names: Names, tiers: list[Tier]) -> Topology:
    queues = [QueueSpec(names.jobs_dlq, _queue_args(settings))]
    bindings = [BindingSpec(names.jobs_dlq, names.jobs_dlx, "")]
    for lane in Lane:
        lane_queue = names.lane_queue(lane)
        queues.append(QueueSpec(lane_queue, _lane_args(settings, names, lane)))
        bindings.append(BindingSpec(lane_queue, names.jobs_exchange, names.lane_key(lane)))
        for tier in tiers:
            tier_queue = names.job_tier_queue(lane, tier)
            queues.append(QueueSpec(tier_queue, _tier_args(settings, tier, names.jobs_exchange, lane)))
            bindings.append(BindingSpec(tier_queue, names.jobs_retry_exchange, tier_queue))
    exchanges = [
        ExchangeSpec(names.jobs_exchange, ExchangeType.DIRECT),
        ExchangeSpec(names.jobs_retry_exchange, ExchangeType.DIRECT),
        ExchangeSpec(names.jobs_dlx, ExchangeType.FANOUT),
        ExchangeSpec(names.events_exchange, ExchangeType.TOPIC),
    ]
    return Topology(names, tiers, [], exchanges, queues, bindings)


def _webhook_part(settings: Settings, names: Names, tiers: list[Tier]) -> Topology:
    queues = [
        QueueSpec(names.webhook_events_queue, _work_args(settings, names.webhooks_dlx)),
        QueueSpec(names.webhook_deliver_queue, _work_args(settings, names.webhooks_dlx)),
        QueueSpec(names.webhooks_dlq, _queue_args(settings)),
    ]
    bindings = [
        # Only the events an endpoint can subscribe to; the others (queued, running) are published without
        # `mandatory` (rule 1) and the exchange drops them when nobody else listens.
        *(
            BindingSpec(names.webhook_events_queue, names.events_exchange, names.event_key("*", status))
            for status in SUBSCRIBABLE_STATUSES
        ),
        BindingSpec(names.webhook_events_queue, names.events_exchange, names.event_key("*", PROGRESS)),
        BindingSpec(names.webhook_events_queue, names.events_exchange, names.workflow_events_key),
        BindingSpec(names.webhook_deliver_queue, names.webhooks_exchange, names.webhook_deliver_key),
        BindingSpec(names.webhooks_dlq, names.webhooks_dlx, ""),
    ]
    for tier in tiers:
        tier_queue = names.webhook_tier_queue(tier)
        args = _tier_args(settings, tier, names.webhooks_exchange, names.webhook_deliver_key)
        queues.append(QueueSpec(tier_queue, args))
        bindings.append(BindingSpec(tier_queue, names.webhooks_retry_exchange, tier_queue))
    exchanges = [
        ExchangeSpec(names.webhooks_exchange, ExchangeType.DIRECT),
        ExchangeSpec(names.webhooks_retry_exchange, ExchangeType.DIRECT),
        ExchangeSpec(names.webhooks_dlx, ExchangeType.FANOUT),
    ]
    return Topology(names, [], tiers, exchanges, queues, bindings)


def build_topology(settings: Settings) -> Topology:
    """The full topology for the settings' namespace, delays and queue type."""
    names = Names(settings.namespace)
    jobs = _job_part(settings, names, job_tiers(settings.retry_base_delay, settings.retry_max_delay))
    delays = settings.webhook_retry_delays
    hooks = _webhook_part(settings, names, schedule_tiers([*delays, *busy_delays(delays)]))
    return Topology(
        names=names,
        job_tiers=jobs.job_tiers,
        webhook_tiers=hooks.webhook_tiers,
        exchanges=[*jobs.exchanges, *hooks.exchanges, ExchangeSpec(names.control_exchange, ExchangeType.FANOUT)],
        queues=jobs.queues + hooks.queues,
        bindings=jobs.bindings + hooks.bindings,
    )


async def declare(channel: AbstractChannel, topology: Topology) -> None:
    """Declare every exchange, queue and binding, durable; declaring twice is harmless."""
    exchanges = {}
    for spec in topology.exchanges:
        exchanges[spec.name] = await channel.declare_exchange(spec.name, spec.type, durable=True)
    queues = {spec.name: await _declare_queue(channel, spec) for spec in topology.queues}
    for binding in topology.bindings:
        await queues[binding.queue].bind(exchanges[binding.exchange], routing_key=binding.routing_key)


async def _declare_queue(channel: AbstractChannel, spec: QueueSpec) -> AbstractQueue:
    try:
        return await channel.declare_queue(spec.name, durable=True, arguments=spec.arguments)
    except ChannelPreconditionFailed as exc:
        earlier = {name: value for name, value in spec.arguments.items() if name not in ADDED_LATER}
        if earlier == spec.arguments:
            raise TopologyMismatch(_mismatch(spec, exc)) from exc
        await channel.reopen()  # the broker closed the channel over the refused declare
    try:
        queue = await channel.declare_queue(spec.name, durable=True, arguments=earlier)
    except ChannelPreconditionFailed as exc:
        raise TopologyMismatch(_mismatch(spec, exc)) from exc
    added = {name: spec.arguments[name] for name in ADDED_LATER if name in spec.arguments}
    logger.warning(
        "The queue {} was declared by an earlier version without {}; it works as it is. To give it those, set them "
        "by a RabbitMQ policy (for instance: rabbitmqctl set_policy --apply-to queues lazy-lanes '^{}$' "
        '\'{{"queue-mode":"lazy"}}\'), or declare the queues afresh under a NAMESPACE of their own once this one is '
        "drained (docs/topology.md).",
        spec.name,
        added,
        spec.name.replace(".", "\\."),
    )
    return queue


def _mismatch(spec: QueueSpec, exc: ChannelPreconditionFailed) -> str:
    queue_type = spec.arguments.get("x-queue-type", "classic")
    return (
        f"The queue {spec.name} exists on RabbitMQ with other arguments than QUEUE_TYPE={queue_type} and these "
        f"settings give it (the broker says: {exc}). A queue cannot change type or "
        "arguments in place: set QUEUE_TYPE (and the delay settings) back to what this NAMESPACE was declared with, "
        "or start the new queue type under a NAMESPACE of its own once the old one is drained."
    )
