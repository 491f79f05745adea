"""A webhook receiver that verifies every signature: `python -m bench.receiver --port P` (secret in
BENCH_WEBHOOK_SECRET, the endpoint's `whsec_...`).

`POST /hook` notes the arrival time first, then verifies the Standard Webhooks signature with the
`standardwebhooks` library (the receiver side a client would use), answers 200 when it holds and 400 when it
does not. `GET /records` returns what arrived: `{"verified", "rejected", "records": [[arrival, webhook-id,
event type, job id], ...]}`; `POST /reset` forgets it. Served by uvicorn with the service's server settings.
"""

import argparse
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
    def __init__(self, secret: str) -> None:
        self.webhook = Webhook(secret)
        self.records: list[tuple[float, str, str, str | None]] = []
        self.rejected = 0

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
            payload = {"verified": len(self.records), "rejected": self.rejected, "records": self.records}
            await _answer(send, 200, json.dumps(payload).encode())
        elif method == "POST" and path == "/reset":
            self.records, self.rejected = [], 0
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
        await _answer(send, 200, b'{"verified":true}')


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.receiver", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    receiver = Receiver(os.environ["BENCH_WEBHOOK_SECRET"])
    uvicorn.run(receiver, host="127.0.0.1", port=args.port, log_config=None, access_log=False, lifespan="off")
    return 0


if __name__ == "__main__":
    sys.exit(main())
