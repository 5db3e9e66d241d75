"""The p3 lite fleet's server (``bench.lite_server``), launched as the bench launches it, speaks MCP to the SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest
import trio
from mcp import Client

from bench.lite_server import _dumps, _loads, _tools
from tests.sidecar import line_transport

pytestmark = pytest.mark.e2e

BOUND_SEC = 20.0
LITE_SERVER = Path(__file__).resolve().parents[2] / "bench" / "lite_server.py"


def lite_argv(tools: int) -> list[str]:
    """As ``bench.fleet.lite_argv`` launches it: by file path, ``-S -I``."""
    return [sys.executable, "-S", "-I", str(LITE_SERVER), str(tools)]


async def test_the_lite_server_started_as_the_bench_starts_it_lists_and_calls_for_the_sdk() -> None:
    with trio.fail_after(BOUND_SEC):
        proc = await trio.lowlevel.open_process(lite_argv(7), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            async with Client(line_transport(proc), mode="auto") as client:
                assert client.server_info is not None and client.server_info.name == "lite"
                listed = await client.list_tools(cache_mode="bypass")
                result = await client.call_tool("t_3", {"text": 'hé "quoted"'})
        finally:
            assert proc.stdin is not None
            await proc.stdin.aclose()
            await proc.wait()
    assert [tool.name for tool in listed.tools] == [f"t_{i}" for i in range(7)]
    assert result.content == [types.TextContent(type="text", text='hé "quoted"')]


@pytest.mark.parametrize("value", [{"a": [1, 2.5, None, True, False, 'x\u00e9"\n'], "b": {"c": -3}}, _tools(2), [], {}])
def test_the_lite_servers_json_round_trips_like_the_json_module(value: object) -> None:
    assert json.loads(_dumps(value)) == value
    assert _loads(f" {json.dumps(value)}\n") == value
