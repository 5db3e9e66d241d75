"""The CatalogCache: identity (I6), eviction races across client generations (I7), modes by reason (I4).

The race tests drive real SDK ``mcp.Client`` generations, sharing one store
handed out by the CatalogCache, against an in-process low-level ``Server``
whose ``tools/list`` blocks on an Event the test controls, so the ordering is
exact with no sleeps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import trio
from mcp import Client
from mcp.client.caching import CacheEntry, CacheKey
from mcp.server import Server, ServerRequestContext

from supervisor.catalog.cache import CatalogCache
from supervisor.catalog.registry import Registry
from supervisor.config.servers import ReconnectSettings, ServerSettings
from supervisor.server_actor import ServerActor
from tests.fakes import FakeServer, tool

BOUND_SEC = 10.0


def _settings(**reconnect: Any) -> ServerSettings:
    return ServerSettings(
        name="srv",
        command="x",
        startup_timeout_sec=5.0,
        reconnect=ReconnectSettings(initial_delay_ms=100, max_delay_ms=1000, jitter=0.0, **reconnect),
    )


class BlockingListServer:
    """An in-process handshake-era server whose ``tools/list`` can be held at a gate."""

    def __init__(self) -> None:
        self.lists = 0
        self.gate: trio.Event | None = None
        self.entered = trio.Event()
        self.tools = [tool("echo")]
        self.server: Server[Any] = Server("blocking", version="1.0", on_list_tools=self._list_tools)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self.lists += 1
        listing = list(self.tools)
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        return types.ListToolsResult(tools=listing)


@asynccontextmanager
async def client_generation(upstream: BlockingListServer, cache: CatalogCache) -> AsyncIterator[Client]:
    """One client generation of server ``srv``, sharing the server's one store (I4)."""
    async with Client(upstream.server, mode="legacy", cache=cache.config_for(_settings())) as client:
        yield client


async def test_I4_a_new_client_generation_reuses_the_entry_an_older_one_wrote() -> None:
    upstream = BlockingListServer()
    cache = CatalogCache(principal="local")
    with trio.fail_after(BOUND_SEC):
        async with client_generation(upstream, cache) as first:
            ticket = cache.begin_fetch("srv", "refresh")
            await first.list_tools(cache_mode="refresh")
            assert cache.finish_fetch(ticket, "blocking@1.0")
        async with client_generation(upstream, cache) as second:
            mode = cache.cache_mode_for("srv", "use", "blocking@1.0")
            assert mode == "use"
            ticket = cache.begin_fetch("srv", mode)
            listing = await second.list_tools(cache_mode=mode)
            assert cache.finish_fetch(ticket, "blocking@1.0")
    assert [t.name for t in listing.tools] == ["echo"]
    assert upstream.lists == 1, "the second generation must be served from the shared store"
    assert cache.describe("srv")["hits"] == 1


async def test_I7_an_eviction_during_an_older_generations_fetch_wins_and_is_not_undone() -> None:
    upstream = BlockingListServer()
    cache = CatalogCache(principal="local")
    with trio.fail_after(BOUND_SEC):
        async with client_generation(upstream, cache) as old:
            upstream.gate = trio.Event()
            outcome: list[bool] = []

            async def slow_fetch_of_the_old_generation() -> None:
                ticket = cache.begin_fetch("srv", "refresh")
                await old.list_tools(cache_mode="refresh")  # the SDK writes its (stale) entry here
                outcome.append(cache.finish_fetch(ticket, "blocking@1.0"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_fetch_of_the_old_generation)
                await upstream.entered.wait()
                # The server changes its list and says so while the old answer is in flight.
                upstream.tools = [tool("echo"), tool("fresh")]
                cache.evict("srv", "list_changed")
                upstream.gate.set()
            assert outcome == [False], "the raced fetch must report that its write was removed"

        upstream.gate = None
        async with client_generation(upstream, cache) as new:
            mode = cache.cache_mode_for("srv", "use", "blocking@1.0")
            listing = await new.list_tools(cache_mode=mode)
    assert [t.name for t in listing.tools] == ["echo", "fresh"], "the stale listing must never be served"
    assert upstream.lists == 2
    assert cache.describe("srv")["evictions"] == {"list_changed": 1, "race": 1}


async def test_I6_a_different_or_anonymous_identity_downgrades_reuse_to_refresh_and_evicts() -> None:
    upstream = BlockingListServer()
    cache = CatalogCache(principal="local")
    with trio.fail_after(BOUND_SEC):
        async with client_generation(upstream, cache) as client:
            ticket = cache.begin_fetch("srv", "refresh")
            await client.list_tools(cache_mode="refresh")
            cache.finish_fetch(ticket, "blocking@1.0")
    assert cache.describe("srv")["entries"] == 1
    assert cache.cache_mode_for("srv", "use", "blocking@2.0") == "refresh"
    assert cache.describe("srv")["entries"] == 0
    assert cache.cache_mode_for("srv", "use", None) == "refresh", "an anonymous server is always re-listed"
    assert cache.cache_mode_for("srv", "refresh", "blocking@1.0") == "refresh"


def test_I6_a_changed_command_is_a_new_target_and_so_a_new_key() -> None:
    cache = CatalogCache(principal="local")
    before = cache.config_for(_settings())
    after = cache.config_for(ServerSettings(name="srv", command="y"))
    assert before.target_id != after.target_id
    assert before.store is after.store, "one store per server, whatever its generation"
    assert before.partition == "local"


async def test_I4_first_connect_and_list_changed_refresh_while_a_reconnect_reuses(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")])
    cache = CatalogCache(principal="local")
    actor = ServerActor(_settings(), Registry(), connector=fake.connect, cache=cache)
    # The fake never writes to the store, so pretend an earlier generation left a warm entry
    # written by the same identity: the first connect must still refresh.
    cache.finish_fetch(cache.begin_fetch("srv", "refresh"), None)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await actor.wait_first_attempt()
            fake.notify_tools_changed()
            await trio.sleep(1)
            fake.drop()
            await trio.sleep(1)
            nursery.cancel_scope.cancel()
    # initial -> refresh; list_changed -> refresh; reconnect -> use demoted to refresh because the
    # fake's writes never reached the store (no writer identity on record).
    assert fake.fetch_modes == ["refresh", "refresh", "refresh"]
    assert cache.describe("srv")["evictions"] == {"list_changed": 1}


async def test_I4_a_reconnect_by_the_same_identity_syncs_with_use(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeServer([tool("echo")])
    cache = CatalogCache(principal="local")
    store = cache.config_for(_settings()).store
    assert store is not None
    actor = ServerActor(_settings(), Registry(), connector=fake.connect, cache=cache)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await actor.wait_first_attempt()
            # Record that this identity wrote the entry (the real SDK writes during the fetch).
            ticket = cache.begin_fetch("srv", "refresh")
            await store.set(
                CacheKey("tools/list", "", "arm"),
                CacheEntry(value=types.ListToolsResult(tools=[]), scope="private", expires_at=trio.current_time() + 60),
            )
            cache.finish_fetch(ticket, "fake@1.0")
            fake.drop()
            await trio.sleep(1)
            nursery.cancel_scope.cancel()
    assert fake.fetch_modes == ["refresh", "use"]
