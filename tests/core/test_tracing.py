"""Trace context in and out of our messages, with the SDK's in-memory exporter: a job message carries the current
span's context and the worker's span continues it; a bundle of events carries each event's by id; with tracing off
nothing is added and no span is made."""

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.core import tracing
from app.core.broker import Outgoing
from app.core.messages import JobMessage, bundle, job_outgoing
from app.core.names import Names
from tests.support import make_job

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Tracing on for one test, its spans kept in memory (the provider is set once for the process)."""
    trace.set_tracer_provider(PROVIDER)
    monkeypatch.setitem(tracing._state, "on", True)
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def message() -> Outgoing:
    return job_outgoing(Names("tracing"), JobMessage.from_row(make_job(status="queued")))


def test_a_job_message_carries_the_submits_trace_and_the_worker_continues_it(traced: InMemorySpanExporter) -> None:
    with tracing.span("submit") as submit:
        outgoing = message()
    assert submit is not None
    context = submit.get_span_context()
    assert outgoing.headers["traceparent"].split("-")[:3] == [
        "00",
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
    ]
    as_received = {name: value.encode() if name == "traceparent" else value for name, value in outgoing.headers.items()}
    with tracing.consuming("job.process", as_received, **{"job.id": "j"}) as process, tracing.span("job.run"):
        assert process is not None
    spans = {span.name: span for span in traced.get_finished_spans()}
    assert spans["job.process"].parent is not None and spans["job.process"].parent.span_id == context.span_id
    assert spans["job.process"].context.trace_id == context.trace_id
    assert spans["job.run"].parent is not None and spans["job.run"].parent.span_id == process.get_span_context().span_id
    assert spans["job.process"].kind is trace.SpanKind.CONSUMER and spans["job.process"].attributes == {"job.id": "j"}


def test_a_bundle_carries_each_events_trace_by_its_id(traced: InMemorySpanExporter) -> None:
    first, second = "00-" + "1" * 32 + "-" + "a" * 16 + "-01", "00-" + "2" * 32 + "-" + "b" * 16 + "-01"
    events = [
        Outgoing("events", "job.echo.succeeded", b"{}", {"traceparent": first}, message_id="evt_1"),
        Outgoing("events", "job.echo.succeeded", b"{}", {"traceparent": second}, message_id="evt_2"),
        Outgoing("events", "job.echo.succeeded", b"{}", {}, message_id="evt_3"),
    ]
    bundled = bundle(events)
    assert bundled.headers == {tracing.BUNDLE_HEADER: {"evt_1": first, "evt_2": second}}
    assert tracing.event_trace(bundled.headers, "evt_2", alone=False) == {"traceparent": second}
    assert tracing.event_trace(bundled.headers, "evt_3", alone=False) == {}
    assert tracing.event_trace(events[0].headers, "evt_1", alone=True) == {"traceparent": first}


def test_with_tracing_off_nothing_is_added_and_no_span_is_made() -> None:
    assert not tracing.enabled()
    with tracing.span("submit") as submit, tracing.consuming("job.process", {"traceparent": "x"}) as process:
        outgoing = message()
    assert submit is None and process is None
    assert "traceparent" not in outgoing.headers and tracing.headers() == {}
    assert bundle([outgoing, outgoing]).headers == {}
