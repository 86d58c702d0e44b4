"""OpenTelemetry tracing of each call down to the store, with the `tracing` extra
(`pip install 'bergen[tracing]'`); off unless asked for.

`CallTracer` is a call observer of the edge: a SERVER span per RPC (named
`bergen.v1.BergenService/Play`, with `rpc.*` attributes, the match, tournament and seat the
call names, and its status), made current while the call runs, so that the store's work in it
(`bergen.server.observed.ObservedStore`: append, read_rows, read_stream) becomes its child
spans. The store opens a span only inside a traced call: the feed's and the clock keeper's
background reads make none.

`bergen serve --trace` (or an `OTEL_TRACES_EXPORTER` other than `none`) sets up the SDK: a
batch span processor exporting by OTLP/gRPC (`OTEL_EXPORTER_OTLP_ENDPOINT`, default
localhost:4317), or `console`; the resource is the SDK's (`OTEL_SERVICE_NAME`, default
`bergen`; `OTEL_RESOURCE_ATTRIBUTES`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import grpc

from .edge import Call

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

EXTRA_HINT = "pip install 'bergen[tracing]'"
EXPORTER_ENV = "OTEL_TRACES_EXPORTER"


class TracingUnavailable(RuntimeError):
    """Tracing was asked for without the OpenTelemetry SDK installed."""


def wanted(flag: bool) -> bool:
    """Whether tracing is asked for: `--trace`, or an OTEL_TRACES_EXPORTER other than none."""
    exporter = os.environ.get(EXPORTER_ENV, "").strip().lower()
    return flag or exporter not in ("", "none")


def available() -> bool:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True


def set_up() -> TracerProvider:
    """A tracer provider exporting as the OTEL_* environment says (see the module). Raises
    TracingUnavailable without the SDK (or without the OTLP exporter it needs), ValueError for
    an exporter it does not know."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )
    except ImportError as e:
        raise TracingUnavailable(
            f"tracing needs the OpenTelemetry SDK, which is not installed: {EXTRA_HINT}"
        ) from e
    kind = os.environ.get(EXPORTER_ENV, "").strip().lower() or "otlp"
    exporter: SpanExporter
    if kind == "console":
        exporter = ConsoleSpanExporter()
    elif kind == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError as e:
            raise TracingUnavailable(
                f"tracing by OTLP needs its exporter, which is not installed: {EXTRA_HINT}"
            ) from e
        exporter = OTLPSpanExporter()
    else:
        raise ValueError(f"{EXPORTER_ENV}={kind!r}: this server exports by otlp or console")
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "bergen"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class CallTracer:
    """A span per call, current while it runs (see the module)."""

    def __init__(self, tracer: Tracer) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self._tracer = tracer
        self._context = context
        self._trace = trace
        self._server = SpanKind.SERVER
        self._internal = SpanKind.INTERNAL
        self._error: Callable[[str], Status] = lambda why: Status(StatusCode.ERROR, why)

    def call_started(self, call: Call) -> None:
        span = self._tracer.start_span(
            call.method.lstrip("/"),
            kind=self._server,
            attributes={
                "rpc.system": "grpc",
                "rpc.service": call.service,
                "rpc.method": call.rpc,
                "network.peer.address": call.peer,
            },
        )
        token = self._context.attach(self._trace.set_span_in_context(span))
        call.notes["span"] = (span, token)

    def call_ended(self, call: Call) -> None:
        held = call.notes.pop("span", None)
        if held is None:
            return
        span, token = held
        try:
            span.set_attribute("rpc.grpc.status_code", call.code.value[0])
            for key, value in call.named().items():
                span.set_attribute(f"bergen.{key}", value)
            if call.code is not grpc.StatusCode.OK:
                span.set_attribute("bergen.reason", call.reason or call.code.name)
                span.set_status(self._error(f"{call.code.name} {call.reason}".strip()))
            span.end()
        finally:
            self._context.detach(token)

    def span(self, name: str, attributes: dict[str, Any]) -> AbstractContextManager[Any]:
        """A child span of the current call's span; nothing outside a traced call."""
        if not self._trace.get_current_span().is_recording():
            return nullcontext()
        return self._tracer.start_as_current_span(name, kind=self._internal, attributes=attributes)
