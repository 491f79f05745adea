"""An OTLP/HTTP trace receiver on loopback, as a collector speaks it: `POST /v1/traces` with an
ExportTraceServiceRequest in protobuf (decoded with the opentelemetry-proto package), answered 200. It keeps every
span it was sent, with the name of the service that sent it."""

import contextlib
import gzip
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.receiver import served
from tests.support import free_port


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    attributes: dict[str, object]


@dataclass
class OtlpReceiver:
    port: int
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def of_trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.trace_id == trace_id]

    async def _traces(self, request: Request) -> Response:
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest.FromString(body)
        self.requests += 1
        for resource_spans in export.resource_spans:
            names = [a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"]
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    attributes = {a.key: _value(a.value) for a in span.attributes}
                    self.spans.append(
                        ReceivedSpan(
                            names[0] if names else "",
                            span.name,
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            attributes,
                        )
                    )
        answer = ExportTraceServiceResponse().SerializeToString()
        return Response(answer, media_type="application/x-protobuf")


def _value(value: object) -> object:
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(value, kind) if kind else None


@contextlib.asynccontextmanager
async def running_otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    receiver = OtlpReceiver(free_port())
    app = Starlette(routes=[Route("/v1/traces", receiver._traces, methods=["POST"])])
    async with served(app, receiver.port):
        yield receiver
