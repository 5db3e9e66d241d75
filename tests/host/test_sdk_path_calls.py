"""A call the SDK's server reads (``adapters.call_tool``) runs through the same driver as a front's own answer.

The Front runs in-process (a real ``Supervisor`` with one real fixture server
behind it) and a real ``mcp.Client`` host talks to its MCP server over memory
streams, so every call here is the SDK's server's to read: the handler hands it
to the driver (``ToolCalls.run``), and each test reads the result and the metrics.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import mcp_types as types
import pytest
import trio
from mcp import Client, MCPError
from mcp.client.client import ConnectMode
from mcp.shared.memory import create_client_server_memory_streams
from mcp_types import SERVER_INFO_META_KEY

from supervisor.calls.results import wire_result_shaped
from supervisor.config.loader import load_settings
from supervisor.host.front import Front
from supervisor.host.pipeline.stages import shaped
from supervisor.host.relay import Relay
from supervisor.ops.metrics import PREFIX
from supervisor.root import Supervisor
from tests.fidelity_host import Recorder
from tests.sidecar import Host, fixture_server, scaled, text_of, wait_until, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(60)
ECHO = "mcp__fx__echo"


@dataclass
class Served:
    supervisor: Supervisor
    front: Front
    client: Client

    def calls(self, outcome: str) -> float:
        value = self.supervisor.metrics.registry.get_sample_value(
            f"{PREFIX}_tool_calls_total", {"server": "fx", "outcome": outcome}
        )
        return value or 0.0


@asynccontextmanager
async def in_memory(front: Front) -> AsyncIterator[Any]:
    """The Front's MCP server on memory streams (as on a stdio wire), yielding the host's transport streams."""
    async with create_client_server_memory_streams() as (host_streams, server_streams), trio.open_nursery() as nursery:
        nursery.start_soon(front.server.run, *server_streams, front.init_options)
        yield host_streams
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def serve(
    tmp_path: Path, *fixture_args: str, host: ConnectMode = "auto", client: dict[str, Any] | None = None, **table: Any
) -> AsyncIterator[Served]:
    """One in-process sidecar over one fixture server ``fx``, and one host (``mcp.Client(**client)``) on it."""
    servers = {"fx": fixture_server("--name", "fx", *fixture_args, **table)}
    settings = load_settings(write_settings(tmp_path, servers, supervisor={"log_level": "warning"}))
    relay = Relay()
    supervisor = Supervisor(settings, host=relay)
    front = Front(supervisor, relay)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        await nursery.start(front.run)
        await supervisor.wait_first_attempts()
        async with Client(in_memory(front), mode=host, **(client or {})) as connected:
            yield Served(supervisor, front, connected)
        nursery.cancel_scope.cancel()


def _comparable(result: types.CallToolResult) -> dict[str, Any]:
    dumped = result.model_dump(by_alias=True, exclude_none=True)
    dumped.pop("_meta", None)
    return dumped


async def test_a_plain_call_between_2026_era_ends_gets_the_upstreams_result_with_our_stamp(tmp_path: Path) -> None:
    with trio.fail_after(BOUND_SEC):
        async with serve(tmp_path, "--tools", "echo,add") as served:
            assert served.client.protocol_version == "2026-07-28"
            result = await served.client.call_tool(ECHO, {"text": "hi"})
            assert text_of(result) == "hi"
            # The stamp names the sidecar (the host talks to us), not the upstream.
            assert result.meta is not None
            assert result.meta[SERVER_INFO_META_KEY]["name"] == "mcp-supervisor"
            own = await served.client.call_tool(ECHO, {"text": "own"}, meta=cast(types.RequestParamsMeta, {"x/own": 1}))
            assert text_of(own) == "own", "a 2026-era host's _meta is its own"
            assert served.calls("ok") == 2
        async with serve(tmp_path, "--tools", "echo", host="legacy") as served:
            old = await served.client.call_tool(ECHO, {"text": "old host"})
            assert text_of(old) == "old host"
            assert old.meta is None or SERVER_INFO_META_KEY not in old.meta, "a handshake-era result: no stamp"


async def test_a_2026_era_hosts_call_to_a_handshake_era_server_gets_its_questions_as_input_rounds(
    tmp_path: Path,
) -> None:
    recorder = Recorder(name="ada")
    options = recorder.client_options(Host())
    with trio.fail_after(BOUND_SEC):
        async with serve(tmp_path, "--fidelity", "--legacy-only", client=options) as served:
            assert served.client.protocol_version == "2026-07-28"
            result = await served.client.call_tool(ECHO, {"text": "old server"})
            assert text_of(result) == "old server"
            assert result.meta is not None and result.meta[SERVER_INFO_META_KEY]["name"] == "mcp-supervisor"
            # The server asks mid-call: the host gets an input round (DESIGN I13), answers it, and retries.
            elicited = await served.client.call_tool("mcp__fx__elicit", {})
            assert text_of(elicited) == 'elicited: accept {"name": "ada"}'
            # The round is the sidecar's to shape for the host's era: a 2026 input request has no elicitationId.
            await served.client.call_tool("mcp__fx__elicit_url", {})
            asked = recorder.elicit_params[-1]
            assert isinstance(asked, types.ElicitRequestURLParams) and asked.elicitation_id is None
    assert recorder.elicitations == ["form", "url"]


async def test_a_server_error_passes_through_and_an_unknown_tool_heals_the_catalog(
    tmp_path: Path,
) -> None:
    with trio.fail_after(BOUND_SEC):
        async with serve(tmp_path, "--tools", "echo,drop_tool,invalid_params") as served:
            # The server drops echo silently: only the unknown-tool heal (I8) can notice. (First: any
            # -32602 re-lists, so an earlier one could drop echo from the catalog before the call.)
            await served.client.call_tool("mcp__fx__drop_tool", {"name": "echo"})
            with pytest.raises(MCPError) as unknown:
                await served.client.call_tool(ECHO, {"text": "hi"})
            assert unknown.value.error.message == "Unknown tool: echo"
            await wait_until(lambda: served.supervisor.route(ECHO) is None, what="the heal to drop echo")
            with pytest.raises(MCPError) as raised:
                await served.client.call_tool("mcp__fx__invalid_params", {})
            assert raised.value.code == types.INVALID_PARAMS
            assert raised.value.error.message == "invalid_params: this tool always rejects its arguments"
            assert served.calls("rpc_error") == 2


async def test_a_dead_server_is_an_error_result_counted_as_unavailable(tmp_path: Path) -> None:
    with trio.fail_after(BOUND_SEC):
        async with serve(tmp_path, "--tools", "echo,crash") as served:
            result = await served.client.call_tool("mcp__fx__crash", {})
            assert result.is_error
            assert "fx" in text_of(result)
            assert served.calls("unavailable") == 1


# -- the pure parts ----------------------------------------------------------------------


def test_only_complete_results_with_a_content_list_or_input_required_ones_count_as_shaped() -> None:
    assert wire_result_shaped({"content": []})
    assert wire_result_shaped({"content": [], "isError": True})
    assert wire_result_shaped({"resultType": "input_required", "inputRequests": {}})
    assert not wire_result_shaped({})
    assert not wire_result_shaped({"content": "text"})
    assert not wire_result_shaped({"content": [], "isError": "yes"})


def test_restamping_replaces_the_upstreams_server_info_and_keeps_its_other_meta() -> None:
    ours = {"name": "mcp-supervisor", "version": "1"}
    upstream = {"content": [], "_meta": {SERVER_INFO_META_KEY: {"name": "fx"}, "x/trace": 7}}
    assert shaped(upstream, ours) == {
        "content": [],
        "_meta": {SERVER_INFO_META_KEY: ours, "x/trace": 7},
        "resultType": "complete",
    }
    assert shaped({"content": [], "resultType": "complete"}, ours)["_meta"] == {SERVER_INFO_META_KEY: ours}
