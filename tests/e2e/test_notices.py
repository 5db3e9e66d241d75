"""I22 through a whole start: a host that lists at once is told nothing until something really changes.

A real host lists right after its handshake, while the sidecar's servers are
still starting (one is slow to list), so its first list waits for them and gets
them all. Before issue 57 the sidecar then sent ``tools/list_changed`` for the
swaps that list had waited for (3 starts in 5), and Claude Code listed again.

Nothing can show that a notice will never come, so the test makes one real
change afterwards and waits for its notice: notices reach a host in order, so if
that notice is the first, none came during the start.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from mcp.client.client import ConnectMode

from tests.sidecar import HOST_MODES, fixture_server, open_host, scaled, text_of, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(60)


@pytest.mark.parametrize("mode", HOST_MODES)
async def test_I22_a_whole_start_sends_no_list_changed_and_a_real_change_sends_one(
    tmp_path: Path, mode: ConnectMode
) -> None:
    servers = {
        "a": fixture_server("--name", "a"),
        "b": fixture_server("--name", "b", "--list-delay-sec", "0.5"),
        "c": fixture_server("--name", "c", "--legacy-only"),
    }
    config = write_settings(tmp_path, servers)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode) as host:
            names = await host.tool_names()  # at once: it waits for the servers still on their first attempt
            assert {"mcp__a__echo", "mcp__b__echo", "mcp__c__echo"} <= set(names)
            assert text_of(await host.call("mcp__a__add_tool", {"name": "fresh"})) == "added"
            await host.wait_notice(after=0)
            assert host.notices == 1, f"{host.notices - 1} notice(s) for nothing came before the real change's"
            assert "mcp__a__fresh" in await host.tool_names()
