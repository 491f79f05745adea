"""The queues view (docs/dashboard.md#queues): each queue's place in its topology, the messages waiting in retry
tiers added up per topology, and message rates.

The broker's management plugin is optional (depths come from passive declares, services/upkeep/gauges.py), so the
rate every deployment has is the change of each queue's depth per second between this API process's reads of it
(`GET /api/v1/queues` samples on each call and keeps the last minute of samples). When RABBITMQ_MANAGEMENT_URL is
set, each queue's publish and deliver rates come from the management API's /api/queues as well."""

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from loguru import logger

from app.services.upkeep.gauges import QueueDepth

KEEP_SECONDS = 60.0  # the samples kept; a rate spans the oldest of them and now
MIN_GAP_SECONDS = 1.0  # a shorter span gives no rate: too noisy to read
MANAGEMENT_TIMEOUT = 2.0
RETRY_MARK = ".retry."


@dataclass
class QueueRates:
    """One API process's samples of queue depths, and the optional management API."""

    management_url: str | None
    clock: Callable[[], float] = time.monotonic
    samples: deque[tuple[float, dict[str, int]]] = field(default_factory=deque)

    async def describe(self, depths: list[QueueDepth], namespace: str) -> dict[str, Any]:
        """The queues with their topology, kind, tier and rates; the retry tiers' messages per topology."""
        now = self.clock()
        previous = self._oldest(now)
        self.samples.append((now, {d.queue: d.ready for d in depths}))
        published = await self._management(namespace)
        items = [_item(depth, previous, now, published.get(depth.queue)) for depth in depths]
        in_retry: dict[str, int] = {}
        for item in items:
            if item["kind"] == "retry":
                in_retry[item["topology"]] = in_retry.get(item["topology"], 0) + item["ready"]
        return {
            "items": items,
            "in_retry": in_retry,
            "sampled_over_seconds": round(now - previous[0], 3) if previous else None,
            "rates_from": "management" if published else "depths",
        }

    def _oldest(self, now: float) -> tuple[float, dict[str, int]] | None:
        """The oldest sample of the last minute at least MIN_GAP_SECONDS old; older ones are dropped."""
        while self.samples and self.samples[0][0] < now - KEEP_SECONDS:
            self.samples.popleft()
        if self.samples and self.samples[0][0] <= now - MIN_GAP_SECONDS:
            return self.samples[0]
        return None

    async def _management(self, namespace: str) -> dict[str, tuple[float | None, float | None]]:
        """queue (without the namespace) -> (publish/s, deliver/s) from the management API; {} without one or
        when it does not answer (the depth-based rates stand alone then)."""
        if not self.management_url:
            return {}
        url = self.management_url.rstrip("/") + "/api/queues"
        params = {"columns": "name,message_stats"}
        try:
            async with httpx.AsyncClient(timeout=MANAGEMENT_TIMEOUT) as client:
                answer = await client.get(url, params=params)
                answer.raise_for_status()
                queues = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            logger.debug("the management API did not answer: {}", type(exc).__name__)
            return {}
        prefix = f"{namespace}."
        return {
            str(q["name"]).removeprefix(prefix): _rates(q.get("message_stats") or {})
            for q in queues
            if isinstance(q, dict) and str(q.get("name", "")).startswith(prefix)
        }


def _rates(stats: dict[str, Any]) -> tuple[float | None, float | None]:
    def rate(key: str) -> float | None:
        details = stats.get(f"{key}_details")
        return float(details["rate"]) if isinstance(details, dict) and "rate" in details else None

    return rate("publish"), rate("deliver_get")


def _item(
    depth: QueueDepth,
    previous: tuple[float, dict[str, int]] | None,
    now: float,
    published: tuple[float | None, float | None] | None,
) -> dict[str, Any]:
    base, _, tier = depth.queue.partition(RETRY_MARK)
    kind = "retry" if tier else "dlq" if depth.queue.endswith(".dlq") else "queue"
    change = None
    if previous is not None and depth.queue in previous[1]:
        change = round((depth.ready - previous[1][depth.queue]) / (now - previous[0]), 3)
    publish, deliver = published or (None, None)
    return {
        "queue": depth.queue,
        "ready": depth.ready,
        "consumers": depth.consumers,
        "topology": depth.queue.split(".", 1)[0],
        "kind": kind,
        "feeds": base if tier else None,
        "tier": tier or None,
        "change_per_second": change,
        "publish_per_second": publish,
        "deliver_per_second": deliver,
    }
