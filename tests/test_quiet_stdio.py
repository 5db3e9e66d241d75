"""Quiet by default on stdio (issue 57, item 7): a normal start writes nothing on stderr.

Claude Code records every stderr line of a stdio server as ``[ERROR]`` in its
debug log, so the stdio front's ``run`` logs warnings and errors only unless the
user sets ``log_level`` (or passes ``--log-level``). The bundled ``settings.toml``
sets none. The HTTP front keeps its ``info`` lines (its tests read them).
"""

from __future__ import annotations

import json
import sys

import pytest
import trio

from tests.sidecar import REPO_ROOT, scaled, sidecar_env

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(60)
REQUESTS = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "mcp__demo__echo", "arguments": {"text": "q"}},
    },
]


async def _run_bundled(*extra: str) -> tuple[list[dict[str, object]], bytes]:
    argv = [sys.executable, "-m", "supervisor", "run", "--config", str(REPO_ROOT / "settings.toml"), *extra]
    stdin = "".join(json.dumps(request) + "\n" for request in REQUESTS).encode()
    with trio.fail_after(BOUND_SEC):
        done = await trio.run_process(
            argv, stdin=stdin, capture_stdout=True, capture_stderr=True, check=False, cwd=str(REPO_ROOT),
            env=sidecar_env({"SUPERVISOR_PYTHON": sys.executable}),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return [json.loads(line) for line in done.stdout.decode().splitlines()], done.stderr


async def test_a_normal_start_of_the_bundled_settings_on_the_stdio_front_writes_nothing_on_stderr() -> None:
    messages, stderr = await _run_bundled()
    answered = {message["id"] for message in messages if "id" in message}
    assert answered == {1, 2, 3}
    assert stderr == b""


async def test_log_level_info_on_the_command_line_shows_the_start_up_lines() -> None:
    _, stderr = await _run_bundled("--log-level", "info")
    assert b"INFO supervisor.root: supervising 2 servers" in stderr
    assert b"ready: 7 tools from 2 servers" in stderr
