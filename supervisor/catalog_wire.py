"""The host's ``tools/list`` answer, serialized once per Registry version.

With thousands of tools, turning the catalog into its wire form (model →
dict → per-version validation and sieve → ``serverInfo`` stamp) costs far more
than anything else the Front does: hundreds of milliseconds for 5,000 tools.
The catalog only changes when the Registry's version moves, so this Front
middleware keeps the wire form the SDK's own pipeline produced for each
protocol version and serves it until the Registry changes.

It sits innermost in ``Server.middleware``, so the OpenTelemetry span still
wraps every request, and the cached value is exactly what the SDK produced
(the runner copies a middleware's dict before it shapes the envelope, so the
cached object is never mutated). Synchronous bookkeeping only; no locks needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from supervisor.registry import Registry


class ToolsListWireCache:
    """Serve ``tools/list`` from the wire form of the Registry's current version.

    Args:
        registry: Whose ``version`` decides freshness.
        settled: Whether the answer may be cached now (the Front's first answers
            wait for servers still starting; those are never cached).
    """

    def __init__(self, registry: Registry, *, settled: Callable[[], bool]) -> None:
        self._registry = registry
        self._settled = settled
        self._version = -1
        self._by_protocol: dict[str, HandlerResult] = {}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/list" or (ctx.params and ctx.params.get("cursor")):
            return await call_next(ctx)
        if self._version != self._registry.version:
            self._version = self._registry.version
            self._by_protocol.clear()
        cached = self._by_protocol.get(ctx.protocol_version)
        if cached is not None:
            return cached
        version_before = self._registry.version
        result = await call_next(ctx)
        # Cache only an answer built from one Registry version, after start-up settled.
        if isinstance(result, dict) and self._registry.version == version_before == self._version and self._settled():
            self._by_protocol[ctx.protocol_version] = result
        return result
