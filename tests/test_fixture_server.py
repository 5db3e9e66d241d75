"""End-to-end checks of the fixture server and the bundled demo server.

Every test drives a real server process through a real `mcp.Client` and holds a hard
`trio.fail_after` bound. Stdio servers end when their client closes stdin; the HTTP
server and the grandchild sleeper are killed and reaped in `finally` blocks.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import mcp_types
import pytest
import trio
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION
from pydantic import ValidationError

from tests.sidecar import open_http_fixture, scaled

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURE_MODULE = "tests.fixtures.fixture_server"
BOUND_SEC = scaled(15)


def fixture(*args: str, module: str = FIXTURE_MODULE) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", module, *args], cwd=str(REPO_ROOT))


def text_of(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


def tool_names(result: mcp_types.ListToolsResult) -> list[str]:
    return [tool.name for tool in result.tools]


def read_log(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_default_fixture_speaks_2026_and_serves_builtin_tools() -> None:
    with trio.fail_after(BOUND_SEC):
        async with Client(fixture("--name", "alpha", "--version", "2.0.0")) as client:
            assert client.protocol_version == LATEST_MODERN_VERSION
            assert client.server_info is not None
            assert (client.server_info.name, client.server_info.version) == ("alpha", "2.0.0")
            listed = tool_names(await client.list_tools())
            assert listed[:3] == ["echo", "add", "slow"]
            assert {"crash", "hang", "add_tool", "remove_tool", "garbage", "spawn_grandchild"} <= set(listed)
            assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"
            assert text_of(await client.call_tool("add", {"a": 2, "b": 3})) == "5"


async def test_legacy_client_gets_handshake_era_from_default_fixture() -> None:
    with trio.fail_after(BOUND_SEC):
        async with Client(fixture(), mode="legacy") as client:
            assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            assert text_of(await client.call_tool("echo", {"text": "old"})) == "old"


async def test_legacy_only_fixture_makes_auto_client_fall_back_to_handshake() -> None:
    with trio.fail_after(BOUND_SEC):
        async with Client(fixture("--legacy-only"), mode="auto") as client:
            assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            assert client.server_info is not None
            assert client.server_info.name == "fixture"
            assert "echo" in tool_names(await client.list_tools())


async def test_add_tool_notifies_handshake_era_client_through_message_handler() -> None:
    changed = trio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            changed.set()

    with trio.fail_after(BOUND_SEC):
        async with Client(
            fixture("--tools", "echo,add_tool,remove_tool"), mode="legacy", message_handler=on_message
        ) as client:
            assert text_of(await client.call_tool("add_tool", {"name": "fresh"})) == "added"
            await changed.wait()
            assert "fresh" in tool_names(await client.list_tools(cache_mode="refresh"))
            assert text_of(await client.call_tool("fresh", {"text": "x"})) == "x"
            await client.call_tool("remove_tool", {"name": "fresh"})
            assert "fresh" not in tool_names(await client.list_tools(cache_mode="refresh"))


async def test_add_tool_notifies_2026_client_through_listen_stream() -> None:
    with trio.fail_after(BOUND_SEC):
        async with Client(fixture("--tools", "echo,add_tool")) as client:
            assert client.protocol_version == LATEST_MODERN_VERSION
            assert tool_names(await client.list_tools()) == ["echo", "add_tool"]
            async with client.listen(tools_list_changed=True) as sub:
                await client.call_tool("add_tool", {"name": "fresh"})
                event = await sub.__anext__()
            assert isinstance(event, ToolsListChanged)
            assert tool_names(await client.list_tools(cache_mode="refresh")) == ["echo", "add_tool", "fresh"]


async def test_ttl_ms_is_declared_on_tools_list_for_2026_clients() -> None:
    with trio.fail_after(BOUND_SEC):
        async with Client(fixture("--ttl-ms", "4321")) as client:
            assert (await client.list_tools()).ttl_ms == 4321


async def test_log_records_start_and_every_request(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    with trio.fail_after(BOUND_SEC):
        async with Client(fixture("--log", str(log)), cache=None) as client:
            await client.list_tools()
            await client.list_tools()
            await client.call_tool("echo", {"text": "x"})
    events = read_log(log)
    assert events[0]["event"] == "start"
    assert events[0]["name"] == "fixture"
    requests = [e for e in events if e["event"] == "request"]
    assert sum(e["method"] == "tools/list" for e in requests) >= 2
    assert {"method": "tools/call", "tool": "echo"}.items() <= next(
        e for e in requests if e["method"] == "tools/call"
    ).items()


async def test_invalid_params_and_unknown_tools_fail_with_minus_32602() -> None:
    with trio.fail_after(BOUND_SEC):
        async with Client(fixture("--tools", "echo,invalid_params")) as client:
            with pytest.raises(MCPError) as bad_args:
                await client.call_tool("invalid_params", {})
            assert bad_args.value.code == mcp_types.INVALID_PARAMS
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("add", {"a": 1, "b": 2})  # a built-in, but not listed
            assert unknown.value.code == mcp_types.INVALID_PARAMS
            assert "Unknown tool: add" in unknown.value.error.message


async def test_listing_options_shape_tools_list(tmp_path: Path) -> None:
    with trio.fail_after(BOUND_SEC):
        async with Client(
            fixture("--tools", "echo,add,slow", "--duplicate-tool", "--page-size", "2"), cache=None
        ) as client:
            first = await client.list_tools()
            assert tool_names(first) == ["echo", "add"]
            assert first.next_cursor is not None
            second = await client.list_tools(cursor=first.next_cursor)
            assert tool_names(second) == ["slow", "echo"]
            assert second.next_cursor is None
        async with Client(fixture("--invalid-schema")) as client:
            with pytest.raises(ValidationError):
                await client.list_tools()
        grow = tmp_path / "grow"
        for expected in ([], ["extra_2"], ["extra_2", "extra_3"]):
            async with Client(fixture("--tools", "echo", "--grow-per-start", str(grow))) as client:
                assert tool_names(await client.list_tools()) == ["echo", *expected]


async def test_crash_kills_the_server_mid_call() -> None:
    with trio.fail_after(BOUND_SEC):
        async with Client(fixture("--tools", "crash")) as client:
            with pytest.raises(MCPError):
                await client.call_tool("crash", {})


async def test_spawn_grandchild_logs_and_returns_a_live_pid(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    pid = 0
    try:
        with trio.fail_after(BOUND_SEC):
            async with Client(fixture("--log", str(log))) as client:
                pid = int(text_of(await client.call_tool("spawn_grandchild", {})))
                os.kill(pid, 0)  # alive
                assert any(e["event"] == "grandchild" and e["child_pid"] == pid for e in read_log(log))
    finally:
        if pid:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def test_stdio_fixture_exits_cleanly_on_stdin_eof() -> None:
    with trio.fail_after(BOUND_SEC):
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", FIXTURE_MODULE, "--garbage-on-start", "2"],
            cwd=str(REPO_ROOT),
            stdin=-1,
            stdout=-1,
        )
        try:
            assert proc.stdin is not None
            assert proc.stdout is not None
            garbage = b""
            while garbage.count(b"\n") < 2:
                garbage += await proc.stdout.receive_some()
            assert garbage.startswith(b"this is not json\n")
            await proc.stdin.aclose()
            assert await proc.wait() == 0
        finally:
            with suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


@asynccontextmanager
async def http_fixture(*args: str) -> AsyncIterator[str]:
    """The fixture over HTTP on a port the OS picks (read from its ready line); killed and reaped on exit."""
    async with open_http_fixture(*args) as served:
        yield served.url


# The SDK's handshake-era HTTP client drops its httpx2 SSE generators unclosed under trio
# (a client-side ResourceWarning at teardown, not a fixture fault); the 2026 era is clean.
_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_http_fixture_serves_both_eras() -> None:
    with trio.fail_after(BOUND_SEC):
        async with http_fixture("--name", "web") as url:
            async with Client(url) as client:
                assert client.protocol_version == LATEST_MODERN_VERSION
                assert client.server_info is not None
                assert client.server_info.name == "web"
                assert "echo" in tool_names(await client.list_tools())
                assert text_of(await client.call_tool("add", {"a": 1, "b": 1})) == "2"
            async with Client(url, mode="legacy") as client:
                assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
                assert text_of(await client.call_tool("echo", {"text": "h"})) == "h"


@_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_legacy_only_http_fixture_makes_auto_client_fall_back() -> None:
    with trio.fail_after(BOUND_SEC):
        async with http_fixture("--legacy-only") as url, Client(url) as client:
            assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            assert text_of(await client.call_tool("echo", {"text": "h"})) == "h"


async def test_demo_server_lists_its_tools_and_tells_the_time() -> None:
    with trio.fail_after(BOUND_SEC):
        async with Client(fixture(module="supervisor.demo")) as client:
            assert client.server_info is not None
            assert (client.server_info.name, client.server_info.version) == ("mcp-supervisor-demo", "0.1.0")
            assert tool_names(await client.list_tools()) == ["echo", "add", "now", "add_tool", "remove_tool"]
            assert "T" in text_of(await client.call_tool("now", {}))
            assert text_of(await client.call_tool("add", {"a": 1.5, "b": 2})) == "3.5"
            async with client.listen(tools_list_changed=True) as sub:
                await client.call_tool("add_tool", {"name": "shout"})
                assert isinstance(await sub.__anext__(), ToolsListChanged)
            assert "shout" in tool_names(await client.list_tools(cache_mode="refresh"))
