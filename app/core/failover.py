"""One robust connection over the nodes of a RabbitMQ cluster: `RABBITMQ_URL` may list several, comma-separated."""

from typing import Any

from aio_pika import RobustConnection
from yarl import URL

from app.core.incoming import LeanChannel

# aio-pika's one attempt at opening the transport of `self.url`. It is private, so aio-pika is pinned, and
# tests/flows/test_cluster.py fails over between listed nodes and would catch a rename.
_connect_transport = RobustConnection._RobustConnection__connect_transport  # type: ignore[attr-defined]


def node_urls(url: str) -> list[str]:
    """The URLs of a comma-separated RABBITMQ_URL, in order."""
    nodes = [part.strip() for part in url.split(",") if part.strip()]
    if not nodes:
        raise ValueError("RABBITMQ_URL lists no broker")
    return nodes


class FailoverConnection(RobustConnection):
    """Every connection attempt after the first goes to the next node in turn, so when its node goes away the
    connection comes back on one that answers, and aio-pika restores its channels (confirms and prefetch), queues,
    bindings and consumers there as after any reconnect. The nodes share credentials and URL options. Its
    channels are `LeanChannel`s, whose queues consume a `Handler` without aio-pika's per-message wrapping."""

    CHANNEL_CLASS = LeanChannel

    def __init__(self, nodes: list[str], first: int = 0, **kwargs: Any) -> None:
        self.nodes = [URL(node) for node in nodes]
        self._at = first
        self._attempts = 0
        self.restoring = False  # connected, and aio-pika is restoring the channels and their consumers
        super().__init__(self.nodes[first], **kwargs)

    async def _on_connected(self) -> None:
        self.restoring = True
        try:
            await super()._on_connected()
        finally:
            self.restoring = False

    async def _RobustConnection__connect_transport(self) -> None:
        if self._attempts:
            self._at = (self._at + 1) % len(self.nodes)
            self.url = self.nodes[self._at]
        self._attempts += 1
        await _connect_transport(self)
