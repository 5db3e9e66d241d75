"""A server that lists more than ``max_tools`` entries is refused before its listing is validated (I15, issue 9).

Validating a huge listing is seconds of CPU in one go, which would stall every
other server and the host. The sidecar counts the page first: a listing over the
limit is a failed sync naming the server and the count, the server gets no
tools (first sync, I3) or keeps its previous ones (I2), and the healthy server
next to it is served throughout. (The latency and memory figures for 100,000
tools are measured in the closing note, not asserted here: timing is for bench/.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.sidecar import fixture_server, open_host, scaled, text_of, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(90)


async def test_a_listing_over_max_tools_is_refused_naming_the_server_and_the_count(tmp_path: Path) -> None:
    servers = {
        "big": fixture_server("--name", "big", "--extra-tools", "3000", max_tools=1000, reconnect={"max_attempts": 1}),
        "ok": fixture_server("--name", "ok"),
    }
    config = write_settings(tmp_path, servers)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, "legacy") as host:
            await host.wait_tools(lambda names: "mcp__ok__echo" in names)
            assert text_of(await host.call("mcp__ok__echo", {"text": "fine"})) == "fine"
            names = await host.tool_names()
            assert not [name for name in names if name.startswith("mcp__big__")]
    assert host.exit_code == 0


async def test_the_refusal_names_the_server_and_the_count_before_validating_the_listing(tmp_path: Path) -> None:
    from tests.sidecar import run_cli  # noqa: PLC0415 - only this test runs the CLI

    servers = {"big": fixture_server("--name", "big", "--extra-tools", "1500", max_tools=1000)}
    config = write_settings(tmp_path, servers, defaults={"reconnect": {"max_attempts": 1}})
    with trio.fail_after(BOUND_SEC):
        done = await run_cli("tools", "--config", str(config))
    output = done.stdout + done.stderr
    # 11 built-in tools + 1,500: refused from the count alone, before any tool model is validated.
    assert "server 'big': tools/list failed: a listing page of 1511 tools exceeds max_tools = 1000" in output
