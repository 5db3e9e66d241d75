"""``telemetry.setup.start``: the histograms are recorded only where a metric reader will read them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind

from supervisor.config.telemetry import TelemetrySettings
from supervisor.telemetry import conventions as C
from supervisor.telemetry import durations, setup
from supervisor.telemetry.spans import OWN_TRACER_NAME, TELEMETRY


@pytest.fixture
def metered_spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The spans ``OperationMetrics`` was handed; the global providers left as they were."""
    handed: list[Any] = []
    monkeypatch.setattr(durations.OperationMetrics, "on_end", lambda self, span: handed.append(span))
    monkeypatch.setattr(metrics, "set_meter_provider", lambda provider: None)
    monkeypatch.setattr(trace, "set_tracer_provider", lambda provider: None)
    try:
        yield handed
    finally:
        TELEMETRY.on = False


@pytest.mark.parametrize(("metrics_exporter", "metered"), [("none", False), ("console", True)])
def test_the_duration_histograms_are_recorded_only_when_a_metrics_exporter_reads_them(
    metered_spans: list[Any], metrics_exporter: str, metered: bool
) -> None:
    environ = {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": metrics_exporter}
    running = setup.start(TelemetrySettings(enabled=True), environ=environ)
    assert running is not None
    try:
        tracer = running.tracer_provider.get_tracer(OWN_TRACER_NAME)
        tracer.start_span("tools/call echo", kind=SpanKind.SERVER, attributes={C.METHOD: "tools/call"}).end()
    finally:
        running.shutdown()
    assert len(metered_spans) == (1 if metered else 0)
