"""A legacy HTTP+SSE server behind the sidecar, end to end (issue 12): ``transport = "sse"``.

The server is the fixture server over the SDK's ``SseServerTransport``
(``tests/fixtures/sse_server.py``), a real process on a loopback port the OS
picks; the host is a real ``mcp.Client`` driving ``mcp-supervisor run``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import pytest
import trio

from tests.e2e import REPO_ROOT, ProcessLog, open_host, read_log, scaled, sidecar_env, text_of, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC: Final = scaled(40)


@dataclass
class SseServer:
    """The SSE fixture; ``start`` again after ``kill`` to bring it back on the same port."""

    log_path: Path
    nursery: trio.Nursery
    port: int = 0
    process: trio.Process | None = None
    stderr: ProcessLog = field(default_factory=ProcessLog)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse"

    async def start(self) -> None:
        argv = [
            sys.executable,
            "-m",
            "tests.fixtures.sse_server",
            "--port",
            str(self.port),
            "--log",
            str(self.log_path),
        ]
        self.stderr = ProcessLog()
        self.process = await trio.lowlevel.open_process(
            argv, stderr=subprocess.PIPE, cwd=str(REPO_ROOT), env=sidecar_env()
        )
        assert self.process.stderr is not None
        self.nursery.start_soon(self.stderr.pump, self.process.stderr)
        port = urlsplit(await self.stderr.wait_listening("sse_server")).port
        assert port is not None
        self.port = port

    async def kill(self) -> None:
        if self.process is not None:
            with suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
            self.process = None


@asynccontextmanager
async def open_sse_server(tmp_path: Path) -> AsyncIterator[SseServer]:
    async with trio.open_nursery() as nursery:
        server = SseServer(tmp_path / "sse.jsonl", nursery)
        try:
            await server.start()
            yield server
        finally:
            with trio.CancelScope(shield=True):
                await server.kill()
            nursery.cancel_scope.cancel()


async def test_a_legacy_sse_server_is_served_reconnects_after_being_killed_and_its_list_changed_reaches_the_host(
    tmp_path: Path,
) -> None:
    with trio.fail_after(BOUND_SEC):
        async with open_sse_server(tmp_path) as sse:
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
                pids = [e["pid"] for e in read_log(sse.log_path) if e["event"] == "start"]
                assert len(pids) == 2 and pids[0] == first_pid
