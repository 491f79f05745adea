"""Wiring of the outbox, shared by the API and worker processes (its relay is a background worker)."""

from app.core.resources import Resources
from app.services.outbox import Outbox

# A relay pass holds its rows for this many publish timeouts: its publish is bounded by one, and what is left
# (the rows read and, once confirmed, deleted) takes a fraction of another.
HOLD_PUBLISH_TIMEOUTS = 3


def make_outbox(resources: Resources) -> Outbox:
    """The outbox with its relay settings; a publish must time out before the relay may take its row, and a
    relay's hold on its rows outlasts its own publish."""
    settings, stores = resources.settings, resources.stores
    relay_after = max(settings.outbox_relay_after, settings.publish_timeout_seconds + 1)
    pubsub = frozenset({resources.names.events_exchange})
    hold = HOLD_PUBLISH_TIMEOUTS * settings.publish_timeout_seconds
    return Outbox(stores.jobs, stores.outbox, resources.broker, relay_after, settings.outbox_batch_size, hold, pubsub)
