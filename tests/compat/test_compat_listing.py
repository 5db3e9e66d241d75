"""One test per private-SDK assumption of ``supervisor.compat.listing`` (mcp 2.3)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import trio
from mcp import Client
from mcp.client.caching import ClientResponseCache
from mcp.server import Server, ServerRequestContext

from supervisor.compat.listing import absorb_tool_listing, response_cache, shape_inbound_result

BOUND_SEC = 10.0


def _server() -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[])

    return Server("compat", version="1.0", on_list_tools=list_tools)


async def test_a_client_exposes_its_response_cache_and_none_without_one() -> None:
    with trio.fail_after(BOUND_SEC):
        async with Client(_server(), mode="legacy") as cached:
            assert isinstance(response_cache(cached), ClientResponseCache)
        async with Client(_server(), mode="legacy", cache=None) as uncached:
            assert response_cache(uncached) is None


async def test_absorbing_a_listing_records_output_schemas_and_a_complete_one_prunes() -> None:
    schema: dict[str, Any] = {"type": "object"}
    with_output = types.Tool(name="a", input_schema=schema, output_schema={"type": "object"})
    with trio.fail_after(BOUND_SEC):
        async with Client(_server(), mode="legacy") as client:
            session = client.session
            absorb_tool_listing(session, types.ListToolsResult(tools=[with_output]), complete=False)
            assert session._tool_output_schemas == {"a": {"type": "object"}}
            absorb_tool_listing(session, types.ListToolsResult(tools=[]), complete=True)
            assert session._tool_output_schemas == {}


def test_inbound_shaping_clamps_ttl_and_drops_later_revision_keys() -> None:
    assert shape_inbound_result("tools/list", "2026-07-28", {"tools": [], "ttlMs": -1}) == {"tools": [], "ttlMs": 0}
    shaped = shape_inbound_result("tools/list", "2025-11-25", {"tools": [], "ttlMs": 5, "cacheScope": "public"})
    assert shaped == {"tools": []}
