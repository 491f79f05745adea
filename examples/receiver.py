"""A webhook receiver that verifies both signatures of every delivery: `pip install standardwebhooks`, then
`WEBHOOK_SECRET=whsec_... python receiver.py` and register http://127.0.0.1:9000/hook."""

import hashlib
import hmac
import json
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SECRET = os.environ["WEBHOOK_SECRET"]  # whsec_..., from registering the endpoint
webhook = Webhook(SECRET)


def task_queue_signature_ok(headers, body):
    """The older scheme beside Standard Webhooks: hex(HMAC-SHA256(secret as UTF-8, body))."""
    expected = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, headers.get("X-Task-Queue-Signature", ""))


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        try:
            event = webhook.verify(body, dict(self.headers))  # webhook-id, -timestamp, -signature; 5-minute tolerance
            ok = task_queue_signature_ok(self.headers, body)
        except WebhookVerificationError:
            event, ok = json.loads(body), False
        print("verified" if ok else "REJECTED", self.headers["webhook-id"], event.get("type"), flush=True)
        self.send_response(200 if ok else 400)
        self.end_headers()

    def log_message(self, format, *args):
        pass  # one line per delivery, printed above


HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "9000"))), Receiver).serve_forever()
