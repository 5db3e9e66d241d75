"""What the sidecar assumes about the ``mcp`` SDK's own OpenTelemetry spans (mcp 2.3, ``mcp.shared._otel``).

The SDK traces with one tracer of its own. Its server middleware
(``mcp.server._otel.OpenTelemetryMiddleware``, on every low-level ``Server``)
makes a SERVER span per host request that already follows the conventions, so
the Front keeps it and adds the sidecar's attributes. Its client dispatcher
(``mcp.shared.jsonrpc_dispatcher``) makes a CLIENT span per outbound request,
named ``MCP send {method} {target}``, and injects *that* span's context into
the request's ``_meta``. ``supervisor.telemetry.sdk`` renames those spans to the
conventions' ``{method} {target}`` and, where the sidecar's own CLIENT span
already covers the request, folds them into it (the SDK then injects ours).

Both facts are strings, not imports: nothing here loads the SDK. One test per
assumption (``tests/ops/test_telemetry_compat.py``) reads them off the SDK.

One reach into the OpenTelemetry SDK (1.45) itself: ``histogram_temporality``
reads which temporality a metric reader gives histograms (its exporter's
preference, which the SDK keeps private). ``telemetry.durations`` aggregates
the duration histograms itself and must report them as the SDK would.
"""

from __future__ import annotations

from typing import Any, Final

SDK_TRACER_NAME: Final = "mcp-python-sdk"
"""The instrumentation scope of every span the SDK makes (``mcp.shared._otel._tracer``)."""
SDK_SEND_PREFIX: Final = "MCP send "
"""How the SDK's dispatcher names an outbound request's CLIENT span, before ``{method} {target}``."""


def histogram_temporality(reader: Any) -> Any:
    """The ``AggregationTemporality`` an SDK ``MetricReader`` collects histograms in (cumulative unless delta)."""
    from opentelemetry.sdk.metrics._internal.instrument import _Histogram  # noqa: PLC0415  (the SDK only when on)

    return reader._instrument_class_temporality[_Histogram]  # where MetricReader.__init__ keeps it


__all__ = ["SDK_SEND_PREFIX", "SDK_TRACER_NAME", "histogram_temporality"]
