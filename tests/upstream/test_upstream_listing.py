"""The raw ``tools/list`` path (``upstream.listing``): the SDK's answer, validation, cache and session state.

Real SDK ``mcp.Client`` generations talk to an in-process low-level ``Server``
(handshake era through ``mode="legacy"``, 2026 era through ``mode="auto"``), so
every comparison with the SDK's own ``Client.list_tools`` is exact and runs no
process. The end-to-end reuse across real reconnects is ``test_catalog_reuse``.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.server import Server, ServerRequestContext
from pydantic import ValidationError

from supervisor.catalog.cache import CatalogCache
from supervisor.catalog.registry import OwnedListing
from supervisor.config.servers import ServerSettings
from supervisor.upstream.listing import (
    CachedToolsPage,
    SharedOnWrite,
    list_all,
    list_tools_page,
    parse_tools_page,
)

BOUND_SEC = 10.0
CACHE_FIELDS: dict[str, Any] = {"cacheScope": "private", "resultType": "complete"}
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
OUTPUT: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _tools(count: int) -> list[types.Tool]:
    tools = [types.Tool(name=f"t_{i}", description=f"tool {i}", input_schema=SCHEMA) for i in range(count)]
    tools.append(
        types.Tool(
            name="counted",
            title="Counted",
            input_schema={"type": "object"},
            output_schema=OUTPUT,
            annotations=types.ToolAnnotations(read_only_hint=True),
            _meta={"vendor/x": 1},
        )
    )
    return tools


class ListingServer:
    """An in-process server with ``count`` + 1 tools, optionally paged, counting its ``tools/list`` requests."""

    def __init__(self, count: int = 3, *, page_size: int | None = None, ttl_ms: int | None = None) -> None:
        self.lists = 0
        self.tools = _tools(count)
        self.page_size = page_size
        self.ttl_ms = ttl_ms
        self.server: Server[Any] = Server(
            "listing", version="1.0", on_list_tools=self._list_tools, on_call_tool=self._call_tool
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self.lists += 1
        extra: dict[str, Any] = {} if self.ttl_ms is None else {"ttl_ms": self.ttl_ms}
        if self.page_size is None:
            return types.ListToolsResult(tools=self.tools, **extra)
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + self.page_size
        following = str(end) if end < len(self.tools) else None
        return types.ListToolsResult(tools=self.tools[start:end], next_cursor=following, **extra)

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        return types.CallToolResult(content=[], structured_content={"n": 1})


def _settings() -> ServerSettings:
    return ServerSettings(name="srv", command="x")


@asynccontextmanager
async def generation(upstream: ListingServer, mode: str, cache: CatalogCache | None = None) -> AsyncIterator[Client]:
    config = cache.config_for(_settings()) if cache is not None else None
    async with Client(upstream.server, mode=mode, cache=config) as client:
        yield client


def _translate(_what: str) -> nullcontext[None]:
    return nullcontext()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_raw_tools_listing_equals_the_sdks_own_in_both_eras(mode: str) -> None:
    upstream = ListingServer()
    with trio.fail_after(BOUND_SEC):
        async with generation(upstream, mode) as client:
            raw = await list_tools_page(client, None, "bypass")
            sdk = await client.list_tools(cache_mode="bypass")
    assert raw.model_dump(by_alias=True) == sdk.model_dump(by_alias=True)
    assert raw.model_fields_set == sdk.model_fields_set
    assert [tool.model_fields_set for tool in raw.tools] == [tool.model_fields_set for tool in sdk.tools]


def test_a_2026_listing_without_its_cache_fields_is_refused_as_the_sdk_refuses_it() -> None:
    listing = {"tools": [{"name": "a", "inputSchema": {"type": "object"}}]}
    with pytest.raises(ValidationError):
        parse_tools_page(dict(listing), "2026-07-28")
    parse_tools_page(dict(listing), "2025-11-25")  # valid at the handshake revision


def test_a_listing_with_one_invalid_tool_is_refused_whole() -> None:
    listing = {"tools": [{"name": "a", "inputSchema": {"type": "object"}}, {"name": "b", "inputSchema": "nope"}]}
    with pytest.raises(ValidationError):
        parse_tools_page(listing, "2025-11-25")


def test_a_handshake_era_listing_ignores_cache_fields_and_a_2026_one_clamps_a_negative_lifetime() -> None:
    handshake = parse_tools_page({"tools": [], "ttlMs": 5000, "cacheScope": "public"}, "2025-11-25")
    assert "ttl_ms" not in handshake.model_fields_set, "a handshake-era server's ttlMs is not a declaration"
    modern = parse_tools_page({"tools": [], "ttlMs": -5, **CACHE_FIELDS}, "2026-07-28")
    assert modern.ttl_ms == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_session_learns_output_schemas_from_the_raw_listing_so_a_call_does_not_relist(mode: str) -> None:
    upstream = ListingServer()
    with trio.fail_after(BOUND_SEC):
        async with generation(upstream, mode) as client:
            await list_tools_page(client, None, "bypass")
            result = await client.session.call_tool("counted", {})
    assert result.structured_content == {"n": 1}
    assert upstream.lists == 1, "the SDK re-lists before validating a result of a tool it never saw listed"


async def test_a_paged_listing_is_fetched_whole_and_only_its_first_page_is_reused() -> None:
    upstream = ListingServer(4, page_size=2)
    cache = CatalogCache(principal="local")
    with trio.fail_after(BOUND_SEC):
        async with generation(upstream, "legacy", cache) as client:
            first = await list_all(client, _settings(), "tools", "refresh", _translate)
            assert [tool.name for tool in first] == [tool.name for tool in upstream.tools]
            assert upstream.lists == 3
            again = await list_all(client, _settings(), "tools", "use", _translate)
    assert [tool.name for tool in again] == [tool.name for tool in upstream.tools]
    assert upstream.lists == 5, "the first page is served from the cache, the continuation pages never are"


async def test_a_new_client_generation_reuses_the_raw_parsed_catalog_without_listing() -> None:
    upstream = ListingServer(ttl_ms=60_000)
    cache = CatalogCache(principal="local")
    with trio.fail_after(BOUND_SEC):
        async with generation(upstream, "legacy", cache) as client:
            written = await list_all(client, _settings(), "tools", "refresh", _translate)
        async with generation(upstream, "legacy", cache) as client:
            reused = await list_all(client, _settings(), "tools", "use", _translate)
            # The served copy is the session's listing too: a call of the schema'd tool does not relist.
            await client.session.call_tool("counted", {})
    assert upstream.lists == 1
    assert isinstance(reused, OwnedListing)
    assert [tool.model_dump() for tool in reused] == [tool.model_dump() for tool in written]
    last_reused, last_written = reused[-1], written[-1]
    assert isinstance(last_reused, types.Tool) and isinstance(last_written, types.Tool)
    assert last_reused is not last_written and last_reused.output_schema is not last_written.output_schema


def test_a_cached_tools_page_copies_into_an_equal_independent_page_with_the_same_set_fields() -> None:
    page = parse_tools_page({"tools": [tool.model_dump(by_alias=True) for tool in _tools(2)]}, "2025-11-25")
    dated = parse_tools_page({"tools": [], "ttlMs": 10, **CACHE_FIELDS}, "2026-07-28")
    for original in (page, dated):
        copied = copy.deepcopy(original)
        assert isinstance(copied, CachedToolsPage)
        assert copied == original
        assert copied.model_fields_set == original.model_fields_set
        assert [t.model_fields_set for t in copied.tools] == [t.model_fields_set for t in original.tools]
    copied = page.model_copy(deep=True)
    copied.tools[0].input_schema["properties"]["text"]["type"] = "integer"
    assert page.tools[0].input_schema["properties"]["text"]["type"] == "string"
    assert "ttl_ms" not in page.model_copy(deep=True).model_fields_set


def test_the_cache_stores_a_fetched_page_sharing_its_tools_and_still_serves_independent_copies() -> None:
    listed = {"tools": [tool.model_dump(by_alias=True) for tool in _tools(2)], "ttlMs": 10, **CACHE_FIELDS}
    page = parse_tools_page(listed, "2026-07-28")
    stored = SharedOnWrite.of(page).model_copy(deep=True)  # what ``ClientResponseCache.write`` keeps
    assert type(stored) is CachedToolsPage
    assert stored == page and stored.model_fields_set == page.model_fields_set
    assert stored.tools is not page.tools
    assert all(kept is fetched for kept, fetched in zip(stored.tools, page.tools, strict=True))
    served = stored.model_copy(deep=True)  # what ``ClientResponseCache.read`` hands out
    assert served == page
    served.tools[0].input_schema["properties"]["text"]["type"] = "integer"
    assert page.tools[0].input_schema["properties"]["text"]["type"] == "string"
