"""Starting and stopping telemetry for ``run`` (``[supervisor.telemetry]`` plus the standard ``OTEL_*`` variables).

``start`` does nothing unless ``enabled = true`` (and ``OTEL_SDK_DISABLED`` is
not ``true``); then it needs the ``otel`` extra. It installs the global tracer
and meter providers (``telemetry.sdk``) with the exporters the environment
names, the way every OpenTelemetry SDK reads them:

* ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``: ``otlp`` (default),
  ``console`` (stderr: stdout carries MCP frames) or ``none``, comma-separated;
* ``OTEL_EXPORTER_OTLP_PROTOCOL`` (or the ``_TRACES_``/``_METRICS_`` variants):
  ``http/protobuf`` (default) or ``grpc`` (needs
  ``opentelemetry-exporter-otlp-proto-grpc``);
* the exporters themselves read ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``…_HEADERS``,
  ``…_TIMEOUT``; the batch processor ``OTEL_BSP_*``; the metric reader
  ``OTEL_METRIC_EXPORT_INTERVAL``; the provider ``OTEL_TRACES_SAMPLER`` and
  ``OTEL_RESOURCE_ATTRIBUTES``/``OTEL_SERVICE_NAME``; the API
  ``OTEL_PROPAGATORS`` (default: W3C trace context and baggage).

Then it turns ``TELEMETRY.on``. ``Running.shutdown`` flushes and stops the
exporters (blocking: ``serve`` runs it in a thread, bounded).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from supervisor.config.telemetry import TelemetrySettings
from supervisor.errors import ConfigError
from supervisor.telemetry.spans import TELEMETRY

logger = logging.getLogger(__name__)

FLUSH_BOUND_MS: Final = 3000
"""How long the last spans may take to leave on the way out."""
INSTALL_HINT: Final = "pip install 'trio-mcp-supervisor[otel]'"


@dataclass
class Running:
    """The installed providers (``telemetry.sdk``)."""

    tracer_provider: Any
    meter_provider: Any

    def shutdown(self) -> None:
        """Flush what is buffered (bounded) and stop the exporters; telemetry is off afterwards."""
        TELEMETRY.on = False
        self.tracer_provider.force_flush(FLUSH_BOUND_MS)
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown(timeout_millis=FLUSH_BOUND_MS)


def start(
    settings: TelemetrySettings, *, secrets: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> Running | None:
    """Install the SDK as the environment says and turn telemetry on; None when it stays off.

    Raises:
        ConfigError: Telemetry is on but the ``otel`` extra is missing, or an exporter is unknown.
    """
    environ = os.environ if environ is None else environ
    if not settings.enabled or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    try:
        from opentelemetry import metrics, trace  # noqa: PLC0415  (only when on)
        from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415

        from supervisor.telemetry import sdk  # noqa: PLC0415
        from supervisor.telemetry.durations import DURATIONS, exemplars_from  # noqa: PLC0415
    except ImportError as exc:
        raise ConfigError(
            f"supervisor.telemetry.enabled = true needs the OpenTelemetry SDK, which is not installed: {INSTALL_HINT}"
        ) from exc
    resource = sdk.resource(environ)
    exporters, readers = _span_exporters(environ), _metric_readers(environ, resource)  # each ConfigError first
    DURATIONS.exemplars = exemplars_from(environ)
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    metrics.set_meter_provider(meter_provider)  # for instruments of other libraries (ours: telemetry.durations)
    tracer_provider = sdk.tracer_provider(exporters, resource_=resource, metered=bool(readers))
    trace.set_tracer_provider(tracer_provider)
    TELEMETRY.capture_content = settings.capture_content
    TELEMETRY.secrets = tuple(secrets)
    TELEMETRY.on = True
    logger.info(
        "telemetry on: traces to %s, metrics to %s%s",
        _names(environ, "OTEL_TRACES_EXPORTER"), _names(environ, "OTEL_METRICS_EXPORTER"),
        " (capturing tool content)" if settings.capture_content else "",
    )  # fmt: skip
    return Running(tracer_provider, meter_provider)


def add_secrets(secrets: Iterable[str]) -> None:
    """Mask these values in spans from now on too (a reload brought new ones); a no-op while off."""
    if TELEMETRY.on:
        TELEMETRY.secrets = tuple(dict.fromkeys((*TELEMETRY.secrets, *secrets)))


def _names(environ: Mapping[str, str], variable: str) -> list[str]:
    names = [name.strip().lower() for name in environ.get(variable, "otlp").split(",") if name.strip()]
    return names or ["otlp"]


def _protocol(environ: Mapping[str, str], signal: str) -> str:
    specific = environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
    return (specific or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()


def _span_exporters(environ: Mapping[str, str]) -> Sequence[Any]:
    exporters: list[Any] = []
    for name in _names(environ, "OTEL_TRACES_EXPORTER"):
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415

            exporters.append(ConsoleSpanExporter(out=sys.stderr))
        elif name == "otlp":
            exporters.append(_otlp(environ, "TRACES", "trace_exporter", "OTLPSpanExporter"))
        else:
            raise ConfigError(f"OTEL_TRACES_EXPORTER={name!r}: mcp-supervisor knows otlp, console and none")
    return exporters


def _metric_readers(environ: Mapping[str, str], resource: Any) -> Sequence[Any]:
    """One periodic reader per exporter; each also reads the duration histograms (``telemetry.durations``)."""
    from supervisor.telemetry.durations import PeriodicDurationReader  # noqa: PLC0415

    readers: list[Any] = []
    for name in _names(environ, "OTEL_METRICS_EXPORTER"):
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.metrics.export import ConsoleMetricExporter  # noqa: PLC0415

            readers.append(PeriodicDurationReader(ConsoleMetricExporter(out=sys.stderr), resource=resource))
        elif name == "otlp":
            exporter = _otlp(environ, "METRICS", "metric_exporter", "OTLPMetricExporter")
            readers.append(PeriodicDurationReader(exporter, resource=resource))
        else:
            raise ConfigError(f"OTEL_METRICS_EXPORTER={name!r}: mcp-supervisor knows otlp, console and none")
    return readers


def _otlp(environ: Mapping[str, str], signal: str, module: str, cls: str) -> Any:
    """The OTLP exporter for ``signal`` over the configured protocol (it reads its endpoint etc. itself)."""
    protocol = _protocol(environ, signal)
    if protocol in ("http/protobuf", "http"):
        package = "opentelemetry.exporter.otlp.proto.http"
    elif protocol == "grpc":
        package = "opentelemetry.exporter.otlp.proto.grpc"
    else:
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: mcp-supervisor speaks http/protobuf and grpc")
    import importlib  # noqa: PLC0415

    try:
        exporter_module = importlib.import_module(f"{package}.{module}")
    except ImportError as exc:
        extra = "opentelemetry-exporter-otlp-proto-grpc" if protocol == "grpc" else INSTALL_HINT
        raise ConfigError(f"OTLP over {protocol} needs {extra}, which is not installed") from exc
    return getattr(exporter_module, cls)()
