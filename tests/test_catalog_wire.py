"""The host's tools/list wire-form cache: served per Registry version, never stale (I3)."""

from __future__ import annotations

from typing import Any, cast

from mcp.server.context import HandlerResult, ServerRequestContext

from supervisor.catalog_wire import ToolsListWireCache
from supervisor.registry import Registry
from tests.fakes import tool


class _Ctx:
    def __init__(self, method: str = "tools/list", protocol_version: str = "2026-07-28") -> None:
        self.method = method
        self.protocol_version = protocol_version
        self.params: dict[str, Any] | None = None


def _ctx(method: str = "tools/list", protocol_version: str = "2026-07-28") -> ServerRequestContext[Any, Any]:
    return cast("ServerRequestContext[Any, Any]", _Ctx(method, protocol_version))


async def test_the_wire_form_is_built_once_per_registry_version_and_protocol() -> None:
    registry = Registry()
    registry.swap("srv", [tool("a")])
    built: list[str] = []

    async def pipeline(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        built.append(ctx.protocol_version)
        return {"tools": [t.name for t in registry.tools()]}

    cache = ToolsListWireCache(registry, settled=lambda: True)
    assert await cache(_ctx(), pipeline) == {"tools": ["mcp__srv__a"]}
    assert await cache(_ctx(), pipeline) == {"tools": ["mcp__srv__a"]}
    assert await cache(_ctx(protocol_version="2025-11-25"), pipeline) == {"tools": ["mcp__srv__a"]}
    assert built == ["2026-07-28", "2025-11-25"]

    registry.swap("srv", [tool("a"), tool("b")])
    assert await cache(_ctx(), pipeline) == {"tools": ["mcp__srv__a", "mcp__srv__b"]}, "never the old generation"
    assert built == ["2026-07-28", "2025-11-25", "2026-07-28"]


async def test_nothing_is_cached_before_start_up_settles_or_for_other_methods() -> None:
    registry = Registry()
    calls = 0

    async def pipeline(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        nonlocal calls
        calls += 1
        return {"tools": []}

    settled = False
    cache = ToolsListWireCache(registry, settled=lambda: settled)
    await cache(_ctx(), pipeline)
    await cache(_ctx(), pipeline)
    await cache(_ctx("tools/call"), pipeline)
    assert calls == 3
    settled = True
    await cache(_ctx(), pipeline)
    await cache(_ctx(), pipeline)
    assert calls == 4
