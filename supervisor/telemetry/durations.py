"""The conventions' two duration histograms, aggregated here and handed to the SDK's metric readers.

``mcp.server.operation.duration`` and ``mcp.client.operation.duration`` are
recorded from every ended MCP SERVER or CLIENT span (``OperationMetrics``), so
the histograms and the spans always agree, and metrics follow sampling. That is
twice a ``tools/call``. The SDK's ``Histogram.record`` costs about 10 us a point
(it copies, cleans and hashes the attributes, and builds a measurement), and
two of them were the largest part of telemetry's cost per call (bench/RESULTS.md,
"Issue 47, round 26"). Here a point costs about 2 us: the attributes are a
fixed tuple of low-cardinality values (``conventions.METRIC_ATTRIBUTES``), looked
up in one dict.

What leaves is what the SDK's explicit-bucket histograms would have produced
(``tests/ops/test_telemetry_durations.py`` records the same spans through both
and compares the points): the same names, unit, description, scope and bucket
boundaries; per attribute set count, sum, min, max and bucket counts; cumulative
or delta as the reader's exporter prefers; the SDK's cardinality limit (2,000
attribute sets per histogram, then one ``otel.metric.overflow`` point); and one
exemplar per bucket, the last measurement in it. An exemplar names the span
measured (the SDK's would name whichever span was current when the processor
ran) and is kept unless ``OTEL_METRICS_EXEMPLAR_FILTER=always_off``.

``DurationReading`` is a mixin for an SDK ``MetricReader``: its collections
carry these histograms beside whatever the SDK's own instruments produced.
``PeriodicDurationReader`` is the one ``telemetry.setup`` installs.

Concurrency: spans end on the trio thread (and, for the ``mcp`` SDK's own
spans, wherever it ends them); a reader collects on its own thread. One
``threading.Lock`` per ``DurationTable`` guards its points; a record holds it
for a dict lookup and a few additions. A reader's collections run one at a time
(``DurationReading._durations_lock``).
"""

from __future__ import annotations

import math
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.sdk.metrics import Exemplar
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind

from supervisor._version import __version__
from supervisor.compat.otel import histogram_temporality
from supervisor.telemetry import conventions as C

SCOPE: Final = InstrumentationScope("mcp-supervisor", __version__)
"""The meter the histograms come from, as ``metrics.get_meter("mcp-supervisor", __version__)`` names it."""
BOUNDARIES: Final = tuple(float(bound) for bound in C.OPERATION_DURATION_BUCKETS)
CARDINALITY_LIMIT: Final = 2000
"""Attribute sets per histogram before the overflow point, as the SDK's default."""
OVERFLOW: Final = (("otel.metric.overflow", True),)
DESCRIPTIONS: Final = {
    C.SERVER_DURATION: "MCP request duration as observed on the receiver, from the request until its answer.",
    C.CLIENT_DURATION: "MCP request duration as observed on the sender, from the request until its answer.",
}

_Key = tuple[Any, ...]
"""A point's attribute values, in ``conventions.METRIC_ATTRIBUTES`` order (None where absent)."""


_Exemplar = tuple[float, int, int, int, "_Key"]
"""The last measurement in a bucket: seconds, when (ns), span id, trace id, its attribute values."""


@dataclass(slots=True)
class _Point:
    """One attribute set's aggregate since it was first seen (cumulative) or since the last collection (delta)."""

    start_ns: int
    counts: list[int] = field(default_factory=lambda: [0] * (len(BOUNDARIES) + 1))
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    exemplars: dict[int, _Exemplar] = field(default_factory=dict)
    """Bucket -> its last measurement since the last collection (the SDK's aligned-bucket reservoir)."""


