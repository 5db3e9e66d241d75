"""``telemetry.durations``: the duration histograms, aggregated by us, leave as the SDK's own histograms would.

The differential tests record the same spans twice: into the OpenTelemetry
SDK's explicit-bucket histograms (as ``OperationMetrics`` did before it
aggregated them itself) and into a ``DurationTable``; then they compare what
each collection hands a reader, point by point, for both temporalities.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader, ScopeMetrics
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from supervisor._version import __version__
from supervisor.telemetry import conventions as C
from supervisor.telemetry.durations import (
    BOUNDARIES,
    CARDINALITY_LIMIT,
    DURATIONS,
    DurationHistograms,
    DurationTable,
    exemplars_from,
)
from tests.ops.otel_support import InMemoryDurationReader

TEMPORALITIES = [AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA]
_ids = iter(range(1, 1 << 30))


def _span(kind: SpanKind, seconds: float, attributes: dict[str, Any] | None = None) -> ReadableSpan:
    context = SpanContext(0xABC, next(_ids), is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    start = 1_000_000_000_000
    return ReadableSpan(
        name="span", context=context, kind=kind, attributes=attributes,
        start_time=start, end_time=start + round(seconds * 1e9),
    )  # fmt: skip


def _call(
    seconds: float, tool: str = "echo", kind: SpanKind = SpanKind.SERVER, extra: dict[str, Any] | None = None
) -> ReadableSpan:
    attributes: dict[str, Any] = {C.METHOD: "tools/call", C.TOOL_NAME: tool, C.OPERATION: C.EXECUTE_TOOL}
    attributes |= {C.TRANSPORT: C.PIPE, C.PROTOCOL_VERSION: "2025-11-25", C.SERVER: "alpha", C.REQUEST_ID: next(_ids)}
    return _span(kind, seconds, attributes | (extra or {}))


class SdkHistograms:
    """The reference: the SDK's own histograms, recorded as ``OperationMetrics`` recorded them before."""

    def __init__(self, temporality: AggregationTemporality) -> None:
        self.reader = InMemoryMetricReader(preferred_temporality={Histogram: temporality})
        meter = MeterProvider(metric_readers=[self.reader]).get_meter("mcp-supervisor", __version__)
        self._histograms = {
            kind: meter.create_histogram(
                C.SERVER_DURATION if kind is SpanKind.SERVER else C.CLIENT_DURATION,
                unit="s",
                description=(
                    f"MCP request duration as observed on the {'receiver' if kind is SpanKind.SERVER else 'sender'}, "
                    "from the request until its answer."
                ),
                explicit_bucket_boundaries_advisory=list(C.OPERATION_DURATION_BUCKETS),
            )
            for kind in (SpanKind.SERVER, SpanKind.CLIENT)
        }

    def record(self, span: ReadableSpan) -> None:
        attributes = span.attributes or {}
        if span.kind not in self._histograms or C.METHOD not in attributes or C.DISCARD in attributes:
            return
        assert span.start_time is not None and span.end_time is not None
        labels = {key: attributes[key] for key in C.METRIC_ATTRIBUTES if key in attributes}
        assert span.context is not None
        context = trace.set_span_in_context(NonRecordingSpan(span.context))  # the exemplar's span
        self._histograms[span.kind].record((span.end_time - span.start_time) / 1e9, labels, context)

    def collect(self) -> ScopeMetrics | None:
        data = self.reader.get_metrics_data()
        scopes = [scope for rm in (data.resource_metrics if data else []) for scope in rm.scope_metrics]
        return scopes[0] if scopes else None


