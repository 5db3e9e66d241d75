"""Lean spans against the SDK's: the same calls, the same export, byte for byte (``telemetry.lean``, issue 47).

Each case runs twice, over two providers built the production way
(``telemetry.sdk.tracer_provider``) with the same id sequence: one whose own
tracer starts lean spans, and one given a processor that watches span starts,
so the SDK's tracer makes every span. What the two in-memory exporters get is
encoded as OTLP protobuf (what leaves the process) and compared with only the
timestamps masked; the trace context each call sends upstream is compared too.
Any difference fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import SpanKind

from supervisor.telemetry import sdk, spans, work
from supervisor.telemetry.lean import LeanSpan
from supervisor.telemetry.spans import TELEMETRY
from tests.ops.otel_support import TRACEPARENT, TRACESTATE

BAGGAGE: Final = "userId=alice"
TRACED: Final = {"traceparent": TRACEPARENT, "tracestate": TRACESTATE, "baggage": BAGGAGE}
UNSAMPLED: Final = {"traceparent": TRACEPARENT[:-2] + "00"}


class _CountingIds(IdGenerator):
    """Span and trace ids 1, 2, 3 ...: two providers given one each make the same ids in the same order."""

    def __init__(self) -> None:
        self._next = 0

    def _bump(self) -> int:
        self._next += 1
        return self._next

    def generate_span_id(self) -> int:
        return self._bump()

    def generate_trace_id(self) -> int:
        return self._bump()

    def is_trace_id_random(self) -> bool:
        return True


class _WatchesStarts(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        del span, parent_context


Case = Callable[[], dict[str, Any]]


@contextmanager
def _own_tracer(*, lean: bool, sampler: Any = None) -> Iterator[InMemorySpanExporter]:
    """The sidecar's tracer (``spans`` and ``work``) on a fresh production provider, for the ``with`` body."""
    exporter = InMemorySpanExporter()
    provider = sdk.tracer_provider([exporter], batch=False)
    provider.id_generator = _CountingIds()  # type: ignore[assignment]  # the SDK annotates its default's type
    if sampler is not None:
        provider.sampler = sampler
    if not lean:
        provider.add_span_processor(_WatchesStarts())
    tracer = provider.get_tracer(spans.OWN_TRACER_NAME, "1")
    saved = spans._tracer, work._tracer
    spans._tracer = work._tracer = tracer
    TELEMETRY.on = True
    try:
        yield exporter
    finally:
        TELEMETRY.on = False
        TELEMETRY.capture_content = False
        spans._tracer, work._tracer = saved


def _exported(spans_: tuple[ReadableSpan, ...]) -> bytes:
    """What an OTLP exporter would send for ``spans_``, timestamps zeroed (the only thing allowed to differ)."""
    request = encode_spans(spans_)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                span.start_time_unix_nano = span.end_time_unix_nano = 0
                for event in span.events:
                    event.time_unix_nano = 0
    encoded: bytes = request.SerializeToString(deterministic=True)
    return encoded


def _as_values(span: ReadableSpan) -> str:
    """A span's attributes and events as Python values (a list kept where the SDK makes a tuple would show)."""
    events = [(event.name, dict(event.attributes or {})) for event in span.events]
    return repr((dict(span.attributes or {}), events))


def _both(case: Case, sampler: Any = None) -> tuple[tuple[bytes, dict[str, Any]], tuple[bytes, dict[str, Any]]]:
    results = []
    for lean in (True, False):
        with _own_tracer(lean=lean, sampler=sampler) as exporter:
            sent = case()
            finished = exporter.get_finished_spans()
            sent["as values"] = [_as_values(span) for span in finished]
            results.append((_exported(finished), sent))
    return results[0], results[1]


def _spliced(carrier: Mapping[str, Any] | None, *, outcome: str = "ok", code: int | None = None) -> Case:
    def case() -> dict[str, Any]:
        trace_ = spans.start_spliced_call(
            "mcp__fx__echo", "echo", 7, "s-7", carrier, server="fx", generation=3,
            host_version="2025-11-25", upstream_version="2026-07-28", arguments={"text": "hi"},
        )  # fmt: skip
        meta = trace_.upstream_meta(carrier)
        meta["recording"] = [call.span.is_recording() for call in (trace_.server, trace_.client)]
        trace_.upstream_answered(outcome, code=code, message="no such thing" if code else None, result={"ok": 1})
        trace_.finish(outcome)
        return meta

    return case