class DurationTable:
    """The points one reader collects, cumulative or delta as its exporter prefers."""

    def __init__(self, temporality: AggregationTemporality, resource: Resource) -> None:
        self.temporality = temporality
        self.resource = resource
        self._lock = threading.Lock()
        self._points: dict[str, dict[_Key, _Point]] = {C.SERVER_DURATION: {}, C.CLIENT_DURATION: {}}
        self._last_collection_ns: int | None = None

    @property
    def _is_delta(self) -> bool:
        return self.temporality is AggregationTemporality.DELTA

    def add(self, metric: str, key: _Key, seconds: float, end_ns: int, exemplar: tuple[int, int] | None) -> None:
        """One measurement; ``exemplar`` is the measured span's (span id, trace id) when one is kept."""
        bucket = bisect_left(BOUNDARIES, seconds)
        with self._lock:
            point = self._points[metric].get(key)
            if point is None:
                point = self._new_point(self._points[metric], key)
            point.counts[bucket] += 1
            point.total += seconds
            point.low = min(point.low, seconds)
            point.high = max(point.high, seconds)
            if exemplar is not None:
                point.exemplars[bucket] = (seconds, end_ns, exemplar[0], exemplar[1], key)

    def _new_point(self, points: dict[_Key, _Point], key: _Key) -> _Point:
        if len(points) >= CARDINALITY_LIMIT:
            key = OVERFLOW
            if (overflow := points.get(key)) is not None:
                return overflow
        # As the SDK: a delta point starts at the last collection, a cumulative one when first seen.
        start = self._last_collection_ns if self._is_delta else None
        point = points[key] = _Point(start or time.time_ns())
        return point

    def collect(self) -> ScopeMetrics | None:
        """What this reader exports now; a delta table starts over, a cumulative one keeps its points."""
        now = time.time_ns()
        with self._lock:
            metrics = [self._metric(name, points, now) for name, points in self._points.items() if points]
            self._last_collection_ns = now
            if self._is_delta:
                self._points = {name: {} for name in self._points}
        return ScopeMetrics(scope=SCOPE, metrics=metrics, schema_url=SCOPE.schema_url or "") if metrics else None

    def _metric(self, name: str, points: dict[_Key, _Point], now: int) -> Metric:
        """``name``'s data points now; each point's exemplars are handed over (held: the lock)."""
        data_points = []
        for key, point in points.items():
            attributes = _attributes(key)
            exemplars = [
                Exemplar(_filtered(measured, attributes), value, at, span_id, trace_id)
                for _, (value, at, span_id, trace_id, measured) in sorted(point.exemplars.items())
            ]
            point.exemplars = {}
            data_points.append(
                HistogramDataPoint(
                    attributes=attributes,
                    start_time_unix_nano=point.start_ns,
                    time_unix_nano=now,
                    count=sum(point.counts),
                    sum=point.total,
                    bucket_counts=tuple(point.counts),
                    explicit_bounds=BOUNDARIES,
                    min=point.low,
                    max=point.high,
                    exemplars=exemplars,
                )
            )
        data = Histogram(data_points=data_points, aggregation_temporality=self.temporality)
        return Metric(name=name, description=DESCRIPTIONS[name], unit="s", data=data)


def _attributes(key: _Key) -> dict[str, Any]:
    if key is OVERFLOW:
        return dict(OVERFLOW)
    return {name: value for name, value in zip(C.METRIC_ATTRIBUTES, key, strict=True) if value is not None}


def _filtered(measured: _Key, point_attributes: Mapping[str, Any]) -> dict[str, Any]:
    """An exemplar's attributes: the measurement's that its point lacks (all of them, in the overflow point)."""
    return {name: value for name, value in _attributes(measured).items() if name not in point_attributes}


