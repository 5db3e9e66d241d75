"""End to end: upstream failures as a host sees them (DESIGN I10, I11, I12).

Upstreams are real fixture server processes (stdio, or streamable HTTP started by
the test); the host is a real ``mcp.Client`` driving ``python -m supervisor run``.
Every test is bounded by ``trio.fail_after``; ``conftest.py`` fails any test that
leaves a process behind. Where a test must observe another process (a new pid in
a fixture's log, a grandchild's death), it polls with a bound: there is no event
to wait on across process boundaries.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import MCPError
from mcp.client.client import ConnectMode

from supervisor.upstream.http_calls import ID_PREFIX as HTTP_CALL_ID_PREFIX
from tests.fixtures.fixture_server import BUILTIN_TOOLS
from tests.sidecar import (
    HOST_MODES,
    REPO_ROOT,
    Host,
    called_tools,
    command_server,
    fixture_server,
    open_host,
    open_http_fixture,
    pid_alive,
    read_log,
    run_cli,
    scaled,
    scaled_ms,
    sidecar_env,
    started_pids,
    text_of,
    wait_until,
    write_settings,
)

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(60)
PROMPT_SEC = scaled(5.0)
"""How soon a call in flight on a dying server must come back with an error."""
EXIT_IMMEDIATELY = [sys.executable, "-c", "import sys; sys.exit(1)"]


async def _error_text(host: Host, name: str, arguments: dict[str, Any] | None = None) -> str:
    """Call a tool that must fail; return the error text, whichever way the sidecar reported it."""
    try:
        result = await host.call(name, arguments)
    except MCPError as exc:
        return exc.error.message
    assert result.is_error, f"{name} unexpectedly succeeded: {result}"
    return text_of(result)


def _owned(names: list[str], server: str) -> list[str]:
    return sorted(n for n in names if n.startswith(f"mcp__{server}__"))


# -- I10 reconnect -------------------------------------------------------------------------


async def test_a_crashed_server_fails_calls_fast_then_comes_back_with_the_same_catalog(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    config = write_settings(
        tmp_path,
        {
            # A slow first restart, so the host can observe the reconnecting state.
            "a": fixture_server(
                "--log", str(log), reconnect={"initial_delay_ms": scaled_ms(1000), "max_delay_ms": scaled_ms(2000)}
            ),
            "b": fixture_server("--tools", "echo"),
        },
    )
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            before = await host.wait_tools(
                lambda names: len(_owned(names, "a")) == len(BUILTIN_TOOLS) and "mcp__b__echo" in names
            )
            first_pid = started_pids(log)[0]
            in_flight: list[str] = []

            async def slow_call() -> None:
                in_flight.append(await _error_text(host, "mcp__a__slow", {"seconds": 60}))

            crashed_at = trio.current_time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_call)
                await wait_until(lambda: "slow" in called_tools(log), what="the slow call to reach the server")
                crashed_at = trio.current_time()
                crash_error = await _error_text(host, "mcp__a__crash")
            # Leaving the nursery waited for the slow call: it came back, with an error, promptly.
            assert trio.current_time() - crashed_at < PROMPT_SEC
            assert in_flight and "'a'" in in_flight[0], in_flight
            assert "'a'" in crash_error, crash_error

            # While the server backs off, its calls fail fast and say so.
            async def reconnecting_error() -> str:
                while True:
                    text = await _error_text(host, "mcp__a__echo", {"text": "x"})
                    if "reconnecting" in text:
                        return text
                    await trio.sleep(0.02)

            with trio.fail_after(scaled(1.0)):
                text = await reconnecting_error()
            assert "reconnecting" in text and "'a'" in text
            # The other server never noticed.
            assert text_of(await host.call("mcp__b__echo", {"text": "fine"})) == "fine"

            await wait_until(lambda: len(started_pids(log)) == 2, what="a new generation of server a")
            assert started_pids(log)[1] != first_pid

            with trio.fail_after(scaled(30)):
                assert text_of(await host.wait_call_succeeds("mcp__a__echo", {"text": "back"})) == "back"
            after = await host.tool_names()
            assert sorted(after) == sorted(before)
            assert len(after) == len(set(after))


async def test_a_crash_looping_server_gives_up_after_max_attempts_and_never_lists_tools(tmp_path: Path) -> None:
    config = write_settings(
        tmp_path,
        {
            "ok": fixture_server("--tools", "echo"),
            "dead": command_server(EXIT_IMMEDIATELY, reconnect={"max_attempts": 3, "initial_delay_ms": 50}),
        },
    )
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            await host.log.wait_line(r"server=dead gave up after 3 consecutive failures")
            names = await host.wait_tools(lambda names: "mcp__ok__echo" in names)
            assert _owned(names, "dead") == []
            assert text_of(await host.call("mcp__ok__echo", {"text": "fine"})) == "fine"
            with pytest.raises(MCPError) as unknown:
                await host.call("mcp__dead__echo", {"text": "x"})
            assert unknown.value.code == types.INVALID_PARAMS
        assert host.exit_code == 0

        listing = await run_cli("tools", "--config", str(config), "--json")
    assert listing.code == 0, listing.stderr
    catalog = json.loads(listing.stdout)
    assert [tool["name"] for tool in catalog["tools"]] == ["mcp__ok__echo"]
    servers = {server["name"]: server for server in catalog["servers"]}
    assert servers["ok"]["state"] == "ready"
    # The one-shot reports once every server's first attempt has ended: by then the dead one may
    # or may not have used its three (the healthy one, started early, is often ready first).
    assert servers["dead"]["state"] in ("failed", "reconnecting"), servers["dead"]
    assert servers["dead"]["tools"] == 0
    assert "dead" in servers["dead"]["last_error"]
    assert "exited with code 1" in servers["dead"]["last_error"] or "handshake" in servers["dead"]["last_error"]


async def test_giving_up_withdraws_tools_the_host_had_listed_and_tells_the_host(tmp_path: Path) -> None:
    marker_dir = tmp_path / "once"
    marker_dir.mkdir()
    # Runs the fixture on the first start only; every restart exits at once.
    script = (
        f'if [ -e "{marker_dir}/started" ]; then exit 1; fi; touch "{marker_dir}/started"; '
        f'exec "{sys.executable}" -m tests.fixtures.fixture_server --tools echo,crash'
    )
    config = write_settings(
        tmp_path,
        {
            "once": command_server(["/bin/sh", "-c", script], reconnect={"max_attempts": 3, "initial_delay_ms": 50}),
            "ok": fixture_server("--tools", "echo"),
        },
    )
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            names = await host.wait_tools(lambda names: {"mcp__once__echo", "mcp__ok__echo"} <= set(names))
            assert _owned(names, "once") == ["mcp__once__crash", "mcp__once__echo"]
            before = host.notices
            assert "'once'" in await _error_text(host, "mcp__once__crash")
            names = await host.wait_tools(lambda names: _owned(names, "once") == [])
            assert names == ["mcp__ok__echo"]
            assert host.notices > before, "the host was not told that the tools were withdrawn"
            with pytest.raises(MCPError) as gone:
                await host.call("mcp__once__echo", {"text": "x"})
            assert gone.value.code == types.INVALID_PARAMS
            assert text_of(await host.call("mcp__ok__echo", {"text": "fine"})) == "fine"


# -- I11 no orphans --------------------------------------------------------------------------


async def test_I11_a_crash_kills_the_pipe_holding_grandchild_and_the_server_reconnects(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    config = write_settings(
        tmp_path, {"a": fixture_server("--tools", "echo,spawn_grandchild,crash", "--log", str(log))}
    )
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            await host.wait_tools(lambda names: "mcp__a__crash" in names)
            grandchild = int(text_of(await host.call("mcp__a__spawn_grandchild")))
            assert pid_alive(grandchild)
            crashed_at = trio.current_time()
            # Death is noticed although the grandchild keeps the server's stdout pipe open.
            assert "'a'" in await _error_text(host, "mcp__a__crash")
            assert trio.current_time() - crashed_at < PROMPT_SEC
            await wait_until(lambda: not pid_alive(grandchild), what=f"grandchild {grandchild} to be killed")
            await wait_until(lambda: len(started_pids(log)) == 2, what="a new generation of server a")
            await host.wait_tools(lambda names: "mcp__a__echo" in names)

            with trio.fail_after(scaled(30)):
                assert text_of(await host.wait_call_succeeds("mcp__a__echo", {"text": "back"})) == "back"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_I11_a_signal_stops_the_stdio_front_at_once_cancelling_the_call_in_flight_leaving_no_process(
    tmp_path: Path, signum: signal.Signals
) -> None:
    # A stdio host that signals its server is going away (Claude Code: SIGINT, then SIGTERM 100 ms
    # later, SIGKILL 400 ms after that): no drain, whatever shutdown_grace_sec says (issue 57, item 5).
    log = tmp_path / "a.jsonl"
    config = write_settings(
        tmp_path,
        {"a": fixture_server("--tools", "echo,slow,spawn_grandchild", "--log", str(log))},
        supervisor={"shutdown_grace_sec": 60},
    )
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            await host.wait_tools(lambda names: "mcp__a__slow" in names)
            grandchild = int(text_of(await host.call("mcp__a__spawn_grandchild")))
            outcome: list[types.CallToolResult | MCPError] = []

            async def slow_call() -> None:
                try:
                    outcome.append(await host.call("mcp__a__slow", {"seconds": 60}))
                except MCPError as exc:
                    outcome.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_call)
                await wait_until(lambda: "slow" in called_tools(log), what="the slow call to reach the server")
                os.kill(host.pid, signum)
                assert host.process is not None
                with trio.fail_after(scaled(8)):  # a drain would take the 60 s grace
                    code = await host.process.wait()
            assert code == 0
            assert len(outcome) == 1
            assert isinstance(outcome[0], MCPError), outcome[0]  # the connection closed: no answer was owed
            assert not pid_alive(grandchild)
        assert host.exit_code == 0


async def test_I11_closing_stdin_lets_the_call_in_flight_finish_then_exits_0_leaving_no_process(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    config = write_settings(tmp_path, {"a": fixture_server("--tools", "echo,slow,spawn_grandchild", "--log", str(log))})
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            await host.wait_tools(lambda names: "mcp__a__slow" in names)
            grandchild = int(text_of(await host.call("mcp__a__spawn_grandchild")))
            outcome: list[types.CallToolResult | MCPError] = []

            async def slow_call() -> None:
                try:
                    outcome.append(await host.call("mcp__a__slow", {"seconds": 1}))
                except MCPError as exc:
                    outcome.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_call)
                await wait_until(lambda: "slow" in called_tools(log), what="the slow call to reach the server")
                await host.close_stdin()
                assert host.process is not None
                with trio.fail_after(scaled(8)):
                    code = await host.process.wait()
            assert code == 0
            # shutdown_grace_sec is 2: the 1 s call had time to finish and its answer reached the host.
            assert len(outcome) == 1
            result = outcome[0]
            assert isinstance(result, types.CallToolResult), result
            assert text_of(result) == "done"
            assert not pid_alive(grandchild)
        assert host.exit_code == 0


async def test_I11_host_hanging_up_stops_the_sidecar_quickly_with_exit_0(tmp_path: Path) -> None:
    config = write_settings(
        tmp_path,
        {
            "a": fixture_server("--tools", "echo,spawn_grandchild"),
            "b": fixture_server("--tools", "echo,hang", "--legacy-only"),
        },
    )
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            await host.wait_tools(lambda names: {"mcp__a__echo", "mcp__b__hang"} <= set(names))
            grandchild = int(text_of(await host.call("mcp__a__spawn_grandchild")))
        assert host.exit_code == 0
        assert host.exit_after_stdin_closed_sec is not None
        assert host.exit_after_stdin_closed_sec < scaled(10)
        assert not pid_alive(grandchild)


# -- I12 isolation ---------------------------------------------------------------------------


def _misbehaving_servers(*, hang_startup_sec: float) -> dict[str, dict[str, Any]]:
    broken = {"max_attempts": 2, "initial_delay_ms": 500}
    return {
        "healthy": fixture_server("--tools", "echo,add"),
        "hanging": fixture_server("--tools", "echo", "--hang-list", startup_timeout_sec=hang_startup_sec),
        "flood": fixture_server("--tools", "echo", "--stderr-flood", "20000"),
        "noisy": fixture_server("--tools", "echo", "--garbage-on-start", "50"),
        "invalid": fixture_server("--tools", "echo", "--invalid-schema", reconnect=broken),
        "dup": fixture_server("--tools", "echo", "--duplicate-tool", reconnect=broken),
    }


async def test_I12_misbehaving_servers_never_block_or_break_the_healthy_one_or_the_host(tmp_path: Path) -> None:
    # The hanging server may take 20 s to fail its first attempt; the host must not wait for it.
    config = write_settings(tmp_path, _misbehaving_servers(hang_startup_sec=scaled(20)))
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            started = trio.current_time()
            names = await host.wait_tools(
                lambda names: {"mcp__healthy__echo", "mcp__flood__echo", "mcp__noisy__echo"} <= set(names),
                bound_sec=scaled(8),
            )
            assert text_of(await host.call("mcp__healthy__echo", {"text": "quick"})) == "quick"
            assert trio.current_time() - started < scaled(8)
            # Noise on stderr or stdout is survivable: those servers work.
            assert {"mcp__healthy__add", "mcp__flood__echo", "mcp__noisy__echo"} <= set(names)
            # A listing that hangs, fails validation or repeats a name registers nothing.
            for broken in ("hanging", "invalid", "dup"):
                assert _owned(names, broken) == [], names
            for _ in range(3):
                assert text_of(await host.call("mcp__healthy__add", {"a": 1, "b": 2})) == "3"
                assert text_of(await host.call("mcp__flood__echo", {"text": "f"})) == "f"
                assert text_of(await host.call("mcp__noisy__echo", {"text": "n"})) == "n"
            assert host.bad_frames == []
        assert host.exit_code == 0


# -- HTTP upstream ---------------------------------------------------------------------------


async def test_an_http_server_that_restarts_on_its_port_is_reconnected(tmp_path: Path) -> None:
    log = tmp_path / "web.jsonl"
    async with open_http_fixture("--name", "web", "--tools", "echo,add", log=log) as first:
        config = write_settings(
            tmp_path,
            {
                "web": {
                    "url": first.url,
                    "reconnect": {"max_attempts": 20, "initial_delay_ms": 100, "max_delay_ms": 500},
                }
            },
        )
        with trio.fail_after(BOUND_SEC):
            async with open_host(config) as host:
                names = await host.wait_tools(lambda names: "mcp__web__echo" in names)
                assert _owned(names, "web") == ["mcp__web__add", "mcp__web__echo"]
                assert text_of(await host.call("mcp__web__add", {"a": 20, "b": 22})) == "42"
                # A 2026-era HTTP server gets a plain call as the fast path's own POST (upstream.http_calls).
                assert _tools_call_ids(log) and all(i.startswith(HTTP_CALL_ID_PREFIX) for i in _tools_call_ids(log))

                await first.kill()
                # The sidecar notices the outage (its listen stream, or the next call, fails).
                assert "'web'" in await _error_text(host, "mcp__web__echo", {"text": "x"})
                first.process = None
                await first.start()  # same port
                await wait_until(lambda: len(started_pids(log)) == 2, what="the HTTP server to restart")

                with trio.fail_after(scaled(30)):
                    assert text_of(await host.wait_call_succeeds("mcp__web__echo", {"text": "again"})) == "again"
                names = await host.tool_names()
                assert _owned(names, "web") == ["mcp__web__add", "mcp__web__echo"]
            assert host.exit_code == 0


def _tools_call_ids(log: Path) -> list[str]:
    return [str(e["id"]) for e in read_log(log) if e["event"] == "request" and e["method"] == "tools/call"]


@pytest.mark.parametrize("mode", HOST_MODES)
async def test_an_http_servers_unparsable_answer_is_its_protocol_error_never_a_parse_error_of_the_hosts_request(
    tmp_path: Path, mode: ConnectMode
) -> None:
    # Issue 30: the conformance suite's everything server answers one tool with two JSON lines in one
    # application/json body; the SDK's transport reports -32700, which must not reach the host as if the
    # host's request were not JSON.
    async with open_http_fixture("--name", "web", "--tools", "echo,ndjson") as web:
        config = write_settings(tmp_path, {"web": {"url": web.url}})
        with trio.fail_after(BOUND_SEC):
            async with open_host(config, mode) as host:
                await host.wait_tools(lambda names: "mcp__web__ndjson" in names)
                try:
                    result = await host.call("mcp__web__ndjson")
                except MCPError as exc:
                    raise AssertionError(f"the host got a JSON-RPC error: {exc.error}") from exc
                assert result.is_error
                assert "server 'web': tools/call ndjson: the answer could not be parsed" in text_of(result)
                # The server stays up: its other tools answer.
                assert text_of(await host.call("mcp__web__echo", {"text": "still"})) == "still"


async def test_I11_a_crash_of_the_sidecars_own_code_still_terminates_every_child(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    # After the fixture exits (stdin EOF), its shell lives on as `sleep`: only a group kill ends it.
    stubborn = f'"{sys.executable}" -m tests.fixtures.fixture_server --tools echo --log "{log}"; exec sleep 600'
    config = write_settings(tmp_path, {"a": command_server(["/bin/sh", "-c", stubborn])})
    # A bug in our own code, planted where every first sync goes: the sidecar must die
    # loudly, and the shielded transport cleanup must still take its children with it.
    crashing_sidecar = (
        "import sys\n"
        "from supervisor.catalog_sync import CatalogSync\n"
        "def _swap(self, reason, listing):\n"
        "    raise RuntimeError('planted bug in the sidecar')\n"
        "CatalogSync._swap = _swap\n"
        "from supervisor.cli import main\n"
        "sys.exit(main(['run', '--config', sys.argv[1]]))\n"
    )
    stderr_path = tmp_path / "sidecar.stderr"
    with trio.fail_after(BOUND_SEC), stderr_path.open("wb") as stderr:
        sidecar = await trio.lowlevel.open_process(
            [sys.executable, "-c", crashing_sidecar, str(config)],
            stdin=subprocess.PIPE,  # an open, silent host: only the crash can end the run
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=str(REPO_ROOT),
            env=sidecar_env(),
        )
        try:
            assert await sidecar.wait() != 0
        finally:
            assert sidecar.stdin is not None
            await sidecar.stdin.aclose()
    assert "planted bug in the sidecar" in stderr_path.read_text()
    assert started_pids(log), "the fixture must have been running when the sidecar crashed"
    # The autouse no-orphans fixture now proves the fixture process is gone.
