"""The tools/call fast path: bytes the sidecar only forwards cross without a model (issue 11).

A ``tools/call`` between a 2026-era host and a 2026-era upstream needs nothing
from the SDK's models: the host's arguments go upstream as they came, and the
upstream's result goes back as the JSON object it sent, with one edit, the
``serverInfo`` stamp in ``_meta``, which names us instead of it. ``FastToolCalls``
is a Front middleware (innermost, so the SDK's OpenTelemetry span, where
``compat.sdk.gate_sdk_tracing`` lets it run, and the Front's request tracking
still wrap every call) that serves such calls that
way, skipping the SDK's request validation and result sieve on the host side
and its request model and result validation on the upstream side.

Everything a call must keep still happens on this path, through the same code
as the general one (``Front._run_tool_call``): routing, the shutdown refusal,
``tool_timeout_sec``, error translation (an ``UpstreamError`` becomes an error
result, a server's JSON-RPC error passes through), the unknown-tool heal (I8),
metrics, the per-call host context that attributes log notices, and a 2026
``input_required`` result, which passes through to the host unchanged as it
does on the general path.

Which calls it takes, and why the others go the general way (``call_next``),
is the table in ``host.call_paths``. ``FastToolCalls.taken``
counts each way, so tests can prove which path a call took.

Concurrency: synchronous checks, then one awaited upstream call in the
handler's own task; no state beyond counters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from supervisor.host.call_paths import path_of, plain_call

if TYPE_CHECKING:
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.server_actor import ServerActor

Route = Callable[[str], "tuple[RegisteredTool, ServerActor] | None"]
RunCall = Callable[
    [ServerRequestContext[Any, Any], "RegisteredTool", "ServerActor", "dict[str, Any] | None"],
    Awaitable[HandlerResult],
]


class FastToolCalls:
    """Front middleware: eligible ``tools/call`` requests take the fast path, the rest ``call_next``.

    Args:
        route: Public tool name → (tool, actor), or None (``Supervisor.route``).
        run_call: Runs one call on the fast path (``Front._call_tool_wire``).
        enabled: Whether the fast path is on at all (off: every call goes the general way).
    """

    def __init__(self, route: Route, run_call: RunCall, *, enabled: bool = True) -> None:
        self._route = route
        self._run_call = run_call
        self.enabled = enabled
        self.taken: Counter[str] = Counter()
        """How many calls took ``"fast"`` and how many ``"general"``."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        modern = self.enabled and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        plain = plain_call(ctx.params, handshake_host=False) if modern else None
        routed = self._route(plain.name) if plain is not None else None
        if path_of(plain, routed, stdio_host=False, handshake_host=not modern) != "fast":
            self.taken["general"] += 1
            return await call_next(ctx)
        assert plain is not None and routed is not None
        self.taken["fast"] += 1
        tool, actor = routed
        return await self._run_call(ctx, tool, actor, plain.arguments)
