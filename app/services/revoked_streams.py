"""A revoked key's open streams end within seconds, whichever process revoked it: each API process looks again
at the keys of its open streams whenever the revocation generation moves (rule 13), and at every newly opened
stream's key once, so a stream opened while its key was being revoked ends too."""

import asyncio

from loguru import logger

from app.services.api_keys import ApiKeyService
from app.services.live import Hub

SWEEP_SECONDS = 1.0  # well inside the 5 s the contract allows


class RevokedStreams:
    """The sweep of one process's open streams, each second: one Redis GET, and a query only when the generation
    moved or a stream opened (every second without Redis, which then cannot say whether a key was revoked)."""

    def __init__(self, keys: ApiKeyService, hub: Hub, every: float = SWEEP_SECONDS) -> None:
        self.keys, self.hub, self.every = keys, hub, every
        self._generation: bytes | None = None
        self._live: set[str] = set()  # keys found live at this generation
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="revoked-streams")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                await self.sweep()
            except Exception as exc:  # the database may be down a while: look again next time
                logger.warning("could not check the keys of open streams ({}); trying again", exc)

    async def sweep(self) -> int:
        """End the streams whose key is revoked; how many ended."""
        open_keys = self.hub.key_ids()
        generation = await self.keys.generation()
        if generation is None or generation != self._generation:
            self._generation, self._live = generation, set()
        unchecked = open_keys - self._live
        if not unchecked:
            return 0
        revoked = await self.keys.revoked_among(unchecked)
        self._live = (self._live & open_keys) | (unchecked - revoked)
        ended = self.hub.close_keys(revoked) if revoked else 0
        if ended:
            logger.info("ended {} event stream(s) of revoked API key(s)", ended)
        return ended
