"""What the telemetry tests share: an in-memory span pipeline, an in-process traced upstream, an OTLP receiver.

* ``recorded`` (a fixture in ``conftest``-less form: ``Recorded.start``): the
  process-wide tracer and meter providers are installed once per test process
  (OpenTelemetry allows one global provider) through the production pipeline
  (``supervisor.telemetry.sdk.tracer_provider``: the gated tracer, span-derived
  metrics, ``Redacting``) with an in-memory exporter; each test turns
  ``TELEMETRY`` on, and off again when it ends, so every other test runs with
  telemetry off exactly as in production.
* ``serve_traced_upstream``: a low-level SDK ``Server`` (so it has the SDK's own
  OpenTelemetry middleware) over streamable HTTP, in this process, with tools
  for each outcome; its SERVER spans land in the same in-memory exporter, and
  it records each POST's headers.
* ``OtlpReceiver``: a tiny OTLP/HTTP receiver (protobuf) on port 0, for the
  end-to-end tests, whose sidecar and fixture export the standard way.

Concurrency: each helper owns the nursery it opens; every wait is bounded by
the caller's ``trio.fail_after``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, cast

import mcp_types as types
import trio
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from supervisor.telemetry import sdk
from supervisor.telemetry.durations import DurationReading
from supervisor.telemetry.spans import TELEMETRY

CANARY: Final = "CANARY"
TRACE_ID: Final = "4bf92f3577b34da6a3ce929d0e0e4736"
HOST_SPAN_ID: Final = "00f067aa0ba902b7"
TRACEPARENT: Final = f"00-{TRACE_ID}-{HOST_SPAN_ID}-01"
TRACESTATE: Final = "rojo=00f067aa0ba902b7"
BAGGAGE: Final = "userId=alice"
HOST_META: Final = cast(
    types.RequestParamsMeta, {"traceparent": TRACEPARENT, "tracestate": TRACESTATE, "baggage": BAGGAGE}
)
"""What a traced host puts in a request's ``_meta`` (SEP-414)."""


class InMemoryDurationReader(DurationReading, InMemoryMetricReader):
    """The SDK's in-memory reader, with the duration histograms as production's readers have them."""


_installed: list[tuple[InMemorySpanExporter, InMemoryMetricReader]] = []


def _install_once() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    """The process's providers: the production pipeline with an in-memory exporter (OpenTelemetry allows one)."""
    if not _installed:
        from opentelemetry.sdk.metrics import Histogram  # noqa: PLC0415
        from opentelemetry.sdk.metrics.export import AggregationTemporality  # noqa: PLC0415

        # Delta: each read returns what was recorded since the last one, so a test sees its own points only.
        reader = InMemoryDurationReader(
            preferred_temporality={Histogram: AggregationTemporality.DELTA}, resource=Resource.create()
        )
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        exporter = InMemorySpanExporter()
        trace.set_tracer_provider(sdk.tracer_provider([exporter], batch=False))
        _installed.append((exporter, reader))
    return _installed[0]


