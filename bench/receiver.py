"""A webhook receiver that verifies every signature: `python -m bench.receiver --port P [--delay S]` (secret
in BENCH_WEBHOOK_SECRET, the endpoint's `whsec_...`).

`POST /hook` notes the arrival time first, then verifies the Standard Webhooks signature with the
`standardwebhooks` library (the receiver side a client would use), answers 200 when it holds (after `--delay`
seconds: a slow endpoint) and 400 when it does not. `GET /records` returns what arrived: `{"verified",
"rejected", "answered", "in_flight", "peak_in_flight", "records": [[arrival, webhook-id, event type, job id],
...]}` (answered: verified callbacks already answered; in flight: verified, not yet answered); `POST /reset`
forgets it. Served by uvicorn with the service's server settings.
"""

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class Receiver:
    def __init__(self, secret: str, delay: float = 0.0) -> None:
        self.webhook = Webhook(secret)
        self.delay = delay
        self.records: list[tuple[float, str, str, str | None]] = []
        self.rejected = 0
        self.answered = self.in_flight = self.peak_in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        arrived = time.time()
        body = b""
        while True:
            part = await receive()
            body += part.get("body", b"")
            if not part.get("more_body"):
                break
        path, method = scope["path"], scope["method"]
        if method == "POST" and path == "/hook":
            await self._hook(scope, body, arrived, send)
        elif method == "GET" and path == "/records":
            await _answer(send, 200, json.dumps(self._seen()).encode())
        elif method == "POST" and path == "/reset":
            self.records, self.rejected, self.answered, self.peak_in_flight = [], 0, 0, self.in_flight
            await _answer(send, 200, b"{}")
        else:
            await _answer(send, 404, b"{}")

    async def _hook(self, scope: Scope, body: bytes, arrived: float, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            event = self.webhook.verify(body, headers)
        except (WebhookVerificationError, ValueError):
            self.rejected += 1
            await _answer(send, 400, b'{"verified":false}')
            return
        job = ((event.get("data") or {}).get("job") or {}) if isinstance(event, dict) else {}
        kind = event.get("type", "") if isinstance(event, dict) else ""
        self.records.append((arrived, headers.get("webhook-id", ""), kind, job.get("id")))
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            await _answer(send, 200, b'{"verified":true}')
            self.answered += 1
        finally:
            self.in_flight -= 1

    def _seen(self) -> dict[str, Any]:
        return {
            "verified": len(self.records),
            "rejected": self.rejected,
            "answered": self.answered,
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "records": self.records,
        }


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.receiver", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0, help="answer a verified callback after this long")
    args = parser.parse_args(argv)
    receiver = Receiver(os.environ["BENCH_WEBHOOK_SECRET"], args.delay)
    uvicorn.run(receiver, host="127.0.0.1", port=args.port, log_config=None, access_log=False, lifespan="off")
    return 0


if __name__ == "__main__":
    sys.exit(main())
