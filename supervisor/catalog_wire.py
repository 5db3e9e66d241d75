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

``encoded`` gives the same answer as JSON bytes, encoded once per version, for
the stdio wire splice (``wire_splice``), which writes a first-page listing to a
2026-era stdio host without the SDK re-validating and re-encoding 5,000 tools.
"""

from __future__ import annotations

import json
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
        self._encoded: dict[str, bytes] = {}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/list" or (ctx.params and ctx.params.get("cursor")):
            return await call_next(ctx)
        self._check_version()
        cached = self._by_protocol.get(ctx.protocol_version)
        if cached is not None:
            return cached
        version_before = self._registry.version
        result = await call_next(ctx)
        # Cache only an answer built from one Registry version, after start-up settled.
        if isinstance(result, dict) and self._registry.version == version_before == self._version and self._settled():
            self._by_protocol[ctx.protocol_version] = result
        return result

    def _check_version(self) -> None:
        if self._version != self._registry.version:
            self._version = self._registry.version
            self._by_protocol.clear()
            self._encoded.clear()

    def encoded(self, protocol_version: str) -> bytes | None:
        """The cached first-page answer for ``protocol_version`` as JSON bytes, or None if none is cached."""
        self._check_version()
        encoded = self._encoded.get(protocol_version)
        if encoded is None:
            cached = self._by_protocol.get(protocol_version)
            if cached is None:
                return None
            encoded = self._encoded[protocol_version] = json.dumps(cached, separators=(",", ":")).encode()
        return encoded
