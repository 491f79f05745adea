"""OpenTelemetry tracing (docs/observability.md): off unless an OTLP endpoint is configured
(`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, with the SDK's other `OTEL_*` variables, read
by the SDK itself). On, each process exports its spans over OTLP/HTTP; FastAPI, asyncpg, Redis and aiohttp (webhook
deliveries, handlers' calls) are traced by their instrumentations, and the W3C trace context travels in our RabbitMQ
messages' headers: a job message carries its submit's, a job event its run's, a delivery message its fan-out's,
and a delivery's POST carries `traceparent` to the receiver. Off, every function here is a flag check."""

import os
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from loguru import logger
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind

ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
TRACEPARENT = "traceparent"
BUNDLE_HEADER = "x-traceparents"  # a bundle of events: each event's traceparent by its id
TRACER = trace.get_tracer("taskq")
_state = {"on": False}
OFF: AbstractContextManager[None] = nullcontext()  # what a span is when tracing is off: enters and leaves, no more


def configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint, and the SDK not disabled."""
    disabled = environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    return not disabled and any(environ.get(name) for name in ENDPOINTS)


def enabled() -> bool:
    return _state["on"]


def setup(role: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Start tracing in this process when it is configured (once; `role` names it: `taskq-api`,
    `taskq-jobs-worker`, `taskq-webhooks-worker`, unless `OTEL_SERVICE_NAME` does): the SDK's provider with a
    batching OTLP/HTTP exporter, and the libraries' instrumentations. Whether tracing is on."""
    if _state["on"] or not configured(environ):
        return _state["on"]
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = environ.get("OTEL_SERVICE_NAME") or f"taskq-{role}"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    instrument_libraries()
    _state["on"] = True
    logger.info("tracing on: spans of {} go to {}", name, next(environ[v] for v in ENDPOINTS if environ.get(v)))
    return True


def instrument_libraries() -> None:
    """asyncpg, Redis and aiohttp's clients, traced (and aiohttp's requests carrying `traceparent`)."""
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    for instrumentor in (AsyncPGInstrumentor(), RedisInstrumentor(), AioHttpClientInstrumentor()):  # type: ignore[no-untyped-call]
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument()


def instrument_app(app: Any) -> None:
    """The API's requests as server spans, each joining the caller's `traceparent` (tracing on only)."""
    if _state["on"]:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, excluded_urls="/metrics,/health,/ready")


def headers() -> dict[str, str]:
    """The current span's trace context as message headers (`traceparent`, `tracestate`); empty when off."""
    carrier: dict[str, str] = {}
    if _state["on"]:
        propagate.inject(carrier)
    return carrier


def _text(headers: Mapping[str, Any] | None) -> dict[str, str]:
    """AMQP headers as the propagator reads them: text values only (a header may arrive as bytes)."""
    found: dict[str, str] = {}
    for name, value in (headers or {}).items():
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str):
            found[name] = value
    return found


def consuming(name: str, headers: Mapping[str, Any] | None, **attributes: Any) -> AbstractContextManager[Span | None]:
    """A span for work a message asked for, the child of the trace context its headers carry (a new trace
    when they carry none). None when tracing is off: then a shared empty context, so the work pays nothing."""
    if not _state["on"]:
        return OFF
    parent = propagate.extract(_text(headers))
    return TRACER.start_as_current_span(name, context=parent, kind=SpanKind.CONSUMER, attributes=attributes)


def span(name: str, **attributes: Any) -> AbstractContextManager[Span | None]:
    """A span of the current trace (None, from a shared empty context, when tracing is off)."""
    if not _state["on"]:
        return OFF
    return TRACER.start_as_current_span(name, attributes=attributes)


def annotate(**attributes: Any) -> None:
    """Attributes on the current span (nothing when tracing is off)."""
    if _state["on"]:
        trace.get_current_span().set_attributes(attributes)


def event_trace(message_headers: Mapping[str, Any] | None, event_id: str, alone: bool) -> dict[str, str]:
    """The trace context of one event of a message: the message's own headers when it holds one event, else the
    event's entry of the bundle's table."""
    if not _state["on"]:
        return {}
    if alone:
        return _text(message_headers)
    table = (message_headers or {}).get(BUNDLE_HEADER)
    parent = _text(table if isinstance(table, Mapping) else {}).get(event_id)
    return {TRACEPARENT: parent} if parent else {}
