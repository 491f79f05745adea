"""A request's body must arrive in full within a deadline: a client that sends it a byte at a time, slowly, is
answered 408 and its connection closed, rather than holding a connection and a task for as long as it likes.

Pure ASGI: the deadline starts at the first read of the body and ends with its last part; reads after that
(a streaming response waiting for the client to go away) are not timed.
"""

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import HTTPException

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyDeadline:
    def __init__(self, app: App, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        complete = False

        async def timed() -> Message:
            nonlocal deadline, complete
            if complete:
                return await receive()
            deadline = deadline or loop.time() + self.seconds
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                # FastAPI passes an HTTPException raised while it reads a body through as it is.
                detail = f"The request body did not arrive within {self.seconds:g} seconds; send it at once and retry."
                raise HTTPException(408, detail, headers={"Connection": "close"}) from None
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        await self.app(scope, timed, send)
