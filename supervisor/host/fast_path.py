"""The tools/call fast path: bytes the sidecar only forwards cross without a model (issue 11).

A ``tools/call`` between a 2026-era host and a 2026-era upstream needs nothing
from the SDK's models: the host's arguments go upstream as they came, and the
upstream's result goes back as the JSON object it sent, with one edit, the
``serverInfo`` stamp in ``_meta``, which names us instead of it. ``FastToolCalls``
is a Front middleware (innermost, so the SDK's OpenTelemetry span and the
Front's request tracking still wrap every call) that serves such calls that
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
is the table in ``host.tool_calls``. ``FastToolCalls.taken``
counts each way, so tests can prove which path a call took.

Concurrency: synchronous checks, then one awaited upstream call in the
handler's own task; no state beyond counters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.server_actor import ServerActor

PLAIN_PARAMS: Final = frozenset({"name", "arguments", "_meta"})
"""Params keys a call may carry and still take the fast path (anything else goes the general way)."""

Route = Callable[[str], "tuple[RegisteredTool, ServerActor] | None"]
RunCall = Callable[
    [ServerRequestContext[Any, Any], "RegisteredTool", "ServerActor", "dict[str, Any] | None"],
    Awaitable[HandlerResult],
]


def restamp(result: dict[str, Any], stamp: dict[str, Any]) -> dict[str, Any]:
    """The upstream's result as the host must see it: our ``serverInfo`` stamp, and a ``resultType``.

    What the SDK's ``_serialize`` does to a 2026-era result, for a result that
    is already a wire dict: ``result`` is ours (freshly parsed), ``_meta`` is
    replaced rather than written into.
    """
    meta = result.get("_meta")
    result["_meta"] = {**meta, SERVER_INFO_META_KEY: stamp} if isinstance(meta, dict) else {SERVER_INFO_META_KEY: stamp}
    if result.get("resultType") is None:
        result["resultType"] = "complete"
    return result


def fast_path_arguments(ctx: ServerRequestContext[Any, Any]) -> tuple[str, dict[str, Any] | None] | None:
    """``(name, arguments)`` of a call the fast path can carry as far as the request goes, else None."""
    params = ctx.params
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS or not isinstance(params, dict):
        return None
    if not PLAIN_PARAMS.issuperset(params):
        return None  # inputResponses, requestState, or something new: the general path
    name = params.get("name")
    arguments = params.get("arguments")
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
        return None
    meta = params.get("_meta")
    if meta is not None and (not isinstance(meta, dict) or meta.get("progressToken") is not None):
        return None
    return name, arguments


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
        plain = fast_path_arguments(ctx) if self.enabled else None
        routed = self._route(plain[0]) if plain is not None else None
        if plain is None or routed is None or not self._carries(*routed):
            self.taken["general"] += 1
            return await call_next(ctx)
        self.taken["fast"] += 1
        tool, actor = routed
        return await self._run_call(ctx, tool, actor, plain[1])

    @staticmethod
    def _carries(tool: RegisteredTool, actor: ServerActor) -> bool:
        return tool.source.output_schema is None and actor.ready_upstream is not None
