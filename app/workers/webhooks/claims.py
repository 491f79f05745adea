"""Rule 4 for a batch of delivery messages: the deliveries leased by one claim, and what each message means for
its delivery (send it, drop the message, dead-letter it, or wait)."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from app.core.statuses import DeliveryStatus
from app.models.rows import DeliveryRow
from app.models.types import utcnow
from app.stores.deliveries import DeliveryStore
from app.workers.verdicts import Defer, Drop, ToDeadLetters


@dataclass(frozen=True)
class Send:
    """Ours to attempt: the delivery as claimed, the secrets to sign with (newest first), and whether its
    endpoint was failing when claimed (if not, a success leaves the endpoint's row alone)."""

    delivery: DeliveryRow
    secrets: list[str]
    failing: bool = False


Claim = Send | Drop | ToDeadLetters | Defer


async def claim(store: DeliveryStore, delivery_ids: list[str], lease_seconds: float) -> list[Claim]:
    """Take the deliveries' leases for `lease_seconds` by one compare-and-set, so two live workers never send one
    at once; a verdict for each message, in their order."""
    now = utcnow()
    taken = await store.claim(delivery_ids, now, now + timedelta(seconds=lease_seconds))
    ours = {row["id"]: row for row in taken.claimed}
    verdicts: list[Claim] = []
    for delivery_id in delivery_ids:
        delivery = ours.pop(delivery_id, None)  # a duplicate message in the batch: the first one sends
        if delivery is not None:
            secrets = taken.secrets[delivery_id]
            verdicts.append(Send(delivery, secrets, delivery["endpoint_id"] in taken.failing))
        elif delivery_id in taken.seen:
            verdicts.append(_not_ours(taken.seen[delivery_id], now))
        elif delivery_id in taken.secrets:  # a second message for a delivery this batch claimed
            verdicts.append(Defer(lease_seconds, in_flight=True))
        else:
            verdicts.append(Drop("no such delivery"))
    return verdicts


def _not_ours(delivery: DeliveryRow, now: datetime) -> Drop | ToDeadLetters | Defer:
    if delivery["status"] == DeliveryStatus.SUCCEEDED:
        return Drop("delivery already succeeded")
    if delivery["status"] == DeliveryStatus.FAILED:
        return ToDeadLetters([])
    lease, due = delivery["lease_until"], delivery["next_attempt_at"]
    waits = [t for t in (lease, due) if t is not None and t > now]
    in_flight = lease is not None and lease > now and (due is None or due <= now)
    return Defer(max((t - now).total_seconds() for t in waits) if waits else 0.1, in_flight)
