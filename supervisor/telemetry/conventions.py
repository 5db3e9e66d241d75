"""Names from the OpenTelemetry semantic conventions for MCP (gen-ai ``mcp.md``), and the sidecar's own.

Pure constants and functions: no I/O, no state. The conventions' span name is
``{mcp.method.name} {target}`` (the target: the tool's name); a host's request
is a SERVER span, an upstream request a CLIENT span, and ``error.type`` is the
JSON-RPC code of an error answer, ``tool_error`` for an ``isError`` result, or
a low-cardinality identifier of our own (``timeout``, ``unavailable``,
``cancelled``) for a request that got no answer.
"""

from __future__ import annotations

from typing import Final

METHOD: Final = "mcp.method.name"
TOOL_NAME: Final = "gen_ai.tool.name"
OPERATION: Final = "gen_ai.operation.name"
EXECUTE_TOOL: Final = "execute_tool"
"""``gen_ai.operation.name`` of a ``tools/call`` (and of nothing else)."""
REQUEST_ID: Final = "jsonrpc.request.id"
PROTOCOL_VERSION: Final = "mcp.protocol.version"
TRANSPORT: Final = "network.transport"
ERROR_TYPE: Final = "error.type"
RPC_STATUS: Final = "rpc.response.status_code"
ARGUMENTS: Final = "gen_ai.tool.call.arguments"
"""Opt-in (``capture_content``): the host's arguments, as a JSON string."""
RESULT: Final = "gen_ai.tool.call.result"
"""Opt-in (``capture_content``): the result the host got, as a JSON string."""
CONTENT_ATTRIBUTES: Final = frozenset({ARGUMENTS, RESULT})

SERVER: Final = "mcp_supervisor.server"
"""Ours: the configured server a span is about."""
GENERATION: Final = "mcp_supervisor.generation"
"""Ours: that server's connection generation (a reconnect starts the next)."""
DISCARD: Final = "mcp_supervisor.discard"
"""Ours, internal: a span made for a call that another path then served; never exported nor metered."""
OUTCOME: Final = "mcp_supervisor.outcome"
"""Ours, on a tools/call SERVER span: how the call ended, as the Prometheus counter counts it."""

TOOL_ERROR: Final = "tool_error"
PIPE: Final = "pipe"
"""``network.transport`` of stdio."""
TCP: Final = "tcp"
"""``network.transport`` of HTTP."""

TRACEPARENT: Final = "traceparent"
"""The trace-context key that names a parent span; without it the other keys name none."""
TRACE_KEYS: Final = (TRACEPARENT, "tracestate", "baggage")
"""The ``_meta`` keys that carry trace context (SEP-414), unprefixed."""

OPERATION_DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
"""The conventions' bucket boundaries (seconds) for ``mcp.*.operation.duration``."""
SERVER_DURATION: Final = "mcp.server.operation.duration"
CLIENT_DURATION: Final = "mcp.client.operation.duration"
METRIC_ATTRIBUTES: Final = (
    METHOD,
    ERROR_TYPE,
    TOOL_NAME,
    OPERATION,
    PROTOCOL_VERSION,
    TRANSPORT,
    RPC_STATUS,
    SERVER,
)
"""What a span lends the duration histograms (low cardinality: no ids, no generation)."""


def transport_of(stdio: bool) -> str:
    return PIPE if stdio else TCP


def client_error_type(outcome: str, code: int | None = None) -> str | None:
    """``error.type`` of an upstream request that ended with ``outcome`` (``calls.results.CallOutcome``)."""
    if outcome == "ok":
        return None
    if outcome == "rpc_error":
        return str(code)
    return outcome


def server_error_type(outcome: str, code: int | None = None) -> str | None:
    """``error.type`` of a host's tools/call that ended with ``outcome``.

    The host got an ``isError`` result for a timeout or an unavailable server
    too, so those are ``tool_error`` here, as the SDK's own middleware records
    them on the other paths; ``mcp_supervisor.outcome`` says which, and the
    CLIENT span's ``error.type`` too. A host that cancelled got no answer: no error.
    """
    if outcome in ("ok", "cancelled"):
        return None
    if outcome == "rpc_error":
        return str(code)
    return TOOL_ERROR