def _task_run(carrier: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A call a task runs: our SERVER span, then a CLIENT span made current while the request goes out."""
    host = spans.start_host_call("mcp__fx__echo", "h-1", carrier, server="fx", generation=1, host_version=None,
                                 stdio=False)  # fmt: skip
    client = spans.start_client_call("echo", server="fx", generation=1, protocol_version="2025-11-25", stdio=False,
                                     parent=host.context)  # fmt: skip
    meta: dict[str, Any] = {}
    headers: dict[str, str] = {}
    with spans.covering_call(client, "echo"):
        spans.traced_request(meta, headers, "u-1")
        trace.get_current_span().set_attributes({"extra.list": [1, 2], "extra.float": 0.5, "": "no key"})
        trace.get_current_span().set_attribute("", "no key either")
    client.end("timeout")
    host.end("timeout")
    return {**meta, **headers}


def _work_spans() -> dict[str, Any]:
    """The sidecar's own work: a sync span that raises through ``use_span``, a store span, a reconnect."""
    with pytest.raises(RuntimeError), work.sync_span("fx", "startup", "ttl", generation=2):
        raise RuntimeError("list failed")
    with work.store_span("get"):
        pass
    odd = {"a.list": [1, 2], "": "no key", "a.none": None}
    with pytest.raises(ValueError), spans._tracer.start_as_current_span("raw", attributes=odd):
        raise ValueError("recorded as the SDK records it")
    reconnect = work.start_reconnect("fx", 4, 2, 0.5)
    assert reconnect is not None
    reconnect.failed("refused")
    with trace.get_tracer_provider().get_tracer("x").start_as_current_span("outside"):
        pass  # the global provider's: not ours, exported by neither
    return {}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(_spliced(TRACED), id="spliced call on a traced host's trace"),
        pytest.param(_spliced(None), id="spliced call, a root"),
        pytest.param(_spliced(TRACED, outcome="rpc_error", code=-32602), id="spliced call, an error answer"),
        pytest.param(_task_run, id="task-run call, its CLIENT span current, odd attribute values"),
        pytest.param(lambda: _task_run(TRACED), id="task-run call on a traced host's trace"),
        pytest.param(_work_spans, id="work spans: an exception event, an error status"),
    ],
)
@pytest.mark.parametrize("capture", [False, True], ids=["no content", "capture_content"])
def test_lean_spans_export_what_the_sdks_spans_export(case: Case, capture: bool) -> None:
    def captured() -> dict[str, Any]:
        TELEMETRY.capture_content = capture
        return case()

    (lean_bytes, lean_sent), (sdk_bytes, sdk_sent) = _both(captured)
    assert lean_bytes, "nothing was exported"
    assert lean_bytes == sdk_bytes
    assert lean_sent == sdk_sent


@pytest.mark.parametrize(
    ("carrier", "sampler"),
    [
        pytest.param(UNSAMPLED, None, id="the host's trace is not sampled"),
        pytest.param(
            TRACED, ParentBased(ALWAYS_OFF, remote_parent_sampled=ALWAYS_OFF), id="the sampler drops a traced host's"
        ),
        pytest.param(None, ALWAYS_OFF, id="the sampler drops roots"),
    ],
)
def test_a_span_the_sampler_drops_is_exported_by_neither_and_sends_the_same_context(
    carrier: Mapping[str, Any] | None, sampler: Any
) -> None:
    (lean_bytes, lean_sent), (sdk_bytes, sdk_sent) = _both(_spliced(carrier), sampler)
    assert lean_bytes == sdk_bytes == encode_spans(()).SerializeToString(deterministic=True)
    assert lean_sent == sdk_sent
    assert lean_sent["recording"] == [False, False]
    assert not int(lean_sent["traceparent"][-2:], 16) & 0x01, "the upstream is told the trace is not sampled"


def test_the_sidecars_tracer_starts_lean_spans_only_where_nothing_they_leave_out_matters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def started(*, lean: bool) -> Any:
        with _own_tracer(lean=lean):
            span = spans.start_host_call("t", 1, None, server="fx", generation=1, host_version=None, stdio=True)
            span.end("ok")
            return span.span

    assert isinstance(started(lean=True), LeanSpan)
    assert not isinstance(started(lean=False), LeanSpan)  # a processor that watches starts
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "8")
    assert not isinstance(started(lean=True), LeanSpan)
    monkeypatch.delenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT")
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "8")
    assert not isinstance(started(lean=True), LeanSpan)
    monkeypatch.delenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")
    monkeypatch.setenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "true")
    assert not isinstance(started(lean=True), LeanSpan)
    monkeypatch.delenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED")
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "4")
    assert isinstance(started(lean=True), LeanSpan), "a count limit is kept as the SDK keeps it (below)"


def _many_events() -> dict[str, Any]:
    span = spans._tracer.start_span("events", context=otel_context.Context())
    for n in range(3):
        span.add_event(f"e{n}", {"a": 1, "b": 2, "c": 3})
    span.set_attributes({f"k{n}": n for n in range(6)})
    span.end()
    return {}


@pytest.mark.parametrize("case", [_spliced(TRACED), _work_spans, _many_events], ids=["spliced", "work", "events"])
def test_lean_spans_keep_the_sdks_count_limits(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "4")
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "2")
    monkeypatch.setenv("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "2")
    (lean_bytes, lean_sent), (sdk_bytes, sdk_sent) = _both(case)
    assert lean_bytes == sdk_bytes
    assert lean_sent == sdk_sent


def test_a_lean_span_ignores_changes_once_ended_and_ends_once() -> None:
    with _own_tracer(lean=True) as exporter:
        span = spans._tracer.start_span("x", context=otel_context.Context(), kind=SpanKind.SERVER)
        span.set_status(trace.StatusCode.OK)
        span.set_status(trace.StatusCode.ERROR, "late")  # an OK status is final, as the SDK's
        span.end()
        span.set_attribute("after", 1)
        span.update_name("renamed")
        span.end()
        (exported,) = exporter.get_finished_spans()
    assert exported.name == "x"
    assert "after" not in (exported.attributes or {})
    assert exported.status.status_code is trace.StatusCode.OK
