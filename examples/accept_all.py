"""A receiver that answers 200 to every POST and prints what came, one line each (the path, the webhook id, the
event type and the body), without verifying anything: the endpoint the Postman collection's webhook and
notification requests need (`python examples/accept_all.py`, then run the collection with `receiver_url` =
http://127.0.0.1:9000). To verify signatures, use receiver.py or receiver.js."""

import json
import os
from http.server import BaseHTTPRequestHandler, HTTPServer


class AcceptAll(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"] or 0))
        kind = json.loads(body).get("type", "-") if body.startswith(b"{") else "-"
        print("POST", self.path, self.headers.get("webhook-id", "-"), kind, body.decode(errors="replace"), flush=True)
        self.send_response(200)
        self.end_headers()

    def log_message(self, format, *args):
        pass  # one line per request, printed above


HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "9000"))), AcceptAll).serve_forever()