class Both:
    """One sequence of spans into the SDK's histograms and into ours."""

    def __init__(self, temporality: AggregationTemporality) -> None:
        self.sdk = SdkHistograms(temporality)
        self.table = DurationTable(temporality, Resource.create())
        self.ours = DurationHistograms()
        self.ours.attach(self.table)

    def record(self, spans: Sequence[ReadableSpan]) -> None:
        for span in spans:
            self.sdk.record(span)
            self.ours.record(span)

    def collect(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return _shape(self.sdk.collect()), _shape(self.table.collect())


def _shape(scope: ScopeMetrics | None) -> dict[str, Any]:
    """What a reader gets, without the clock: per metric its header and its points by attribute set."""
    if scope is None:
        return {}
    shaped: dict[str, Any] = {"scope": (scope.scope.name, scope.scope.version, scope.schema_url)}
    for metric in scope.metrics:
        points = {}
        for point in metric.data.data_points:
            exemplars = [(e.value, e.span_id, e.trace_id, e.filtered_attributes) for e in point.exemplars]
            key = tuple(sorted(point.attributes.items())) if point.attributes else ()
            points[key] = {
                "count": point.count,  # type: ignore[union-attr]
                "sum": round(point.sum, 9),  # type: ignore[union-attr]
                "min": point.min,  # type: ignore[union-attr]
                "max": point.max,  # type: ignore[union-attr]
                "buckets": tuple(point.bucket_counts),  # type: ignore[union-attr]
                "bounds": tuple(point.explicit_bounds),  # type: ignore[union-attr]
                "exemplars": exemplars,
            }
        temporality = metric.data.aggregation_temporality  # type: ignore[union-attr]
        shaped[metric.name] = {"unit": metric.unit, "description": metric.description, "temporality": temporality}
        shaped[metric.name]["points"] = points
    return shaped


def _mixed() -> list[ReadableSpan]:
    """Both kinds, several attribute sets, values on and around the boundaries, spans that are not measured."""
    spans = [_call(seconds) for seconds in (0.0004, 0.01, 0.0100001, 0.5, 0.5, 2.5, 299.9, 300.0, 400.0)]
    spans += [_call(0.003, tool="search"), _call(0.07, tool="search", extra={C.ERROR_TYPE: C.TOOL_ERROR})]
    spans += [_call(0.02, kind=SpanKind.CLIENT, extra={C.TRANSPORT: C.TCP}), _call(0.2, kind=SpanKind.CLIENT)]
    spans += [_span(SpanKind.SERVER, 0.1, {C.METHOD: "tools/list", C.RPC_STATUS: "-32602"})]
    spans += [_span(SpanKind.INTERNAL, 0.1, {C.METHOD: "tools/call"}), _span(SpanKind.SERVER, 0.1)]
    spans += [_call(0.1, extra={C.DISCARD: True})]
    return spans


@pytest.mark.parametrize("temporality", TEMPORALITIES, ids=lambda t: t.name.lower())
def test_the_duration_histograms_leave_as_the_sdks_own_histograms_would(temporality: AggregationTemporality) -> None:
    both = Both(temporality)
    both.record(_mixed())
    sdk, ours = both.collect()
    assert len(sdk[C.SERVER_DURATION]["points"]) == 4  # echo, search, search with an error, tools/list
    assert ours == sdk

    both.record([_call(0.005), _call(0.05, tool="new", kind=SpanKind.CLIENT)])
    sdk, ours = both.collect()
    assert ours == sdk

    sdk, ours = both.collect()  # nothing new: cumulative repeats its totals (no exemplars), delta has nothing
    assert ours == sdk
    assert (ours == {}) is (temporality is AggregationTemporality.DELTA)


@pytest.mark.parametrize("temporality", TEMPORALITIES, ids=lambda t: t.name.lower())
def test_past_the_cardinality_limit_new_attribute_sets_share_the_sdks_overflow_point(
    temporality: AggregationTemporality,
) -> None:
    both = Both(temporality)
    both.record([_call(0.001 * (n % 7), tool=f"tool-{n}") for n in range(CARDINALITY_LIMIT + 5)])
    both.record([_call(0.3, tool="tool-0"), _call(0.3, tool=f"tool-{CARDINALITY_LIMIT + 1}")])
    sdk, ours = both.collect()
    overflow = (("otel.metric.overflow", True),)
    assert ours[C.SERVER_DURATION]["points"][overflow]["count"] == 6
    assert ours == sdk


@pytest.mark.parametrize("temporality", TEMPORALITIES, ids=lambda t: t.name.lower())
def test_time_ranges_follow_the_sdk_a_delta_point_starts_at_the_last_collection_a_cumulative_one_when_first_seen(
    temporality: AggregationTemporality,
) -> None:
    table = DurationTable(temporality, Resource.create())
    histograms = DurationHistograms()
    histograms.attach(table)
    histograms.record(_call(0.01))
    first = table.collect()
    histograms.record(_call(0.01))
    histograms.record(_call(0.01, tool="later"))  # an attribute set first seen after the first collection
    second = table.collect()
    assert first is not None and second is not None
    collected_at = first.metrics[0].data.data_points[0].time_unix_nano
    starts = {dict(p.attributes or {})[C.TOOL_NAME]: p.start_time_unix_nano for p in second.metrics[0].data.data_points}
    if temporality is AggregationTemporality.DELTA:
        assert starts == {"echo": collected_at, "later": collected_at}
    else:
        assert starts["echo"] == first.metrics[0].data.data_points[0].start_time_unix_nano < collected_at
        assert starts["later"] > collected_at


def test_without_exemplars_the_points_carry_none() -> None:
    table = DurationTable(AggregationTemporality.CUMULATIVE, Resource.create())
    histograms = DurationHistograms()
    histograms.exemplars = False
    histograms.attach(table)
    histograms.record(_call(0.01))
    collected = table.collect()
    assert collected is not None
    point = collected.metrics[0].data.data_points[0]
    assert point.count == 1  # type: ignore[union-attr]
    assert list(point.exemplars) == []


@pytest.fixture
def provider() -> Iterator[tuple[InMemoryDurationReader, MeterProvider]]:
    reader = InMemoryDurationReader(
        preferred_temporality={Histogram: AggregationTemporality.DELTA}, resource=Resource.create({"k": "v"})
    )
    provider = MeterProvider(metric_readers=[reader], resource=Resource.create({"k": "v"}))
    try:
        yield reader, provider
    finally:
        provider.shutdown()


def _scopes(reader: InMemoryMetricReader) -> dict[str, list[str]]:
    """The scopes one collection brought, with their metrics' names; all under the one resource."""
    data = reader.get_metrics_data()
    assert data is not None
    assert [rm.resource.attributes.get("k") for rm in data.resource_metrics] == ["v"]
    return {scope.scope.name: [m.name for m in scope.metrics] for scope in data.resource_metrics[0].scope_metrics}


def test_a_reader_collects_the_histograms_alone_and_beside_the_sdks_own_instruments(
    provider: tuple[InMemoryDurationReader, MeterProvider],
) -> None:
    reader, meter_provider = provider
    DURATIONS.record(_call(0.01))
    assert _scopes(reader) == {"mcp-supervisor": [C.SERVER_DURATION]}

    DURATIONS.record(_call(0.01, kind=SpanKind.CLIENT))
    meter_provider.get_meter("other").create_counter("requests").add(1)
    assert _scopes(reader) == {"other": ["requests"], "mcp-supervisor": [C.CLIENT_DURATION]}
    assert reader.get_metrics_data() is not None  # the counter is cumulative by default: it reports again
    assert _scopes(reader) == {"other": ["requests"]}  # and the delta histograms had nothing new


def test_a_reader_that_is_shut_down_is_no_longer_recorded_into(
    provider: tuple[InMemoryDurationReader, MeterProvider],
) -> None:
    reader, _ = provider
    tables = DURATIONS.tables
    reader.shutdown()
    assert len(DURATIONS.tables) == len(tables) - 1


def test_the_boundaries_are_the_conventions() -> None:
    assert list(BOUNDARIES) == [float(bound) for bound in C.OPERATION_DURATION_BUCKETS]


@pytest.mark.parametrize(
    ("value", "kept"), [(None, True), ("trace_based", True), ("always_on", True), (" ALWAYS_OFF ", False)]
)
def test_exemplars_are_kept_unless_the_sdks_exemplar_filter_variable_turns_them_off(
    value: str | None, kept: bool
) -> None:
    environ = {} if value is None else {"OTEL_METRICS_EXEMPLAR_FILTER": value}
    assert exemplars_from(environ) is kept
