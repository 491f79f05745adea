"""The guard's DNS cache: a host's answer kept for its TTL, clamped, so a delivery burst resolves a name once."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app.core.ssrf import Resolver

DNS_MIN_SECONDS = 1.0
DNS_MAX_SECONDS = 300.0
DNS_DEFAULT_SECONDS = 30.0
DNS_CACHE_ENTRIES = 1024


@dataclass
class DnsCache:
    """Answers kept for their TTL clamped to [min, max] (`default_seconds` when the resolver reports none, as the
    operating system's does, and the hosts file); failures are not kept."""

    resolver: Resolver
    min_seconds: float = DNS_MIN_SECONDS
    max_seconds: float = DNS_MAX_SECONDS
    default_seconds: float = DNS_DEFAULT_SECONDS
    clock: Callable[[], float] = time.monotonic
    max_entries: int = DNS_CACHE_ENTRIES
    _answers: dict[tuple[str, int], tuple[list[str], float]] = field(default_factory=dict, init=False)

    async def resolve(self, host: str, port: int) -> list[str]:
        """The host's addresses, from the cache while they are fresh."""
        key = (host, port)
        cached = self._answers.get(key)
        if cached is not None and cached[1] > self.clock():
            return cached[0]
        addresses, ttl = await self.resolver.resolve(host, port)
        if not addresses:
            raise OSError(f"no address was found for {host}")
        keep = min(max(self.default_seconds if ttl is None else ttl, self.min_seconds), self.max_seconds)
        if keep > 0:
            self._remember(key, addresses, self.clock() + keep)
        return addresses

    def _remember(self, key: tuple[str, int], addresses: list[str], until: float) -> None:
        self._answers.pop(key, None)
        if len(self._answers) >= self.max_entries:
            now = self.clock()
            self._answers = {k: v for k, v in self._answers.items() if v[1] > now}
        if len(self._answers) >= self.max_entries:
            del self._answers[next(iter(self._answers))]  # the oldest answer
        self._answers[key] = (addresses, until)
