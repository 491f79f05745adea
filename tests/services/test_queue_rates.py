"""The queues view's figures from depths: retry tiers added up per topology, and a depth's change per second
between two reads at least a second apart, within the last minute."""

from app.services.queue_rates import QueueRates
from app.services.upkeep.gauges import QueueDepth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def depths(default: int, tier: int, hooks_tier: int) -> list[QueueDepth]:
    return [
        QueueDepth("jobs.default", default, 4),
        QueueDepth("jobs.default.retry.240ms", tier, 0),
        QueueDepth("jobs.bulk.retry.240ms", 5, 0),
        QueueDepth("jobs.dlq", 7, 0),
        QueueDepth("webhooks.deliver", 0, 2),
        QueueDepth("webhooks.retry.2880ms", hooks_tier, 0),
    ]


async def test_tiers_add_up_per_topology_and_rates_span_the_oldest_sample_of_the_minute() -> None:
    clock = Clock()
    rates = QueueRates(None, clock=clock)
    first = await rates.describe(depths(10, 3, 2), "ns")
    assert first["in_retry"] == {"jobs": 8, "webhooks": 2} and first["sampled_over_seconds"] is None
    clock.now += 0.5  # too soon for a rate
    assert (await rates.describe(depths(12, 3, 2), "ns"))["sampled_over_seconds"] is None
    clock.now += 4.5
    later = await rates.describe(depths(30, 0, 2), "ns")
    items = {item["queue"]: item for item in later["items"]}
    assert later["sampled_over_seconds"] == 5.0 and later["rates_from"] == "depths"
    assert items["jobs.default"]["change_per_second"] == 4.0  # (30 - 10) / 5, from the oldest sample
    assert items["jobs.default.retry.240ms"]["change_per_second"] == -0.6
    assert (items["jobs.dlq"]["kind"], items["jobs.default.retry.240ms"]["tier"]) == ("dlq", "240ms")
    clock.now += 61  # every sample is older than a minute now: no rate until the next read
    assert (await rates.describe(depths(30, 0, 2), "ns"))["sampled_over_seconds"] is None