@dataclass
class Recorded:
    """The spans and metrics exported while one test had telemetry on."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    collected: list[tuple[str, Any]] = field(default_factory=list)

    @classmethod
    @contextmanager
    def start(cls, *, capture_content: bool = False, secrets: Sequence[str] = ()) -> Iterator[Recorded]:
        exporter, reader = _install_once()
        exporter.clear()
        reader.get_metrics_data()  # drop what earlier tests recorded (cumulative, but read out per test below)
        TELEMETRY.capture_content = capture_content
        TELEMETRY.secrets = tuple(secrets)
        TELEMETRY.on = True
        try:
            yield cls(exporter, reader)
        finally:
            TELEMETRY.on = False
            TELEMETRY.capture_content = False
            TELEMETRY.secrets = ()

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str, kind: SpanKind | None = None) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name and (kind is None or s.kind is kind)]

    def one(self, name: str, kind: SpanKind) -> ReadableSpan:
        found = self.named(name, kind)
        assert len(found) == 1, (name, kind, [(s.name, s.kind) for s in self.spans()])
        return found[0]

    def histogram_points(self, metric: str) -> list[Any]:
        """Every data point of ``metric`` this test recorded (read so far or now)."""
        data = self.reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data is not None else ():
            for scope in resource_metrics.scope_metrics:
                for item in scope.metrics:
                    self.collected.extend((item.name, point) for point in item.data.data_points)
        return [point for name, point in self.collected if name == metric]


@contextmanager
def as_traced_host() -> Iterator[None]:
    """Run the in-process host as a traced one: its current span is the remote ``TRACEPARENT`` span.

    The host's own SDK client (in this process, under the same provider) then
    makes its CLIENT span under it and injects that span's context, as a
    traced host would: the trace starts at ``HOST_SPAN_ID`` either way.
    """
    from opentelemetry import context as otel_context  # noqa: PLC0415
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState  # noqa: PLC0415

    remote = SpanContext(
        int(TRACE_ID, 16),
        int(HOST_SPAN_ID, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState.from_header([TRACESTATE]),
    )
    token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(remote)))
    try:
        yield
    finally:
        otel_context.detach(token)


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


def hex_span(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.span_id:016x}"


def parent_of(span: ReadableSpan) -> str | None:
    return None if span.parent is None else f"{span.parent.span_id:016x}"


def everything_exported(spans: Sequence[ReadableSpan]) -> str:
    """All text a span pipeline would send: names, attributes, events, status, resource (for the canary grep)."""
    parts: list[str] = []
    for span in spans:
        parts.append(span.to_json())
    return "\n".join(parts)


# -- an in-process traced upstream (streamable HTTP) -------------------------------------


@dataclass
class TracedUpstream:
    url: str
    headers: list[dict[str, str]] = field(default_factory=list)
    """Headers of every POST it received, lower-cased names."""
    metas: list[dict[str, Any]] = field(default_factory=list)
    """``_meta`` of every tools/call it received."""
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)

    def stop(self) -> None:
        """Stop serving: every connection to it breaks."""
        self.scope.cancel()


_TOOLS: Final = [
    types.Tool(name=name, input_schema={"type": "object"}) for name in ("echo", "fail", "boom", "slow", "secret")
]


def _upstream_server(upstream: TracedUpstream) -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=_TOOLS)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        upstream.metas.append(dict(ctx.meta or {}))
        args = params.arguments or {}
        text = str(args.get("text", ""))
        match params.name:
            case "echo":
                return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
            case "fail":  # a tool error: an isError result
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=f"failed: {text}")], is_error=True
                )
            case "boom":  # a JSON-RPC error whose message carries the argument
                raise MCPError(types.INVALID_PARAMS, f"boom: {text}")
            case "slow":
                await trio.sleep(float(args.get("seconds", 60)))
                return types.CallToolResult(content=[types.TextContent(type="text", text="done")])
            case "secret":  # a result that carries content the spans must not
                return types.CallToolResult(content=[types.TextContent(type="text", text=f"{CANARY}-result")])
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")

    return Server("traced-upstream", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


@asynccontextmanager
async def serve_traced_upstream() -> AsyncIterator[TracedUpstream]:
    """The traced upstream on 127.0.0.1, port 0, until the block ends."""
    from hypercorn.config import Config  # noqa: PLC0415
    from hypercorn.trio import serve  # noqa: PLC0415

    upstream = TracedUpstream(url="")
    server = _upstream_server(upstream)
    inner = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("method") == "POST":
            upstream.headers.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        await inner(scope, receive, send)

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(partial(_serve_in, upstream.scope, serve, cast(Any, app), config))
        upstream.url = f"{binds[0]}/mcp"
        yield upstream
        nursery.cancel_scope.cancel()


async def _serve_in(
    scope: trio.CancelScope, serve: Any, app: Any, config: Any, *, task_status: trio.TaskStatus[Any]
) -> None:
    with scope:
        await serve(app, config, mode="asgi", task_status=task_status)


def upstream_table(url: str, **table: Any) -> dict[str, Any]:
    """A ``[mcp_servers.<name>]`` table for the traced upstream."""
    return {"url": url, **table}


# -- an OTLP/HTTP receiver (end to end) ---------------------------------------------------


@dataclass
class ExportedSpan:
    """One span an OTLP exporter sent, decoded."""

    service: str
    scope: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str | None
    attributes: dict[str, Any]
    status_code: int
    status_message: str
    raw: str
    """Everything it carried, as text (for the canary grep)."""


@dataclass
class OtlpReceiver:
    """Collects what OTLP/HTTP exporters post to ``endpoint`` (``/v1/traces``, ``/v1/metrics``)."""

    endpoint: str = ""
    spans: list[ExportedSpan] = field(default_factory=list)
    metric_names: set[str] = field(default_factory=set)
    metric_points: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    changed: trio.Event = field(default_factory=trio.Event)

    def env(self) -> dict[str, str]:
        """The standard variables that point an OpenTelemetry SDK here, exporting soon after each span ends."""
        return {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_METRIC_EXPORT_INTERVAL": "200",
        }

    def _take_traces(self, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: PLC0415
            ExportTraceServiceRequest,
        )
        from opentelemetry.proto.trace.v1.trace_pb2 import Span  # noqa: PLC0415

        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            service = ""
            for attribute in resource_spans.resource.attributes:
                if attribute.key == "service.name":
                    service = attribute.value.string_value
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {a.key: _value(a.value) for a in span.attributes}
                    self.spans.append(
                        ExportedSpan(
                            service=service,
                            scope=scope_spans.scope.name,
                            name=span.name,
                            kind=Span.SpanKind.Name(span.kind),
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex() or None,
                            attributes=attributes,
                            status_code=span.status.code,
                            status_message=span.status.message,
                            raw=str(span) + str(resource_spans.resource),  # protobuf's text form: every string
                        )
                    )

    def _take_metrics(self, body: bytes) -> None:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (  # noqa: PLC0415
            ExportMetricsServiceRequest,
        )

        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource_metrics in request.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    self.metric_names.add(metric.name)
                    for point in metric.histogram.data_points:
                        labels = {a.key: _value(a.value) for a in point.attributes}
                        self.metric_points.append((metric.name, labels))

    async def app(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/v1/traces":
            self._take_traces(bytes(body))
        elif scope["path"] == "/v1/metrics":
            self._take_metrics(bytes(body))
        self.changed.set()
        self.changed = trio.Event()
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/x-protobuf")]}
        )
        await send({"type": "http.response.body", "body": b""})

    async def wait_for(self, predicate: Any, *, what: str, bound_sec: float) -> None:
        with trio.move_on_after(bound_sec):
            while not predicate():
                await self.changed.wait()
            return
        seen = sorted({(s.service, s.name, s.kind) for s in self.spans})
        raise AssertionError(f"timed out waiting for {what}; spans seen: {seen}")


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


@asynccontextmanager
async def open_otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    """An OTLP/HTTP receiver on 127.0.0.1, port 0, until the block ends."""
    from hypercorn.config import Config  # noqa: PLC0415
    from hypercorn.trio import serve  # noqa: PLC0415

    receiver = OtlpReceiver()
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(partial(serve, cast(Any, receiver.app), config, mode="asgi"))
        receiver.endpoint = binds[0]
        yield receiver
        nursery.cancel_scope.cancel()


def attributes_of(spans: Sequence[ReadableSpan], name: str, kind: SpanKind) -> Mapping[str, Any]:
    (span,) = [s for s in spans if s.name == name and s.kind is kind]
    return span.attributes or {}


# -- an in-process sidecar over the traced upstream ----------------------------------------


@dataclass
class Sidecar:
    supervisor: Any
    front: Any


@asynccontextmanager
async def in_memory_front(front: Any) -> AsyncIterator[Any]:
    """The Front's MCP server on memory streams (a stdio-like wire), yielding the host's transport streams."""
    from mcp.shared.memory import create_client_server_memory_streams  # noqa: PLC0415

    async with create_client_server_memory_streams() as (host_streams, server_streams), trio.open_nursery() as nursery:
        nursery.start_soon(front.server.run, *server_streams, front.init_options)
        yield host_streams
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def serve_sidecar(config: Any, *, view: str = "") -> AsyncIterator[Sidecar]:
    """An in-process Supervisor and Front over the servers of ``config`` (a settings file), for ``view``."""
    from supervisor.config.loader import load_settings  # noqa: PLC0415
    from supervisor.host.front import Front  # noqa: PLC0415
    from supervisor.host.relay import Relay  # noqa: PLC0415
    from supervisor.root import Supervisor  # noqa: PLC0415

    settings = load_settings(config)
    relay = Relay()
    supervisor = Supervisor(settings, host=relay)
    front = Front(supervisor, relay, supervisor.views[view])
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        await nursery.start(front.run)
        await supervisor.wait_first_attempts()
        yield Sidecar(supervisor, front)
        nursery.cancel_scope.cancel()
