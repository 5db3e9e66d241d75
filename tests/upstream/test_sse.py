"""A legacy HTTP+SSE server behind the sidecar, end to end (issue 12): ``transport = "sse"``.

The server is the fixture server over the SDK's ``SseServerTransport``
(``tests/fixtures/sse_server.py``), a real process on a loopback port the OS
picks; the host is a real ``mcp.Client`` driving ``mcp-supervisor run``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest
import trio

from tests.sidecar import open_host, open_http_fixture, read_log, scaled, text_of, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC: Final = scaled(40)


async def test_a_legacy_sse_server_is_served_reconnects_after_being_killed_and_its_list_changed_reaches_the_host(
    tmp_path: Path,
) -> None:
    with trio.fail_after(BOUND_SEC):
        log = tmp_path / "sse.jsonl"
        async with open_http_fixture(log=log, module="tests.fixtures.sse_server", path="/sse") as sse:
            config = write_settings(tmp_path, {"legacy": {"url": sse.url, "transport": "sse"}})
            async with open_host(config) as host:
                await host.wait_tools(lambda names: "mcp__legacy__echo" in names)
                assert text_of(await host.call("mcp__legacy__echo", {"text": "over sse"})) == "over sse"

                # list_changed: the server adds a tool and announces it on its one event stream.
                seen = host.notices
                await host.call("mcp__legacy__add_tool", {"name": "fresh"})
                await host.wait_notice(after=seen)
                await host.wait_tools(lambda names: "mcp__legacy__fresh" in names)

                # Killed: its stream ends, the sidecar reconnects once it is back on the same port.
                first_pid = sse.process.pid if sse.process is not None else None
                await sse.kill()
                await sse.start()
                result = await host.wait_call_succeeds("mcp__legacy__echo", {"text": "again"})
                assert text_of(result) == "again"
                pids = [e["pid"] for e in read_log(log) if e["event"] == "start"]
                assert len(pids) == 2 and pids[0] == first_pid
