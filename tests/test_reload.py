"""Configuration reload (SIGHUP): what restarts, what stays, and that it revives a failed server (I10).

Unit tests drive ``Supervisor.reload`` with in-process fakes on the virtual
clock; one end-to-end test sends a real SIGHUP to ``python -m supervisor run``.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing

from supervisor.catalog.registry import Kind
from supervisor.config.models import Settings
from supervisor.config.servers import ReconnectSettings, ServerSettings
from supervisor.errors import UpstreamUnavailable
from supervisor.root import Supervisor
from supervisor.seams import UpstreamSession
from tests.fakes import FakeServer, tool
from tests.sidecar import command_server, fixture_server, open_host, scaled, write_settings

BOUND_SEC = 60.0
"""Virtual seconds for the in-process tests; the end-to-end one scales it (``tests.sidecar.scaled``)."""


def _server(name: str, command: str = "x", **changes: Any) -> ServerSettings:
    return ServerSettings(
        name=name,
        command=command,
        startup_timeout_sec=5.0,
        reconnect=ReconnectSettings(max_attempts=2, initial_delay_ms=100, max_delay_ms=1000, jitter=0.0),
        **changes,
    )


def _settings(*servers: ServerSettings) -> Settings:
    return Settings(mcp_servers={server.name: server for server in servers})


class Fleet:
    """One FakeServer per server name, behind the Supervisor's connector seam."""

    def __init__(self, **fakes: FakeServer) -> None:
        self.fakes = fakes

    def connect(
        self, settings: ServerSettings, *, on_list_changed: Callable[[Kind], None]
    ) -> AbstractAsyncContextManager[UpstreamSession]:
        return self.fakes[settings.name].connect(settings, on_list_changed=on_list_changed)


@asynccontextmanager
async def running(supervisor: Supervisor) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        yield
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def teardown_held(fake: FakeServer) -> AsyncIterator[trio.Event]:
    """Hold ``fake``'s generation teardown until the yielded event is set; released on exit whatever happens.

    The teardown is shielded (as a real child's is), so a test that failed with it
    still held would hang instead of failing.
    """
    gate = fake.close_gate = trio.Event()
    try:
        yield gate
    finally:
        gate.set()


def _owners(supervisor: Supervisor) -> list[str]:
    return sorted(
        {tool.public_name for tool in supervisor.registry.owned_by("a")}
        | {tool.public_name for tool in supervisor.registry.owned_by("b")}
    )


async def test_I10_a_reload_revives_a_server_that_gave_up(autojump_clock: trio.testing.MockClock) -> None:
    a = FakeServer([tool("echo")], name="a")
    a.connect_default = "fail"
    supervisor = Supervisor(_settings(_server("a")), connector=Fleet(a=a).connect)
    with trio.fail_after(BOUND_SEC):
        async with running(supervisor):
            await supervisor.wait_first_attempts()
            await trio.sleep(5)
            assert supervisor.statuses()[0].state == "failed"
            a.connect_default = "ok"  # the operator fixed it
            changes = await supervisor.reload(_settings(_server("a")))
            assert changes == ["a: restarted (it had failed)"]
            await supervisor.wait_first_attempts()
            assert supervisor.statuses()[0].state == "ready"
            assert [t.public_name for t in supervisor.registry.owned_by("a")] == ["a__echo"]


