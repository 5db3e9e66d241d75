"""Lean spans: the sidecar's own spans, a tools/call's two above all, without the SDK span's per-span machinery.

Why: the OpenTelemetry SDK's ``Tracer.start_span`` cost about 15 us a span on
the bench box. Most of that is work these spans do not need: a lock, attribute
validation into a locked ``BoundedAttributes``, bounded lists for events and
links. A call has two spans, and their start was more than half of what
telemetry on cost a call (issue 47, ``bench/RESULTS.md``). A lean span keeps
what the SDK's span does for the sidecar's spans and nothing else:

* its ids come from the provider's id generator and its fate from the
  provider's sampler (the default one, ``ParentBased(ALWAYS_ON)``, is read
  as its rule: the parent's sampled flag, or sampled at the root; its
  ``should_sample`` built three objects a span). A span the sampler does not record is the API's
  ``NonRecordingSpan`` with the very context the SDK would have given it, so
  what goes upstream is the same;
* the provider's span processors see it end, once (``on_end``, with the
  same ``ReadableSpan`` the SDK's span would hand them). They are not told
  of its start: the processors ``telemetry.sdk`` adds do nothing then, and a
  provider given one that does makes no lean spans (``watches_starts``);
* attributes live in a plain dict. The call spans set only strings and
  integers the sidecar made, which the SDK's validation passes unchanged; any
  other value, a key it would drop, or one past the count limit moves them into
  the SDK's own ``BoundedAttributes``, which cleans, limits and counts as the
  SDK's span does. Events (an exception, rarely) go into the SDK's own bounded
  containers from the first.

What it leaves out is guarded, not assumed: ``LeanSpans.for_limits`` returns
None, and the SDK's tracer makes every span, when a value length limit is set
(the SDK would cut long strings) or the SDK's own internal metrics are on.
``tests/ops/test_telemetry_lean.py`` feeds the same calls to both kinds and
fails on any difference in what an exporter receives.

Concurrency: a span is started and ended by whoever holds it, in the trio
thread (``telemetry.spans.CallSpan``); nothing here awaits or locks. ``end``
runs the processors synchronously, as the SDK's span does.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Mapping
from time import time_ns
from typing import Any, Final, Protocol

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, SpanProcessor, SynchronousMultiSpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import DEFAULT_ON, Decision, Sampler
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationInfo, InstrumentationScope
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util import types

_PLAIN: Final = frozenset({str, int, bool, float})
"""Attribute value types the SDK's validation returns as they are (a ``str`` unless a length limit is set), under a
non-empty ``str`` key."""
_INTERNAL_METRICS_ENV: Final = "OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"
_UNSET: Final = Status(StatusCode.UNSET)


def watches_starts(processor: SpanProcessor) -> bool:
    """Whether ``processor`` does anything when a span starts (a lean span's start is not reported)."""
    on_start = type(processor).on_start
    return all(on_start is not quiet.on_start for quiet in (SpanProcessor, BatchSpanProcessor, SimpleSpanProcessor))


def _plain(attributes: Mapping[str, Any], room: int | None) -> bool:
    """Whether the SDK would keep ``attributes`` as they are: plain values under non-empty keys, within ``room``."""
    if room is not None and len(attributes) > room:
        return False
    for key, value in attributes.items():  # noqa: SIM110  (a loop: all() over a generator costs twice as much)
        if type(value) not in _PLAIN or type(key) is not str or not key:
            return False
    return True


class _Provider(Protocol):
    """What lean spans read of their provider (``TracerProvider``'s public surface): its id generator and sampler
    when the tracer is made, as the SDK's tracers take them; its resource at each end (a fork renews it)."""

    @property
    def id_generator(self) -> IdGenerator: ...
    @property
    def sampler(self) -> Sampler: ...
    @property
    def resource(self) -> Resource: ...


class LeanSpans:
    """Starts lean spans for one tracer of one provider (``telemetry.sdk._GatedTracer``)."""

    __slots__ = (
        "_id_generator", "_info", "_parent_based_on", "_processors", "_provider", "_sampler", "_scope", "limits",
    )  # fmt: skip

    def __init__(
        self,
        limits: SpanLimits,
        provider: _Provider,
        processors: SynchronousMultiSpanProcessor,
        scope: InstrumentationScope,
        info: InstrumentationInfo,
    ) -> None:
        self.limits = limits
        self._provider = provider
        self._processors = processors
        self._id_generator: IdGenerator = provider.id_generator
        self._sampler: Sampler = provider.sampler
        # ParentBased(ALWAYS_ON), unless OTEL_TRACES_SAMPLER names another: sampled with a sampled parent or none,
        # with the parent's trace state and the attributes as given (its should_sample, without the objects).
        self._parent_based_on = self._sampler is DEFAULT_ON
        self._scope = scope
        self._info = info

    @classmethod
    def for_limits(
        cls,
        limits: SpanLimits,
        provider: _Provider,
        processors: SynchronousMultiSpanProcessor,
        scope: InstrumentationScope,
        info: InstrumentationInfo,
    ) -> LeanSpans | None:
        """Lean spans under these limits, or None where they would differ from the SDK's (it makes them then)."""
        if limits.max_attribute_length is not None or limits.max_span_attribute_length is not None:
            return None
        if os.environ.get(_INTERNAL_METRICS_ENV, "").strip().lower() == "true":
            return None
        return cls(limits, provider, processors, scope, info)

    def start(self, name: str, context: Context | None, kind: SpanKind, attributes: types.Attributes) -> trace.Span:
        """A span as ``Tracer.start_span`` would start it: parent, ids, sampling and trace flags alike."""
        parent: SpanContext | None = trace.get_current_span(context).get_span_context()
        if parent is not None and not parent.is_valid:
            parent = None
        ids = self._id_generator
        trace_id = ids.generate_trace_id() if parent is None else parent.trace_id
        if self._parent_based_on:  # the SDK's default sampler decides by the parent's flag alone
            recorded = sampled = parent is None or parent.trace_flags.sampled
            trace_state = None if parent is None else parent.trace_state
        else:
            result = self._sampler.should_sample(context, trace_id, name, kind, attributes, ())
            recorded = result.decision is not Decision.DROP
            sampled = result.decision is Decision.RECORD_AND_SAMPLE
            attributes, trace_state = result.attributes, result.trace_state
        flags = TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT
        random_id = ids.is_trace_id_random() if parent is None else parent.trace_flags.random_trace_id
        if random_id:
            flags |= TraceFlags.RANDOM_TRACE_ID
        span_context = SpanContext(
            trace_id, ids.generate_span_id(), is_remote=False, trace_flags=TraceFlags(flags), trace_state=trace_state
        )
        if not recorded:
            return NonRecordingSpan(span_context)
        return LeanSpan(self, name=name, context=span_context, parent=parent, kind=kind, attributes=attributes or {})

    def ended(self, span: LeanSpan, end_time: int) -> None:
        """Hand an ended span to the processors, as the SDK's span does."""
        self._processors.on_end(
            ReadableSpan(
                name=span.name,
                context=span.context,
                parent=span.parent,
                resource=self._provider.resource,
                attributes=span.attributes,
                events=() if span.events is None else span.events,
                kind=span.kind,
                status=span.status,
                start_time=span.start_time,
                end_time=end_time,
                instrumentation_info=self._info,
                instrumentation_scope=self._scope,
            )
        )


class LeanSpan(trace.Span):
    """One recording call span (see the module docstring); after ``end`` every change is ignored, as the SDK's."""

    __slots__ = (
        "_spans", "attributes", "context", "end_time", "events", "kind", "name", "parent", "start_time", "status",
    )  # fmt: skip

    def __init__(
        self,
        spans: LeanSpans,
        *,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: Mapping[str, Any],
    ) -> None:
        self._spans = spans
        self.name = name
        self.context = context
        self.parent = parent
        self.kind = kind
        room = spans.limits.max_span_attributes
        self.attributes: dict[str, Any] | BoundedAttributes = (
            dict(attributes) if _plain(attributes, room) else BoundedAttributes(room, attributes, immutable=False)
        )
        self.events: BoundedList[Event] | None = None  # made at the first event: most spans have none
        self.status = _UNSET
        self.start_time = time_ns()
        self.end_time: int | None = None

    def get_span_context(self) -> SpanContext:
        return self.context

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        if self.end_time is not None:
            return
        attributes = self.attributes
        if type(attributes) is dict and type(value) in _PLAIN and type(key) is str and key:
            room = self._spans.limits.max_span_attributes
            if room is None or len(attributes) < room or key in attributes:
                attributes[key] = value
                return
        self._bounded()[key] = value

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def _bounded(self) -> BoundedAttributes:
        """The attributes in the SDK's own container from now on: it cleans, limits and counts what it drops."""
        if isinstance(self.attributes, dict):
            self.attributes = BoundedAttributes(
                self._spans.limits.max_span_attributes, self.attributes, immutable=False
            )
        return self.attributes

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        if self.end_time is not None:
            return
        limits = self._spans.limits
        if self.events is None:
            self.events = BoundedList(limits.max_events)
        kept = BoundedAttributes(limits.max_event_attributes, attributes, immutable=True)
        self.events.append(Event(name=name, attributes=kept, timestamp=timestamp))

    def update_name(self, name: str) -> None:
        if self.end_time is None:
            self.name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self.end_time is not None or self.status.status_code is StatusCode.OK:
            return  # as the SDK's: an OK status is final
        if isinstance(status, StatusCode):
            status = Status(status, description)
        if status.status_code is not StatusCode.UNSET:
            self.status = status

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """The SDK's ``exception`` event, with the same attributes."""
        module, qualname = type(exception).__module__, type(exception).__qualname__
        recorded: dict[str, Any] = {
            "exception.type": f"{module}.{qualname}" if module and module != "builtins" else qualname,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        recorded.update(attributes or {})
        self.add_event("exception", recorded, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self.end_time is not None:
            return
        self.end_time = end_time if end_time is not None else time_ns()
        self._spans.ended(self, self.end_time)
