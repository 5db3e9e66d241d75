"""Telemetry: OpenTelemetry spans and metrics per the semantic conventions for MCP (DESIGN I18, issue 28).

Off by default and free when off: ``spans.TELEMETRY.on`` is the one check each
call path makes. ``spans`` holds the helpers every layer uses (the OpenTelemetry
API only), ``conventions`` the names, ``setup`` starts the SDK for ``run``, and
``sdk`` (the ``otel`` extra) is the SDK side: the provider, span-derived
metrics, redaction on export. See ``docs/tracing.md``.
"""