async def test_a_reload_restarts_only_changed_servers_and_keeps_their_tools_listed_meanwhile(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a, b = FakeServer([tool("echo")], name="a"), FakeServer([tool("add")], name="b")
    supervisor = Supervisor(_settings(_server("a"), _server("b")), connector=Fleet(a=a, b=b).connect)
    with trio.fail_after(BOUND_SEC):
        async with running(supervisor):
            await supervisor.wait_first_attempts()
            seen: list[list[str]] = []
            supervisor.registry._on_change = lambda: seen.append([t.name for t in supervisor.registry.tools()])
            b.tools = [tool("add"), tool("sub")]
            changes = await supervisor.reload(_settings(_server("a"), _server("b", args=["--new"])))
            assert changes == ["b: restarted (settings changed)"]
            await supervisor.wait_first_attempts()
            assert len(a.connect_times) == 1, "an unchanged server is left alone"
            assert len(b.connect_times) == 2
            # The host never saw b's tools disappear: old set, then new set.
            assert seen == [["a__echo", "b__add", "b__sub"]]


async def test_a_reload_withdraws_removed_and_disabled_servers_and_starts_new_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fakes = {name: FakeServer([tool("echo")], name=name) for name in ("a", "b", "c")}
    fleet = Fleet(**fakes)
    supervisor = Supervisor(_settings(_server("a"), _server("b")), connector=fleet.connect)
    with trio.fail_after(BOUND_SEC):
        async with running(supervisor):
            await supervisor.wait_first_attempts()
            changes = await supervisor.reload(_settings(_server("b", enabled=False), _server("c")))
            assert changes == [
                "a: removed; its tools are withdrawn",
                "b: disabled; its tools are withdrawn",
                "c: started",
            ]
            await supervisor.wait_first_attempts()
            assert [t.name for t in supervisor.registry.tools()] == ["c__echo"]
            assert [s.state for s in supervisor.statuses()] == ["disabled", "ready"]
            assert fakes["a"].session is None and fakes["b"].session is None, "stopped servers are disconnected"


@pytest.mark.e2e
async def test_sighup_reloads_the_settings_file_and_the_host_sees_the_revived_server(tmp_path: Path) -> None:
    broken = command_server(["/bin/sh", "-c", "exit 1"], reconnect={"max_attempts": 2})
    config = write_settings(tmp_path, {"a": broken, "b": fixture_server("--tools", "echo")})
    with trio.fail_after(scaled(BOUND_SEC)):
        async with open_host(config) as host:
            await host.wait_tools(lambda names: "mcp__b__echo" in names)
            write_settings(tmp_path, {"a": fixture_server("--tools", "add"), "b": fixture_server("--tools", "echo")})
            assert host.process is not None
            host.process.send_signal(signal.SIGHUP)
            names = await host.wait_tools(lambda names: "mcp__a__add" in names)
            assert sorted(names) == ["mcp__a__add", "mcp__b__echo"]
        assert host.exit_code == 0


# -- the window while an actor stops ----------------------------------------------------------


async def test_status_and_metrics_keep_answering_while_a_removed_server_is_stopping(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a, b = FakeServer([tool("echo")], name="a"), FakeServer([tool("add")], name="b")
    supervisor = Supervisor(_settings(_server("a"), _server("b")), connector=Fleet(a=a, b=b).connect)
    with trio.fail_after(BOUND_SEC):
        async with running(supervisor), teardown_held(a) as gate, trio.open_nursery() as nursery:
            await supervisor.wait_first_attempts()
            nursery.start_soon(supervisor.reload, _settings(_server("b")))
            await trio.testing.wait_all_tasks_blocked()
            assert a.closing, "a's teardown is blocked on the gate"
            assert [(s.name, s.state) for s in supervisor.statuses()] == [("a", "stopping"), ("b", "ready")]
            assert b'mcp_supervisor_servers{state="stopping"} 1.0' in supervisor.metrics.render()
            gate.set()
            await trio.testing.wait_all_tasks_blocked()
            assert [(s.name, s.state) for s in supervisor.statuses()] == [("b", "ready")]
            assert [t.name for t in supervisor.registry.tools()] == ["b__add"]


async def test_a_call_to_a_restarting_server_fails_fast_saying_so_instead_of_unknown_tool(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a = FakeServer([tool("echo")], name="a")
    supervisor = Supervisor(_settings(_server("a")), connector=Fleet(a=a).connect)
    with trio.fail_after(BOUND_SEC):
        async with running(supervisor), teardown_held(a) as gate, trio.open_nursery() as nursery:
            await supervisor.wait_first_attempts()
            nursery.start_soon(supervisor.reload, _settings(_server("a", args=["--new"])))
            await trio.testing.wait_all_tasks_blocked()
            assert a.closing
            routed = supervisor.route("a__echo")
            assert routed is not None, "a still-listed tool is never an unknown tool"
            tool_, actor = routed
            with pytest.raises(UpstreamUnavailable, match=r"server 'a' is restarting") as caught:
                await actor.call_tool(tool_.raw_name, {})
            assert caught.value.server == "a"
            assert a.calls == [], "nothing reached the server being torn down"
            gate.set()
            await trio.testing.wait_all_tasks_blocked()  # the reload finishes and starts the new actor
            await supervisor.wait_first_attempts()
            routed = supervisor.route("a__echo")
            assert routed is not None
            served = await routed[1].call_tool("echo", {})
            assert isinstance(served, types.CallToolResult) and served.content, "the new actor serves it"
            assert a.calls == [("echo", {})]


async def test_removed_and_restarted_servers_stop_concurrently(autojump_clock: trio.testing.MockClock) -> None:
    fakes = {name: FakeServer([tool("echo")], name=name) for name in ("a", "b", "c")}
    supervisor = Supervisor(_settings(*map(_server, fakes)), connector=Fleet(**fakes).connect)
    with trio.fail_after(BOUND_SEC):
        async with running(supervisor):
            await supervisor.wait_first_attempts()
            for fake in fakes.values():
                fake.close_delay_sec = 5.0  # each child takes its whole grace period to go
            started = trio.current_time()
            changes = await supervisor.reload(_settings(_server("b", args=["--new"]), _server("c", enabled=False)))
            assert trio.current_time() - started == 5.0, "one grace period, not one per server"
            assert changes == [
                "a: removed; its tools are withdrawn",
                "b: restarted (settings changed)",
                "c: disabled; its tools are withdrawn",
            ]
            await supervisor.wait_first_attempts()
            assert [(s.name, s.state) for s in supervisor.statuses()] == [("b", "ready"), ("c", "disabled")]
