"""The ``[supervisor.telemetry]`` table: OpenTelemetry traces and metrics (DESIGN §3.2c, I18).

Pure data. Where spans and metrics go (endpoint, protocol, headers, sampler,
resource) is configured the standard way, by ``OTEL_*`` environment variables,
read by the OpenTelemetry SDK when ``supervisor.telemetry.setup`` starts it;
this table only switches telemetry on and opts into content capture.
"""

from __future__ import annotations

from pydantic import BaseModel

from supervisor.config.base import STRICT


class TelemetrySettings(BaseModel):
    """Whether the sidecar traces and meters its work, and whether spans may carry tool content."""

    model_config = STRICT

    enabled: bool = False
    """Off by default, and then free: no span is made on any call path (needs the ``otel`` extra when on)."""
    capture_content: bool = False
    """Record tool arguments and results on spans (the conventions' opt-in ``gen_ai.tool.call.*`` attributes).

    Tokens, headers and environment values are never recorded, even then."""


__all__ = ["TelemetrySettings"]
