"""The OpenTelemetry SDK side: the tracer provider, span-derived metrics, and redaction on export.

Imported only when telemetry is on (``telemetry.setup``) or by tests: it needs
the ``otel`` extra (``opentelemetry-sdk``). Three pieces:

* ``SupervisorTracerProvider``: the SDK's provider, whose tracers do nothing
  while ``TELEMETRY.on`` is off (as the API's no-op tracer: the current
  context passes through), and which tidies the ``mcp`` SDK's own CLIENT
  spans (``compat.otel``): one the sidecar's CLIENT span already covers
  (``spans.covering``) is folded into it, so the SDK injects *our* context
  upstream and the trace has one CLIENT span per upstream request; any other
  (a sync's ``tools/list``) is renamed from ``MCP send {method} {target}`` to
  the conventions' ``{method} {target}``.
* ``durations.OperationMetrics`` (when metered): the span processor that
  records ``mcp.server.operation.duration`` and ``mcp.client.operation.duration``
  from every ended MCP span (the SDK middleware's SERVER spans and ours).
* ``Redacting``: wraps the exporter. Without ``capture_content`` it drops what
  may carry content (status descriptions: JSON-RPC error messages; exception
  messages and stack traces; the opt-in content attributes); always, it masks
  every configured secret value wherever it appears. It runs in the export
  worker's thread, never on a call path.

Concurrency: the SDK's batch processor runs its own worker thread; everything
here is synchronous and called by the SDK.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import (
    Event,
    ReadableSpan,
    SpanLimits,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
    TracerProvider,
)
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, NonRecordingSpan, SpanKind, Status, Tracer, use_span
from opentelemetry.util.types import Attributes

from supervisor._version import __version__
from supervisor.compat.otel import SDK_SEND_PREFIX, SDK_TRACER_NAME
from supervisor.telemetry import conventions as C
from supervisor.telemetry.durations import OperationMetrics
from supervisor.telemetry.lean import LeanSpans, watches_starts
from supervisor.telemetry.spans import OWN_TRACER_NAME, TELEMETRY, ambient, covering

MASK: Final = "***"


def _pass_through(context: Context | None) -> trace.Span:
    """What the API's no-op tracer returns: the current span, so its context still propagates."""
    current = trace.get_current_span(context)
    return current if isinstance(current, NonRecordingSpan) else NonRecordingSpan(current.get_span_context())


class _GatedTracer(Tracer):
    """A tracer that is a no-op while telemetry is off, and tidies the ``mcp`` SDK's CLIENT spans."""

    def __init__(self, inner: Tracer, *, mcp_sdk: bool, lean: LeanSpans | None = None) -> None:
        self._inner = inner
        self._mcp_sdk = mcp_sdk
        self._lean = lean

    def start_span(  # noqa: PLR0917  (the API's signature)
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        if not TELEMETRY.on:
            return _pass_through(context)
        if self._mcp_sdk and kind is SpanKind.CLIENT and name.startswith(SDK_SEND_PREFIX):
            if name == covering.get():
                # Our CLIENT span covers this very request: the SDK gets our span, and so injects our context.
                ours = trace.get_current_span(context)
                request_id = (attributes or {}).get(C.REQUEST_ID)
                if request_id is not None:
                    ours.set_attribute(C.REQUEST_ID, request_id)
                return _pass_through(context)
            name, attributes = _conventional(name, attributes)
        elif self._lean is not None and not links and start_time is None:
            return self._lean.start(name, context, kind, attributes)
        return self._inner.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )

    @contextmanager
    def start_as_current_span(  # type: ignore[override]  # noqa: PLR0917  (the API's; its decorator is private)
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        span = self.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        with use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


def _conventional(name: str, attributes: Attributes) -> tuple[str, dict[str, Any]]:
    """An SDK CLIENT span's name and attributes as the conventions (and we) want them."""
    name = name[len(SDK_SEND_PREFIX) :]
    method, _, target = name.partition(" ")
    extra: dict[str, Any] = dict(attributes or {})
    if method == "tools/call":
        extra[C.OPERATION] = C.EXECUTE_TOOL
        if target:
            extra[C.TOOL_NAME] = target
    elif method == "prompts/get" and target:
        extra["gen_ai.prompt.name"] = target
    extra.update(ambient.get() or {})
    return name, extra


class SupervisorTracerProvider(TracerProvider):
    """The SDK's tracer provider, handing out ``_GatedTracer``s; the sidecar's own tracer starts lean spans."""

    def __init__(self, *, resource: Resource | None = None) -> None:
        self._processors = SynchronousMultiSpanProcessor()  # type: ignore[no-untyped-call]  # the SDK's own, untyped
        self._limits = SpanLimits()  # from the environment, as the SDK's provider reads them
        self._lean_allowed = True
        super().__init__(resource=resource, active_span_processor=self._processors, span_limits=self._limits)

    def add_span_processor(self, span_processor: SpanProcessor) -> None:
        if watches_starts(span_processor):
            self._lean_allowed = False  # tracers made from now on start every span the SDK's way
        super().add_span_processor(span_processor)

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes = None,
    ) -> Tracer:
        inner = super().get_tracer(instrumenting_module_name, instrumenting_library_version, schema_url, attributes)
        lean = None
        if self._lean_allowed and instrumenting_module_name == OWN_TRACER_NAME and isinstance(inner, SdkTracer):
            scope = InstrumentationScope(
                instrumenting_module_name, instrumenting_library_version or "", schema_url, attributes
            )
            lean = LeanSpans.for_limits(self._limits, self, self._processors, scope, inner.instrumentation_info)
        return _GatedTracer(inner, mcp_sdk=instrumenting_module_name == SDK_TRACER_NAME, lean=lean)


