"""`python -m bench.metrics_off <the service's arguments>`: the service with its metrics switched off, the other
arm of the metrics-cost scenario (bench/metrics_cost.py).

prometheus_client's `inc`, `set` and `observe` become no-ops, and the HTTP middleware only passes each request on,
so what remains is the service without the cost of moving a metric; `/metrics` still answers (with nothing moved).
"""

import sys
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from starlette.types import Receive, Scope, Send

from app.api.http_metrics import HttpMetrics


def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


async def _uncounted(self: HttpMetrics, scope: Scope, receive: Receive, send: Send) -> None:
    await self.app(scope, receive, send)


Counter.inc = _nothing  # type: ignore[method-assign]
Gauge.set = _nothing  # type: ignore[method-assign]
Gauge.inc = _nothing  # type: ignore[method-assign]
Gauge.dec = _nothing  # type: ignore[method-assign]
Histogram.observe = _nothing  # type: ignore[method-assign]
HttpMetrics.__call__ = _uncounted  # type: ignore[method-assign]

if __name__ == "__main__":
    from app.__main__ import main

    sys.exit(main(sys.argv[1:]))