class DurationHistograms:
    """Every reader's table; ``record`` adds a span's duration to each."""

    def __init__(self) -> None:
        self.tables: tuple[DurationTable, ...] = ()
        self.exemplars = True

    def attach(self, table: DurationTable) -> None:
        self.tables = (*self.tables, table)

    def detach(self, table: DurationTable) -> None:
        self.tables = tuple(kept for kept in self.tables if kept is not table)

    def record(self, span: ReadableSpan) -> None:
        """Add an ended MCP SERVER or CLIENT span's duration; any other span is not measured."""
        kind = span.kind
        if kind is SpanKind.SERVER:
            metric = C.SERVER_DURATION
        elif kind is SpanKind.CLIENT:
            metric = C.CLIENT_DURATION
        else:
            return
        attributes = span.attributes
        start, end = span.start_time, span.end_time
        if not attributes or C.METHOD not in attributes or C.DISCARD in attributes or start is None or end is None:
            return
        key = tuple(map(attributes.get, C.METRIC_ATTRIBUTES))
        context = span.context
        exemplar = (context.span_id, context.trace_id) if self.exemplars and context is not None else None
        seconds = (end - start) / 1e9
        for table in self.tables:
            table.add(metric, key, seconds, end, exemplar)


DURATIONS: Final = DurationHistograms()
"""The process's histograms (one process, one meter provider, as OpenTelemetry has it)."""


class OperationMetrics(SpanProcessor):
    """Records the conventions' duration histograms from every ended MCP SERVER or CLIENT span."""

    def __init__(self, histograms: DurationHistograms = DURATIONS) -> None:
        self._histograms = histograms

    def on_end(self, span: ReadableSpan) -> None:
        self._histograms.record(span)


class DurationReading(MetricReader):
    """Mixin for an SDK metric reader (list it first among the bases): its collections carry the histograms too.

    The reader's exporter decides cumulative or delta, as for the SDK's own
    instruments. The SDK hands a reader nothing when its own instruments have
    nothing to report, and the sidecar has no other instrument: so ``collect``
    (final in the SDK's typing, and overridden here on purpose, the one way to
    add data to a collection in SDK 1.45, which has no metric producers) sends
    the histograms alone then, under ``resource``. The mixin's ``super()`` calls
    reach the concrete reader's methods, which mypy cannot see from here.
    """

    def __init__(self, *args: Any, resource: Resource, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._durations_lock = threading.Lock()
        self._durations_merged = False
        self._durations = DurationTable(histogram_temporality(self), resource)
        DURATIONS.attach(self._durations)

    def collect(self, timeout_millis: float = 10_000) -> None:  # type: ignore[misc]  # see the class docstring
        with self._durations_lock:
            self._durations_merged = False
            super().collect(timeout_millis=timeout_millis)  # the SDK's; its data reaches _receive_metrics below
            if not self._durations_merged and (ours := self._durations.collect()) is not None:
                resource = self._durations.resource
                alone = MetricsData([ResourceMetrics(resource, [ours], resource.schema_url)])
                super()._receive_metrics(alone, timeout_millis=timeout_millis)  # type: ignore[safe-super]

    def _receive_metrics(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> None:
        self._durations_merged = True
        ours = self._durations.collect()
        if ours is not None and metrics_data.resource_metrics:
            first, *rest = metrics_data.resource_metrics
            merged = ResourceMetrics(first.resource, [*first.scope_metrics, ours], first.schema_url)
            metrics_data = MetricsData([merged, *rest])
        super()._receive_metrics(metrics_data, timeout_millis=timeout_millis, **kwargs)  # type: ignore[safe-super]

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        super().shutdown(timeout_millis=timeout_millis, **kwargs)  # type: ignore[safe-super]
        DURATIONS.detach(self._durations)


class PeriodicDurationReader(DurationReading, PeriodicExportingMetricReader):
    """The SDK's periodic exporting reader, with the duration histograms."""


def exemplars_from(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether exemplars are kept: unless ``OTEL_METRICS_EXEMPLAR_FILTER=always_off`` (the SDK's variable)."""
    return environ.get("OTEL_METRICS_EXEMPLAR_FILTER", "trace_based").strip().lower() != "always_off"
