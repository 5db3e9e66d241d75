"""The sidecar's spans: one switch, and a helper per kind of work (DESIGN I18).

Everything here is the OpenTelemetry *API* (a dependency of the ``mcp`` SDK):
without the SDK installed and started (``telemetry.setup``), a span is a no-op.
But the call paths do not even get that far: ``TELEMETRY.on`` is False until
``setup.start`` turns it on, and every hot path checks it once and does
nothing else while it is off (the splice, the fast path, the SDK path).

What is traced, and by whom:

* a host's ``tools/call``: a SERVER span, parented on the host's ``_meta``
  context. On the SDK and fast paths it is the SDK's own middleware span,
  which the sidecar annotates (``annotate_host_call``); on the splice the
  sidecar makes it (``SplicedTrace``).
* each upstream ``tools/call``: a CLIENT span (``CallSpan``, made current by
  ``covering``), whose context goes upstream in ``_meta`` and, over streamable
  HTTP, in the request's headers. On the SDK and fast paths the SDK's
  dispatcher makes a span of its own for the same request and injects it; the
  ``covering`` marker lets ``telemetry.sdk`` fold that one into ours, so the
  upstream's span parents on the sidecar's CLIENT span.
* a call a program makes in ``run_code`` (a code view): an INTERNAL span,
  a child of the ``run_code`` call's SERVER span (``start_sandbox_call``),
  with the upstream request's CLIENT span under it.
* the sidecar's own work (a catalog sync, a reconnect, a fleet-store call) has
  its spans in ``telemetry.work``.

Content (arguments, results, JSON-RPC error messages) reaches a span only
with ``capture_content``; tokens, headers and environment values never do
(``telemetry.sdk`` also redacts on export, as a second line).

Concurrency: no locks. A span is started and ended by whoever holds it; the
splice's spans are changed only in synchronous code, like the rest of a
``SplicedCall``. Context travels in ``contextvars``, so a span made current in
one task is the parent of what that task (and the tasks it starts) does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from supervisor._version import __version__
from supervisor.compat.otel import SDK_SEND_PREFIX
from supervisor.telemetry import conventions as C


class Switch:
    """Whether telemetry is on, and what it may record. Set only by ``telemetry.setup`` (and tests)."""

    __slots__ = ("capture_content", "on", "secrets")

    def __init__(self) -> None:
        self.on = False
        self.capture_content = False
        self.secrets: tuple[str, ...] = ()
        """Configured secret values the exporter masks wherever they might appear (``telemetry.sdk``)."""


TELEMETRY: Final = Switch()
"""The one switch. Every call path reads ``TELEMETRY.on`` once per call; off, nothing else happens."""

OWN_TRACER_NAME: Final = "mcp-supervisor"
_tracer = trace.get_tracer(OWN_TRACER_NAME, __version__)

covering: ContextVar[str | None] = ContextVar("mcp_supervisor_covering", default=None)
"""The SDK span name (``MCP send tools/call <raw>``) that the current CLIENT span of ours already covers."""
ambient: ContextVar[Mapping[str, Any] | None] = ContextVar("mcp_supervisor_ambient", default=None)
"""Our attributes (server, generation) for the SDK spans made under one of our spans (a sync's tools/list)."""

_NO_ERROR_STATUS: Final = Status(StatusCode.ERROR)


@contextmanager
def about_server(server: str) -> Iterator[None]:
    """The SDK's spans made inside (a listing's requests) carry ``mcp_supervisor.server`` (a no-op while off)."""
    if not TELEMETRY.on:
        yield
        return
    mark = ambient.set({C.SERVER: server})
    try:
        yield
    finally:
        ambient.reset(mark)


def sdk_span_needed(meta: Mapping[str, Any] | None) -> bool:
    """Whether the SDK's SERVER span does anything for a request with ``_meta`` (``compat.sdk.gate_sdk_tracing``).

    On, it records. Off, it is the no-op span, which only makes the host's
    parent current (so the SDK path sends it upstream as it came): only a
    ``traceparent`` names one.
    """
    return TELEMETRY.on or (meta is not None and C.TRACEPARENT in meta)


def trace_carrier(meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The trace-context keys of a request's ``_meta``, as they came (None: it has none)."""
    if not meta:
        return None
    found: dict[str, Any] | None = None
    for key in C.TRACE_KEYS:
        if key in meta:
            if found is None:
                found = {}
            found[key] = meta[key]
    return found


def parent_from(carrier: Mapping[str, Any] | None) -> otel_context.Context | None:
    """The remote parent a host's ``_meta`` names; None when it names none (or garbage): a root span then."""
    if not carrier:
        return None
    try:
        ctx = extract(carrier)
    except (TypeError, ValueError):
        return None
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def current_context() -> otel_context.Context:
    """The current OpenTelemetry context (a handler's SERVER span), to parent work done in another task."""
    return otel_context.get_current()


async def inject_headers(request: Any) -> None:
    """An httpx request hook: the current span's context as ``traceparent``/``tracestate`` headers.

    The SDK's streamable-HTTP client POSTs each request in a task that carries
    the sending task's ``contextvars``, so the current span here is the CLIENT
    span of that request (ours, see ``covering_call``).
    """
    inject(request.headers)


def traced_request(meta: dict[str, Any], headers: dict[str, str], request_id: str) -> None:
    """A request we send ourselves (no SDK span to fold into ours): the current CLIENT span's context goes in its
    ``_meta`` and its headers (the host's baggage stays), and the span records the request's id."""
    fields: dict[str, str] = {}
    inject(fields)  # once, for both: what the propagators write depends on the context only
    meta.update(fields)
    headers.update(fields)
    trace.get_current_span().set_attribute(C.REQUEST_ID, request_id)


def as_json(value: Any) -> str:
    """Content as the conventions' opt-in attributes want it: a JSON string (an SDK model as its wire form)."""
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        value = dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, dict) and "_meta" in value:
        value = {key: item for key, item in value.items() if key != "_meta"}
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


class CallSpan:
    """One span of a tools/call (SERVER or CLIENT) that the sidecar makes and ends itself."""

    __slots__ = ("_ended", "is_server", "span")

    def __init__(self, span: Span, *, is_server: bool) -> None:
        self.span = span
        self.is_server = is_server
        self._ended = False

    @property
    def context(self) -> otel_context.Context:
        """A context whose current span is this one: the parent of the work done for it."""
        return trace.set_span_in_context(self.span)

    def end(
        self,
        outcome: str,
        *,
        code: int | None = None,
        message: str | None = None,
        result: Any = None,
        error_type: str | None = None,
    ) -> None:
        """End the span for a call that ended with ``outcome`` (once; later calls are ignored).

        ``message``: a JSON-RPC error's message (content: only with ``capture_content``).
        ``result``: what the host got, for ``capture_content``.
        """
        if self._ended:
            return
        self._ended = True
        span = self.span
        if self.is_server:
            kind_error = error_type or C.server_error_type(outcome, code)
            span.set_attribute(C.OUTCOME, outcome)
        else:
            kind_error = error_type or C.client_error_type(outcome, code)
        if code is not None:
            span.set_attribute(C.RPC_STATUS, str(code))
        if kind_error is not None:
            span.set_attribute(C.ERROR_TYPE, kind_error)
            described = message if TELEMETRY.capture_content else None
            span.set_status(Status(StatusCode.ERROR, described) if described else _NO_ERROR_STATUS)
        elif result is not None and TELEMETRY.capture_content:
            span.set_attribute(C.RESULT, as_json(result))
        span.end()


def _call_attributes(
    name: str,
    request_id: str | int | None,
    *,
    server: str,
    generation: int,
    protocol_version: str | None,
    stdio: bool,
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        C.METHOD: "tools/call",
        C.OPERATION: C.EXECUTE_TOOL,
        C.TOOL_NAME: name,
        C.TRANSPORT: C.transport_of(stdio),
        C.SERVER: server,
        C.GENERATION: generation,
    }
    if request_id is not None:
        attributes[C.REQUEST_ID] = str(request_id)
    if protocol_version:
        attributes[C.PROTOCOL_VERSION] = protocol_version
    return attributes


def start_client_call(
    raw_name: str,
    *,
    server: str,
    generation: int,
    protocol_version: str | None,
    stdio: bool,
    parent: otel_context.Context | None,
    arguments: Any = None,
    request_id: str | int | None = None,
) -> CallSpan:
    """A CLIENT span for one upstream ``tools/call`` of ``raw_name`` (not current yet: see ``covering_call``)."""
    attributes = _call_attributes(
        raw_name, request_id, server=server, generation=generation, protocol_version=protocol_version, stdio=stdio
    )
    if arguments is not None and TELEMETRY.capture_content:
        attributes[C.ARGUMENTS] = as_json(arguments)
    span = _tracer.start_span(
        f"tools/call {raw_name}",
        context=parent,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    )
    return CallSpan(span, is_server=False)


@contextmanager
def covering_call(call: CallSpan, raw_name: str) -> Iterator[None]:
    """Make ``call`` current, so the SDK's own span of this very request folds into it (``telemetry.sdk``)."""
    token = otel_context.attach(trace.set_span_in_context(call.span))
    mark = covering.set(f"{SDK_SEND_PREFIX}tools/call {raw_name}")
    try:
        yield
    finally:
        covering.reset(mark)
        otel_context.detach(token)


def annotate_host_call(*, server: str, generation: int, stdio: bool, arguments: Any = None) -> Span:
    """Add ours to the current SERVER span (the SDK middleware's, on the SDK and fast paths) and return it."""
    span = trace.get_current_span()
    span.set_attributes({C.SERVER: server, C.GENERATION: generation, C.TRANSPORT: C.transport_of(stdio)})
    if arguments is not None and TELEMETRY.capture_content:
        span.set_attribute(C.ARGUMENTS, as_json(arguments))
    return span


def host_call_ended(span: Span, outcome: str, result: Any = None) -> None:
    """Say how the host's call ended on its SERVER span (the SDK middleware sets ``error.type`` itself)."""
    span.set_attribute(C.OUTCOME, outcome)
    if result is not None and outcome == "ok" and TELEMETRY.capture_content:
        span.set_attribute(C.RESULT, as_json(result))


class SplicedTrace:
    """The two spans of one spliced call: the host's SERVER span and the upstream request's CLIENT span."""

    __slots__ = ("client", "code", "message", "result", "server")

    def __init__(self, server: CallSpan, client: CallSpan) -> None:
        self.server = server
        self.client = client
        self.code: int | None = None
        self.message: str | None = None
        self.result: Any = None

    def upstream_meta(self, host_carrier: Mapping[str, Any] | None) -> dict[str, Any]:
        """The trace keys of the upstream request's ``_meta`` (beside our envelope): our CLIENT span's context and
        the host's baggage."""
        meta: dict[str, Any] = {}
        inject(meta, context=trace.set_span_in_context(self.client.span))
        if host_carrier is not None and "baggage" in host_carrier:
            meta.setdefault("baggage", host_carrier["baggage"])
        return meta

    def upstream_answered(
        self, outcome: str, code: int | None = None, message: str | None = None, result: Any = None
    ) -> None:
        """The upstream's answer arrived: the CLIENT span ends (the SERVER span once the host has it)."""
        self.code, self.message = code, message
        self.result = result if TELEMETRY.capture_content else None
        self.client.end(outcome, code=code, message=message, result=self.result)

    def finish(self, outcome: str) -> None:
        """The host has its answer (or cancelled): end both spans."""
        self.client.end(outcome, code=self.code, message=self.message)
        self.server.end(outcome, code=self.code, message=self.message, result=self.result)

    def discard(self) -> None:
        """The splice did not take the call after all (the SDK serves it, with spans of its own): export neither."""
        for call in (self.client, self.server):
            call.span.set_attribute(C.DISCARD, True)
            call.end("cancelled")


def start_host_call(
    public_name: str,
    host_id: str | int | None,
    host_carrier: Mapping[str, Any] | None,
    *,
    server: str,
    generation: int,
    host_version: str | None,
    stdio: bool,
    arguments: Any = None,
) -> CallSpan:
    """The SERVER span of a host's call that the SDK's server does not see (parented on the host's ``_meta``)."""
    attributes = _call_attributes(
        public_name, host_id, server=server, generation=generation, protocol_version=host_version, stdio=stdio
    )
    if arguments is not None and TELEMETRY.capture_content:
        attributes[C.ARGUMENTS] = as_json(arguments)
    span = _tracer.start_span(
        f"tools/call {public_name}",
        context=parent_from(host_carrier),
        kind=SpanKind.SERVER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    )
    return CallSpan(span, is_server=True)


def start_spliced_call(
    public_name: str,
    raw_name: str,
    host_id: str | int,
    upstream_id: str,
    host_carrier: Mapping[str, Any] | None,
    *,
    server: str,
    generation: int,
    host_version: str | None,
    upstream_version: str | None,
    arguments: Any = None,
    stdio: bool = True,
) -> SplicedTrace:
    """The SERVER span of a spliced call (parented on the host's ``_meta``) and its CLIENT span."""
    host = start_host_call(
        public_name, host_id, host_carrier,
        server=server, generation=generation, host_version=host_version, stdio=stdio, arguments=arguments,
    )  # fmt: skip
    client = start_client_call(
        raw_name,
        server=server,
        generation=generation,
        protocol_version=upstream_version,
        stdio=True,
        parent=host.context,
        arguments=arguments,
        request_id=upstream_id,
    )
    return SplicedTrace(host, client)


def start_sandbox_call(
    public_name: str,
    *,
    server: str,
    generation: int,
    arguments: Any = None,
) -> CallSpan:
    """The span of a call a program made in ``run_code``: INTERNAL (no request of its own reached us), a child of
    the current span (the ``run_code`` call's, in the run's tasks), and the parent of the upstream request's CLIENT
    span. It says how the call ended as a host's call's span does (``mcp_supervisor.outcome``)."""
    attributes: dict[str, Any] = {
        C.METHOD: "tools/call",
        C.OPERATION: C.EXECUTE_TOOL,
        C.TOOL_NAME: public_name,
        C.SERVER: server,
        C.GENERATION: generation,
    }
    if arguments is not None and TELEMETRY.capture_content:
        attributes[C.ARGUMENTS] = as_json(arguments)
    span = _tracer.start_span(
        f"tools/call {public_name}",
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    )
    return CallSpan(span, is_server=True)
