"""The broker's queues, named without the namespace (docs/dashboard.md#queues)."""

from pydantic import BaseModel, Field

MANAGEMENT = "From the management API when RABBITMQ_MANAGEMENT_URL is set; else null."


class QueueOut(BaseModel):
    queue: str
    ready: int
    consumers: int
    topology: str = Field(description="The first part of its name: `jobs`, `webhooks`.")
    kind: str = Field(description="`queue` (a lane or a worker's queue), `retry` (a delay tier) or `dlq`.")
    feeds: str | None = Field(description="For a retry tier, the lane it returns to (`jobs.default`), or `webhooks`.")
    tier: str | None = Field(description="For a retry tier, its delay, as in its name (`240ms`).")
    change_per_second: float | None = Field(
        description="How fast `ready` changed between this API process's previous read (up to a minute ago, at "
        "least a second) and this one: arrivals less departures per second; null on the first read."
    )
    publish_per_second: float | None = Field(description=MANAGEMENT)
    deliver_per_second: float | None = Field(description=MANAGEMENT)


class QueuesOut(BaseModel):
    items: list[QueueOut]
    in_retry: dict[str, int] = Field(description="Messages waiting in retry tiers, per topology (`jobs`, `webhooks`).")
    sampled_over_seconds: float | None = Field(description="The span the `change_per_second` figures cover.")
    rates_from: str = Field(description="`depths` (changes between reads) or `management` (the management API too).")
