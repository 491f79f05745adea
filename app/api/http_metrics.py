"""HTTP requests by route template, method and status, with their latency, and `GET /metrics` to read them.

A pure ASGI middleware: it notes the status when the answer starts and, once the request is done, takes the route
template from the scope (the router puts the matched route there), so counting a request is two dict lookups and
two adds. A path no route matched counts as `none`, so a scan of made-up paths cannot make new series.
"""

import time
from typing import Any

from fastapi import FastAPI
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core import metrics

METRICS_PATH = "/metrics"
UNMATCHED = "none"


class HttpMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == METRICS_PATH:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        answer: dict[str, Any] = {"status": 500, "seconds": None}

        async def noting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                answer["seconds"] = time.perf_counter() - started
            await send(message)

        try:
            await self.app(scope, receive, noting_send)
        finally:
            route = scope.get("route")
            labels = (getattr(route, "path", UNMATCHED), scope["method"], str(answer["status"]))
            seconds = answer["seconds"]
            metrics.http_requests(*labels).inc()
            metrics.http_duration(*labels).observe(time.perf_counter() - started if seconds is None else seconds)


def mount(app: FastAPI) -> None:
    """Count every request of `app` and serve the metrics at GET /metrics (no auth, like any scrape target)."""
    app.add_middleware(HttpMetrics)

    @app.get(METRICS_PATH, tags=["operations"], summary="Prometheus metrics (no auth)", response_class=Response)
    async def read_metrics() -> Response:
        return Response(generate_latest(_registry()), media_type=CONTENT_TYPE_LATEST)


def _registry() -> CollectorRegistry:
    """This process's registry, or, when several API processes share their values, one that reads them all."""
    if metrics.shared_values_dir() is None:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry
