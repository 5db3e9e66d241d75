"""End to end: a real host (``mcp.Client``, both protocol eras) talks to ``python -m supervisor run``.

The upstream servers are real fixture server processes. Every test is bounded by
``trio.fail_after``; ``conftest.py`` checks that no process outlives a test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import MCPError
from mcp.client.client import ConnectMode
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from supervisor.host.front import FIRST_LIST_WAIT_SEC
from tests.fixtures.fixture_server import BUILTIN_TOOLS
from tests.sidecar import HOST_MODES, called_tools, fixture_server, open_host, scaled, text_of, write_settings

pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("mode", HOST_MODES)]

BOUND_SEC = scaled(45)
SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"


def _two_servers(tmp_path: Path, **b_table: Any) -> Path:
    return write_settings(
        tmp_path,
        {
            "a": fixture_server("--name", "fixture-a", "--log", str(tmp_path / "a.jsonl")),
            "b": fixture_server(
                "--name", "fixture-b", "--tools", "echo,add,garbage", "--log", str(tmp_path / "b.jsonl"), **b_table
            ),
        },
    )


def _assert_era(mode: ConnectMode, protocol_version: str) -> None:
    expected = MODERN_PROTOCOL_VERSIONS if mode == "auto" else HANDSHAKE_PROTOCOL_VERSIONS
    assert protocol_version in expected


async def test_host_sees_the_union_of_both_servers_and_calls_route_by_raw_name_over_clean_stdout(
    tmp_path: Path, mode: ConnectMode
) -> None:
    config = _two_servers(tmp_path)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode) as host:
            _assert_era(mode, host.session.protocol_version)
            assert host.session.server_info is not None
            assert host.session.server_info.name == "mcp-supervisor"
            names = await host.wait_tools(lambda n: "mcp__a__echo" in n and "mcp__b__echo" in n)
            assert sorted(n for n in names if n.startswith("mcp__b__")) == [
                "mcp__b__add",
                "mcp__b__echo",
                "mcp__b__garbage",
            ]
            assert sorted(n for n in names if n.startswith("mcp__a__")) == sorted(f"mcp__a__{t}" for t in BUILTIN_TOOLS)
            assert len(names) == len(set(names)) == len(BUILTIN_TOOLS) + 3

            echoed = await host.call("mcp__a__echo", {"text": "hello"})
            assert not echoed.is_error
            assert text_of(echoed) == "hello"
            added = await host.call("mcp__b__add", {"a": 2, "b": 40})
            assert text_of(added) == "42"
            for _ in range(3):
                # Upstream garbage on stdout is dropped by the sidecar: the host's parser never sees it.
                assert text_of(await host.call("mcp__b__garbage", {})) == "ok"
                assert text_of(await host.call("mcp__b__echo", {"text": "clean"})) == "clean"
            assert host.bad_frames == []
            for result in (echoed, added):
                stamp = (result.meta or {}).get(SERVER_INFO_META_KEY)
                if host.modern:
                    # The host's own SDK stamps the sidecar's identity; the upstream's never leaks through.
                    assert stamp is None or stamp.get("name") == "mcp-supervisor", stamp
                else:
                    assert stamp is None
        assert host.bad_frames == []
        assert host.exit_code == 0
    # The raw names went upstream, each to its owner.
    assert called_tools(tmp_path / "a.jsonl") == ["echo"]
    assert called_tools(tmp_path / "b.jsonl") == ["add", *["garbage", "echo"] * 3]


async def test_a_tool_added_at_run_time_reaches_the_host_with_a_change_notice(
    tmp_path: Path, mode: ConnectMode
) -> None:
    config = _two_servers(tmp_path)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode) as host:
            assert "mcp__a__fresh" not in await host.wait_tools(lambda n: "mcp__a__add_tool" in n)
            before = host.notices
            assert text_of(await host.call("mcp__a__add_tool", {"name": "fresh"})) == "added"
            # Handshake era: notifications/tools/list_changed; 2026 era: an event on the listen stream.
            with trio.fail_after(scaled(5)):
                await host.wait_notice(after=before)
            names = await host.wait_tools(lambda names: "mcp__a__fresh" in names)
            assert len(names) == len(set(names))
            assert text_of(await host.call("mcp__a__fresh", {"text": "new"})) == "new"
    assert called_tools(tmp_path / "a.jsonl")[-1] == "fresh"


async def test_enabled_and_disabled_tools_filter_what_the_host_sees(tmp_path: Path, mode: ConnectMode) -> None:
    config = write_settings(
        tmp_path,
        {
            "a": fixture_server(enabled_tools=["e*", "a*"], disabled_tools=["add_tool"]),
            "b": fixture_server("--tools", "echo,add,slow", disabled_tools=["slow"]),
        },
    )
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode) as host:
            names = sorted(await host.wait_tools(lambda n: "mcp__a__echo" in n and "mcp__b__echo" in n))
            assert names == ["mcp__a__add", "mcp__a__echo", "mcp__b__add", "mcp__b__echo"]
            with pytest.raises(MCPError) as filtered:
                await host.call("mcp__b__slow", {"seconds": 0})
            assert filtered.value.code == types.INVALID_PARAMS
            assert text_of(await host.call("mcp__b__echo", {"text": "ok"})) == "ok"


async def test_upstream_invalid_params_and_unknown_tools_reach_the_host_as_minus_32602(
    tmp_path: Path, mode: ConnectMode
) -> None:
    config = _two_servers(tmp_path)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode) as host:
            with pytest.raises(MCPError) as upstream_error:
                await host.call("mcp__a__invalid_params", {})
            assert upstream_error.value.code == types.INVALID_PARAMS
            assert "always rejects its arguments" in upstream_error.value.error.message
            for name in ("mcp__a__nope", "mcp__zz__echo", "echo"):
                with pytest.raises(MCPError) as unknown:
                    await host.call(name, {"text": "x"})
                assert unknown.value.code == types.INVALID_PARAMS
                assert name in unknown.value.error.message
            # The server stays usable after the errors.
            assert text_of(await host.call("mcp__a__echo", {"text": "still here"})) == "still here"
    assert called_tools(tmp_path / "a.jsonl") == ["invalid_params", "echo"]


async def test_a_call_right_after_start_waits_for_a_server_slower_than_a_listings_short_wait(
    tmp_path: Path, mode: ConnectMode
) -> None:
    # A list waits FIRST_LIST_WAIT_SEC for servers still starting; a call names the tool it
    # wants, so it waits as long as the start may take (startup_timeout_sec) instead of
    # answering "Unknown tool" for a tool that is about to appear.
    delay = FIRST_LIST_WAIT_SEC + scaled(1)
    config = write_settings(
        tmp_path,
        {"slow": fixture_server("--list-delay-sec", str(delay))},
        defaults={"startup_timeout_sec": delay + scaled(20)},
    )
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode) as host:
            assert text_of(await host.call("mcp__slow__echo", {"text": "early"})) == "early"