class Redacting(SpanExporter):
    """Wraps an exporter: no content without ``capture_content``, and never a configured secret."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        kept = [redacted(span) for span in spans if not (span.attributes or {}).get(C.DISCARD)]
        return self._inner.export(kept) if kept else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


def redacted(span: ReadableSpan) -> ReadableSpan:
    """``span`` as it may leave the process (see ``Redacting``); the span itself when nothing needs to change."""
    capture = TELEMETRY.capture_content
    secrets = tuple(secret for secret in TELEMETRY.secrets if secret)
    if _clean_already(span, capture, secrets):
        return span  # the usual case: no status text, no events, no secret, no content to drop

    def mask(value: Any) -> Any:
        if isinstance(value, str):
            for secret in secrets:
                if secret in value:
                    value = value.replace(secret, MASK)
            return value
        if isinstance(value, tuple | list):
            return tuple(mask(item) for item in value)
        return value

    def clean(attributes: Mapping[str, Any] | None, *, exception: bool = False) -> dict[str, Any]:
        kept: dict[str, Any] = {}
        for key, value in (attributes or {}).items():
            if not capture and (key in C.CONTENT_ATTRIBUTES or (exception and key != "exception.type")):
                continue
            kept[key] = mask(value)
        return kept

    status = span.status
    description = status.description if capture else None
    events = [
        Event(event.name, clean(event.attributes, exception=event.name == "exception"), event.timestamp)
        for event in span.events
    ]
    return ReadableSpan(
        name=mask(span.name),
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=clean(span.attributes),
        events=events,
        links=span.links,
        kind=span.kind,
        status=Status(status.status_code, mask(description) if description else None),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _clean_already(span: ReadableSpan, capture: bool, secrets: tuple[str, ...]) -> bool:
    if span.events or (span.status.description and (not capture or secrets)):
        return False
    attributes = span.attributes or {}
    if not capture and not C.CONTENT_ATTRIBUTES.isdisjoint(attributes):
        return False
    if not secrets:
        return True
    texts = [span.name]
    for value in attributes.values():
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, tuple | list):
            texts.extend(item for item in value if isinstance(item, str))
    return not any(secret in text for text in texts for secret in secrets)


def resource(environ: Mapping[str, str]) -> Resource:
    """``service.name = mcp-supervisor`` unless ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` name one."""
    named = "OTEL_SERVICE_NAME" in environ or "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    attributes: dict[str, Any] = {SERVICE_VERSION: __version__}
    if not named:
        attributes[SERVICE_NAME] = "mcp-supervisor"
    return Resource.create(attributes)


def tracer_provider(
    exporters: Sequence[SpanExporter], *, batch: bool = True, resource_: Resource | None = None, metered: bool = True
) -> SupervisorTracerProvider:
    """A provider that exports through ``Redacting`` (batched, or at once for tests) and, when ``metered``, meters
    every MCP span into the readers that ``telemetry.durations`` knows (``DurationReading``). Not metered: no metric
    reader would ever read the histograms (``OTEL_METRICS_EXPORTER=none``)."""
    provider = SupervisorTracerProvider(resource=resource_)
    if metered:
        provider.add_span_processor(OperationMetrics())
    for exporter in exporters:
        wrapped = Redacting(exporter)
        processor: SpanProcessor = BatchSpanProcessor(wrapped) if batch else SimpleSpanProcessor(wrapped)
        provider.add_span_processor(processor)
    return provider
