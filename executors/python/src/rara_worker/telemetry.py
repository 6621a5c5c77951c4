"""OpenTelemetry for the remote executor: one span per attempt, in the run's trace.

An ``ExecuteRequest`` carries the W3C context of rara's gRPC client span in
``trace_context``; the attempt's server span (``rara.v1.ExecutorService/Execute``, kind
SERVER) continues it, and the handler runs inside a child span (``rara.handler``). Both
carry ids only (``rara.run_id``, ``rara.step_id``, operation, attempt, fence, all strings),
never the input, the output or a secret.

``configure()`` installs an OTLP exporter when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, over ``grpc`` or ``http/protobuf`` as
``OTEL_EXPORTER_OTLP_PROTOCOL`` says (default ``http/protobuf``); the SDK reads
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_TRACES_SAMPLER`` itself.
Without an endpoint nothing is installed and the spans cost nothing (the API's no-op tracer).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from rara.v1 import executor_pb2 as pb

SERVICE: str = pb.DESCRIPTOR.services_by_name["ExecutorService"].full_name
DEFAULT_SERVICE_NAME = "rara-worker"
_PROPAGATOR = TraceContextTextMapPropagator()


def exporter_from_env(env: Mapping[str, str] = os.environ) -> SpanExporter | None:
    """The OTLP span exporter the ``OTEL_EXPORTER_OTLP_*`` variables ask for, or None."""
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint:
        return None
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    )
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter()
    raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL {protocol!r} is not supported (use grpc or http/protobuf)")


def configure(exporter: SpanExporter | None = None) -> TracerProvider | None:
    """Install a tracer provider exporting to ``exporter`` (default: from the environment).

    Returns the provider (shut it down to flush), or None when telemetry stays off.
    """
    exporter = exporter if exporter is not None else exporter_from_env()
    if exporter is None:
        return None
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def _ids(request: pb.ExecuteRequest) -> dict[str, str]:
    return {
        "rara.run_id": request.run_id,
        "rara.step_id": request.step_id,
        "rara.operation": request.operation,
        "rara.attempt": str(request.attempt),
        "rara.fence": str(request.fence),
    }


@contextmanager
def attempt_span(request: pb.ExecuteRequest) -> Iterator[trace.Span]:
    """The attempt's server span, a child of the request's ``trace_context`` (current inside)."""
    parent = _PROPAGATOR.extract(carrier=dict(request.trace_context))
    tracer = trace.get_tracer("rara_worker")
    attributes = {"rpc.system": "grpc", "rpc.service": SERVICE, "rpc.method": "Execute", **_ids(request)}
    with tracer.start_as_current_span(
        f"{SERVICE}/Execute", context=parent, kind=trace.SpanKind.SERVER, attributes=attributes
    ) as span:
        yield span


@contextmanager
def handler_span(request: pb.ExecuteRequest) -> Iterator[trace.Span]:
    """The handler's span, a child of the current (attempt) span."""
    tracer = trace.get_tracer("rara_worker")
    with tracer.start_as_current_span("rara.handler", attributes=_ids(request)) as span:
        yield span
