"""The broker's queues, named without the namespace."""

from pydantic import BaseModel


class QueueOut(BaseModel):
    queue: str
    ready: int
    consumers: int


class QueuesOut(BaseModel):
    items: list[QueueOut]
