"""Catalog reuse across reconnects (DESIGN I4-I9), end to end with real fixture processes.

Every reuse test restarts a fixture whose second start lists one more tool
(``extra_2``, via ``--grow-per-start``) than its first, so only a fresh
``tools/list`` can see it. The fixture's ``--log`` tells how many ``tools/list``
requests each process received.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import MCPError

from tests.sidecar import (
    FIXTURE_MODULE,
    Host,
    command_server,
    fixture_server,
    open_host,
    read_log,
    scaled,
    started_pids,
    text_of,
    wait_until,
    write_settings,
)

pytestmark = pytest.mark.e2e

LOADED_BOUND_SEC = scaled(30.0)
"""Bound for waits on process start-up: generous, because a loaded 2-core machine starts Python slowly."""
TEST_BOUND_SEC = scaled(120.0)
BASE = "mcp__fx__echo"
EXTRA = "mcp__fx__extra_2"


def list_requests(log: Path, pid: int) -> int:
    """How many ``tools/list`` requests the fixture process ``pid`` received."""
    return sum(
        1
        for event in read_log(log)
        if event["event"] == "request" and event.get("method") == "tools/list" and event["pid"] == pid
    )


def tool_calls(log: Path, tool: str) -> int:
    return sum(1 for e in read_log(log) if e["event"] == "request" and e.get("tool") == tool)


async def crash_and_wait_for_restart(host: Host, log: Path) -> int:
    """Kill the fixture mid-call, wait until its next process answers calls; return the new pid."""
    await host.wait_tools(lambda names: BASE in names, bound_sec=LOADED_BOUND_SEC)  # a loaded machine starts slowly
    before = len(started_pids(log))
    try:
        result = await host.call("mcp__fx__crash")
    except MCPError:
        pass  # the connection died under the call: a JSON-RPC error is as good as an isError result
    else:
        assert result.is_error, result
    await wait_until(lambda: len(started_pids(log)) > before, what="the fixture to restart", bound_sec=LOADED_BOUND_SEC)
    with trio.fail_after(LOADED_BOUND_SEC):
        while True:
            result = await host.call(BASE, {"text": "back"})
            if not result.is_error:
                break
            assert "reconnecting" in text_of(result) or "is connecting" in text_of(result), text_of(result)
            await trio.sleep(0.05)
    assert text_of(result) == "back"
    return started_pids(log)[-1]


def grow_server(tmp_path: Path, *args: str, **table: Any) -> dict[str, Any]:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    return fixture_server(
        "--tools", "echo,crash,add_tool,drop_tool", "--grow-per-start", str(state), "--log", str(tmp_path / "fx.log"),
        *args, **table,
    )  # fmt: skip


@pytest.mark.parametrize("host_mode", ["auto", "legacy"])
async def test_I4_a_reconnect_within_the_declared_lifetime_reuses_the_catalog_with_no_tools_list(
    tmp_path: Path, host_mode: str
) -> None:
    log = tmp_path / "fx.log"
    config = write_settings(tmp_path, {"fx": grow_server(tmp_path, "--ttl-ms", "60000")})
    with trio.fail_after(TEST_BOUND_SEC):
        async with open_host(config, host_mode) as host:
            new_pid = await crash_and_wait_for_restart(host, log)

            names = await host.tool_names()
            assert EXTRA not in names, "the reused catalog is the first generation's"
            assert BASE in names
            assert list_requests(log, new_pid) == 0, "the reconnect must not cost a tools/list"

            # A list_changed always reaches the server (refresh), and shows what it really has now.
            seen = host.notices
            await host.call("mcp__fx__add_tool", {"name": "fresh"})
            await host.wait_notice(after=seen)
            names = await host.wait_tools(lambda n: "mcp__fx__fresh" in n)
            assert EXTRA in names
            assert list_requests(log, new_pid) >= 1


async def test_I5_a_server_declared_lifetime_of_zero_is_relisted_on_reconnect(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    # Declares no hint at 2026-07-28, which the SDK sends as ttlMs 0; the fallback must not apply.
    config = write_settings(tmp_path, {"fx": grow_server(tmp_path)})
    with trio.fail_after(TEST_BOUND_SEC):
        async with open_host(config) as host:
            new_pid = await crash_and_wait_for_restart(host, log)
            assert EXTRA in await host.wait_tools(lambda n: EXTRA in n, bound_sec=LOADED_BOUND_SEC)
            assert list_requests(log, new_pid) >= 1


async def test_I5_a_handshake_era_server_without_a_declaration_reuses_the_fallback_lifetime(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    config = write_settings(tmp_path, {"fx": grow_server(tmp_path, "--legacy-only")})
    with trio.fail_after(TEST_BOUND_SEC):
        async with open_host(config) as host:
            new_pid = await crash_and_wait_for_restart(host, log)
            assert EXTRA not in await host.tool_names()
            assert list_requests(log, new_pid) == 0


async def test_I5_catalog_reuse_ttl_of_zero_turns_reuse_off_for_a_handshake_era_server(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    server = grow_server(tmp_path, "--legacy-only", reconnect={"catalog_reuse_ttl_ms": 0})
    config = write_settings(tmp_path, {"fx": server})
    with trio.fail_after(TEST_BOUND_SEC):
        async with open_host(config) as host:
            new_pid = await crash_and_wait_for_restart(host, log)
            assert EXTRA in await host.wait_tools(lambda n: EXTRA in n, bound_sec=LOADED_BOUND_SEC)
            assert list_requests(log, new_pid) >= 1


async def test_I6_a_server_that_comes_back_with_another_version_is_relisted(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    state = tmp_path / "state"
    state.mkdir()
    # Each start reports version 1.<start number>.
    script = (
        f'n=$(cat "{state}/n" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "{state}/n"; '
        f'exec "{sys.executable}" -m {FIXTURE_MODULE} --version "1.$n" --ttl-ms 60000 '
        f'--tools echo,crash --grow-per-start "{state}" --log "{log}"'
    )
    config = write_settings(tmp_path, {"fx": command_server(["/bin/sh", "-c", script])})
    with trio.fail_after(TEST_BOUND_SEC):
        async with open_host(config) as host:
            new_pid = await crash_and_wait_for_restart(host, log)
            assert EXTRA in await host.wait_tools(lambda n: EXTRA in n, bound_sec=LOADED_BOUND_SEC)
            assert list_requests(log, new_pid) >= 1


async def test_I8_an_unknown_tool_error_reaches_the_host_unchanged_is_not_resent_and_heals_the_catalog(
    tmp_path: Path,
) -> None:
    log = tmp_path / "fx.log"
    config = write_settings(tmp_path, {"fx": grow_server(tmp_path, "--legacy-only")})
    with trio.fail_after(TEST_BOUND_SEC):
        async with open_host(config) as host:
            await host.wait_tools(lambda names: BASE in names, bound_sec=LOADED_BOUND_SEC)
            # The server drops echo without telling anyone: our catalog is now stale.
            await host.call("mcp__fx__drop_tool", {"name": "echo"})
            assert BASE in await host.tool_names()
            with pytest.raises(MCPError) as raised:
                await host.call(BASE, {"text": "hi"})
            assert raised.value.code == types.INVALID_PARAMS
            assert raised.value.error.message == "Unknown tool: echo"
            await host.wait_tools(lambda n: BASE not in n)
            assert tool_calls(log, "echo") == 1, "the failed call must never be re-sent"


async def test_I9_resources_are_forwarded_and_never_served_from_a_catalog_lifetime(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    config = write_settings(tmp_path, {"fx": grow_server(tmp_path, "--ttl-ms", "60000", "--resources")})
    with trio.fail_after(scaled(60)):
        async with open_host(config) as host:
            await host.wait_tools(lambda names: BASE in names, bound_sec=LOADED_BOUND_SEC)
            listed = await host.session.list_resources(cache_mode="bypass")
            uris = [str(resource.uri) for resource in listed.resources]
            assert "fixture://counter" in uris
            first = await host.session.read_resource("fixture://counter", cache_mode="bypass")
            second = await host.session.read_resource("fixture://counter", cache_mode="bypass")
            texts = [c.text for r in (first, second) for c in r.contents if isinstance(c, types.TextResourceContents)]
            assert texts[0] != texts[1], "each read must reach the server"
            reads = [e for e in read_log(log) if e["event"] == "request" and e.get("method") == "resources/read"]
            assert len(reads) == 2
