"""Prompts (and every other kind) are synced like tools (DESIGN I13 with I1-I3), on the virtual clock.

A prompt notice re-syncs prompts only, through the mailbox, debounced; a failed
prompt fetch keeps the previous prompts, and never the tools from being served; a prompt listing that collides with a
squatter keeps the previous generation of prompts while the tools swap; a
withdrawal removes every kind; ``namespace = false`` exposes raw names.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import mcp_types as types
import trio
import trio.testing

from supervisor.catalog.naming import public_tool_name
from supervisor.catalog.registry import Registry
from supervisor.config.servers import ReconnectSettings, ServerSettings
from supervisor.errors import UpstreamProtocolError
from supervisor.server_actor import LIST_CHANGED_DEBOUNCE_SEC, ServerActor
from tests.fakes import FakeServer, prompt, tool

BOUND_SEC = 120.0


def _actor(fake: FakeServer, registry: Registry, *, namespace: bool = True) -> ServerActor:
    settings = ServerSettings(
        name="srv",
        command="x",
        namespace=namespace,
        startup_timeout_sec=5.0,
        tool_timeout_sec=5.0,
        reconnect=ReconnectSettings(max_attempts=3, initial_delay_ms=500, max_delay_ms=4000, jitter=0.0),
    )
    return ServerActor(settings, registry, connector=fake.connect, rng=random.Random(0))


class _Changes:
    """The Registry's change callback, as something a test can wait on (no sleeping past a debounce)."""

    def __init__(self) -> None:
        self._changed = trio.Event()

    def notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()


def _prompts(registry: Registry) -> list[tuple[str, str | None]]:
    return [(p.name, p.description) for p in registry.prompts()]


async def test_I1_a_prompt_notice_resyncs_only_prompts_one_debounce_window_later(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")])
    fake.prompts = [prompt("greet", "v1")]
    registry = Registry()
    actor = _actor(fake, registry)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await actor.wait_first_attempt()
            assert _prompts(registry) == [("mcp__srv__greet", "v1")]
            assert fake.fetch_times == [0.0]  # tools were fetched once, at start

            await trio.sleep(1.0)
            fake.prompts = [prompt("greet", "v2"), prompt("later")]
            for _ in range(50):  # a burst of notices costs one re-sync (I1)
                fake.notify_prompts_changed()
            await trio.sleep(LIST_CHANGED_DEBOUNCE_SEC * 2)

            assert _prompts(registry) == [("mcp__srv__greet", "v2"), ("mcp__srv__later", None)]
            assert fake.fetch_times == [0.0], "a prompt notice does not re-list tools"
            assert actor.fetches == 2
            assert actor.status.prompt_count == 2
            nursery.cancel_scope.cancel()


async def test_I2_a_failed_prompt_fetch_keeps_the_previous_prompts(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeServer([tool("echo")])
    fake.prompts = [prompt("greet", "v1")]
    registry = Registry()
    actor = _actor(fake, registry)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await actor.wait_first_attempt()
            fake.prompts = [prompt("greet", "v2")]
            fake.prompt_fetch_error = UpstreamProtocolError("srv", "server 'srv': prompts/list failed: boom")
            fake.notify_prompts_changed()
            await trio.sleep(1.0)
            assert _prompts(registry) == [("mcp__srv__greet", "v1")]
            assert "prompts/list failed" in (actor.status.last_error or "")
            assert actor.status.state == "ready"
            nursery.cancel_scope.cancel()


async def test_I2_per_kind_a_bad_prompt_listing_on_the_first_sync_leaves_the_tools_served_and_names_the_kind(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # An optional kind the host may never use must not take the server's tools down (issue 30, item 4).
    fake = FakeServer([tool("echo")])
    fake.prompts = [prompt("greet", "v1")]
    fake.prompt_fetch_error = UpstreamProtocolError("srv", "server 'srv': prompts/list returned an invalid result")
    changes = _Changes()
    registry = Registry(on_change=changes.notify)
    actor = _actor(fake, registry)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await actor.wait_first_attempt()
            assert actor.status.state == "ready"
            assert [t.name for t in registry.tools()] == ["mcp__srv__echo"]
            assert _prompts(registry) == []
            assert actor.status.failed_kinds == {"prompts": "server 'srv': prompts/list returned an invalid result"}
            assert "prompts not listed (previous kept)" in actor.status.describe()

            fake.prompt_fetch_error = None  # the server mends its listing and says so
            fake.notify_prompts_changed()
            await changes.wait_for(lambda: _prompts(registry) == [("mcp__srv__greet", "v1")])
            assert actor.status.failed_kinds == {}
            nursery.cancel_scope.cancel()


async def test_I3_a_prompt_conflict_keeps_the_previous_prompts_while_the_tools_swap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")])
    fake.prompts = [prompt("greet", "v1")]
    registry = Registry()
    actor = _actor(fake, registry)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await actor.wait_first_attempt()
            squatted = public_tool_name("srv", "taken")
            # A reserved owner holds a prompt name the server's next generation wants.
            registry.swap_many("squatter", {"prompts": [types.Prompt(name=squatted)]}, namespace=False)
            fake.tools = [tool("echo"), tool("fresh")]
            fake.prompts = [prompt("greet", "v2"), prompt("taken")]
            fake.notify_tools_changed()
            fake.notify_prompts_changed()
            await trio.sleep(1.0)
            assert [t.name for t in registry.tools()] == ["mcp__srv__echo", "mcp__srv__fresh"]
            assert _prompts(registry) == [("mcp__srv__greet", "v1"), (squatted, None)]
            held = registry.lookup_prompt(squatted)
            assert held is not None and held.owner == "squatter"
            assert actor.status.conflicts == [f"{squatted} (owned by squatter)"]
            nursery.cancel_scope.cancel()


async def test_giving_up_withdraws_prompts_too_and_namespace_false_uses_raw_names(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")])
    fake.prompts = [prompt("greet")]
    registry = Registry()
    actor = _actor(fake, registry, namespace=False)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await actor.wait_first_attempt()
            assert [t.name for t in registry.tools()] == ["echo"]
            assert _prompts(registry) == [("greet", None)]
            fake.connect_default = "fail"
            fake.drop()
            await trio.sleep(60)
            assert actor.status.state == "failed"
            assert (registry.tools(), registry.prompts()) == ([], [])
            nursery.cancel_scope.cancel()
