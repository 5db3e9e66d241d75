"""I22 Notices mean change: a host is told ``list_changed`` only when what it would list differs from what it holds.

In process, on trio's virtual clock: a Registry, a view of it, and the Front's
notifier (``host.change_notices.ChangeNotices``) announcing to a handshake-era
connection and the 2026-era bus, both fakes that count. ``ReceivedListings`` is
fed as the Front's list answers feed it. The cases are the ones a real host met
(issue 57, item 2): a list that waited for the servers of a cold start and got
them all, a search view whose unlisted tools moved, a host told once that has not
listed since, and a host that never listed.
"""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing

from supervisor.catalog.registry import Registry
from supervisor.catalog.views import CatalogView, ViewRules, everything
from supervisor.catalog.wire_form import ToolsListWireCache
from supervisor.config.views import ViewSettings
from supervisor.host.change_notices import ChangeNotices, ReceivedListings
from supervisor.root import ChangeSignal
from tests.fakes import tool

BOUND_SEC = 10.0


class _Counted:
    """A handshake-era connection and the 2026-era bus in one: counts what each kind of notice reached."""

    def __init__(self) -> None:
        self.tools = 0
        self.prompts = 0
        self.published = 0

    def of_view(self, view: CatalogView) -> list[_Counted]:
        return [self]

    async def send_tool_list_changed(self) -> None:
        self.tools += 1

    async def send_prompt_list_changed(self) -> None:
        self.prompts += 1

    async def send_resource_list_changed(self) -> None:
        raise AssertionError("no resource changes here")

    async def publish(self, event: object) -> None:
        self.published += 1


class _Scene:
    def __init__(self, rules: ViewRules | None = None) -> None:
        self.changed = ChangeSignal()
        self.registry = Registry(on_change=self.changed.notify)
        self.view = everything(self.registry) if rules is None else CatalogView(self.registry, rules)
        self.received = ReceivedListings(self.view)
        self.hosts = _Counted()
        cache = ToolsListWireCache(self.view, settled=lambda: True, stamp=dict)
        self.notices = ChangeNotices(
            self.view,
            self.changed,
            cast(Any, self.hosts),
            cast(Any, self.hosts),
            tools_list_cache=cache,
            received=self.received,
        )

    def list_tools(self) -> list[str]:
        """A host's tools/list, answered and recorded as the Front does."""
        self.received.answered("tools")
        return [entry.key for entry in self.view.listed("tools")]

    async def settle(self) -> None:
        await trio.sleep(1)  # past the notifier's coalescing window (virtual time)
        await trio.testing.wait_all_tasks_blocked()


async def test_I22_a_list_that_waited_for_a_cold_start_is_told_nothing_when_the_servers_it_waited_for_swap_in(
    autojump_clock: trio.testing.MockClock,
) -> None:
    scene = _Scene()
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(scene.notices.serve)
            await trio.testing.wait_all_tasks_blocked()
            # The host's first list waits for the first attempts; the servers swap in meanwhile...
            scene.registry.swap("a", [tool("echo")])
            scene.registry.swap("b", [tool("add"), tool("now")])
            # ...and the answer, made after them, holds them all.
            assert scene.list_tools() == ["mcp__a__echo", "mcp__b__add", "mcp__b__now"]
            await scene.settle()
            assert (scene.hosts.tools, scene.hosts.published) == (0, 0)
            # A reconnect that lists the same catalog again moves nothing either.
            scene.registry.swap("a", [tool("echo")])
            await scene.settle()
            assert (scene.hosts.tools, scene.hosts.published) == (0, 0)
            # A real change is told, once per kind, on both eras' channels.
            scene.registry.swap("a", [tool("echo"), tool("ping")])
            await scene.settle()
            assert (scene.hosts.tools, scene.hosts.published) == (1, 1)
            nursery.cancel_scope.cancel()


async def test_I22_after_a_notice_only_a_listing_other_than_the_one_told_of_is_told_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    scene = _Scene()
    scene.registry.swap("a", [tool("echo")])
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(scene.notices.serve)
            await trio.testing.wait_all_tasks_blocked()
            scene.list_tools()
            scene.registry.swap("a", [tool("echo"), tool("one")])
            await scene.settle()
            assert scene.hosts.tools == 1
            # A re-judged pin (or a reconnect) swaps the same catalog in again: nothing new to tell.
            scene.registry.withdraw("a")
            scene.registry.swap("a", [tool("echo"), tool("one")])
            await scene.settle()
            assert scene.hosts.tools == 1
            # Another change, though the host has not listed since: told again (it differs from what it was told).
            scene.registry.swap("a", [tool("echo"), tool("one"), tool("two")])
            await scene.settle()
            assert scene.hosts.tools == 2
            nursery.cancel_scope.cancel()


async def test_I22_a_change_back_to_what_the_host_holds_tells_it_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    scene = _Scene()
    scene.registry.swap("a", [tool("echo")])
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(scene.notices.serve)
            await trio.testing.wait_all_tasks_blocked()
            scene.list_tools()
            # Within one coalescing window: a tool comes and goes again.
            scene.registry.swap("a", [tool("echo"), tool("blip")])
            scene.registry.swap("a", [tool("echo")])
            await scene.settle()
            assert scene.hosts.tools == 0
            nursery.cancel_scope.cancel()


async def test_I22_a_host_that_never_listed_is_told_nothing(autojump_clock: trio.testing.MockClock) -> None:
    scene = _Scene()
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(scene.notices.serve)
            await trio.testing.wait_all_tasks_blocked()
            scene.registry.swap("a", [tool("echo")])
            await scene.settle()
            assert (scene.hosts.tools, scene.hosts.published) == (0, 0)
            nursery.cancel_scope.cancel()


async def test_I22_a_search_views_hosts_are_told_nothing_when_only_its_unlisted_tools_move(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rules = ViewRules.of("find", ViewSettings(catalog="search", always_visible=["mcp__a__echo"]), {})
    scene = _Scene(rules)
    scene.registry.swap("a", [tool("echo"), tool("read")])
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(scene.notices.serve)
            await trio.testing.wait_all_tasks_blocked()
            assert scene.list_tools() == ["call_tool", "mcp__a__echo", "search_tools"]
            scene.registry.swap("a", [tool("echo"), tool("read"), tool("write")])
            await scene.settle()
            assert scene.hosts.tools == 0, "search_tools finds the new tool; the listing is the same"
            scene.registry.swap("a", [tool("echo", "Echo, now described otherwise."), tool("read")])
            await scene.settle()
            assert scene.hosts.tools == 1, "an always-visible tool changed: that is in the listing"
            nursery.cancel_scope.cancel()
