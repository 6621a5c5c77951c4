"""Tracing: an attempt's spans continue the request's ``trace_context``, ids only."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from support import collect, kinds, request

from rara.v1 import executor_pb2_grpc as pb_grpc
from rara_worker import telemetry

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TEXT = "a private sentence nobody may trace"


def test_no_endpoint_means_no_exporter() -> None:
    assert telemetry.exporter_from_env({}) is None
    assert telemetry.exporter_from_env({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) is None


def test_the_protocol_picks_the_exporter() -> None:
    grpc = telemetry.exporter_from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    )
    http = telemetry.exporter_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert grpc is not None and "grpc" in type(grpc).__module__
    assert http is not None and "http" in type(http).__module__


async def test_an_attempt_continues_the_request_trace_context_with_ids_only(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    exporter = InMemorySpanExporter()
    provider = telemetry.configure(exporter)
    assert provider is not None
    req = request("text.stats", json.dumps({"text": TEXT}))
    req.trace_context["traceparent"] = f"00-{TRACE_ID}-{PARENT_ID}-01"
    events = await collect(stub, req)
    assert kinds(events)[-1] == "succeeded"
    provider.force_flush()

    spans = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("rara.step_id") == req.step_id]
    (server,) = [s for s in spans if s.kind == SpanKind.SERVER]
    (handler,) = [s for s in spans if s.name == "rara.handler"]
    assert server.name == "rara.v1.ExecutorService/Execute"
    assert format(server.context.trace_id, "032x") == TRACE_ID
    assert server.parent is not None and format(server.parent.span_id, "016x") == PARENT_ID
    assert handler.parent is not None and handler.parent.span_id == server.context.span_id
    for span in spans:
        attributes = dict(span.attributes or {})
        assert all(isinstance(v, str) for k, v in attributes.items() if k.startswith("rara.")), attributes
        assert TEXT not in repr(attributes) and "words" not in repr(attributes)
    assert {k: v for k, v in (server.attributes or {}).items() if k.startswith("rara.")} == {
        "rara.run_id": req.run_id, "rara.step_id": req.step_id, "rara.operation": "text.stats",
        "rara.attempt": "1", "rara.fence": "42",
    }
