"""A host that writes its requests and closes stdin still gets every answer (issue 9: EOF with requests pending).

``printf '…initialize…\\n…tools/list…\\n' | mcp-supervisor run`` is how people try a
server: stdin is closed before the answers exist. The stdio link lets the end of
input reach the server only once the requests read so far are answered (bounded by
``shutdown_grace_sec``), so the ``tools/list`` answer is written, then the sidecar exits 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from tests.sidecar import REPO_ROOT, fixture_server, scaled, sidecar_argv, sidecar_env, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(60)
FRAMES = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "sh", "version": "1"}},
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "mcp__fx__slow", "arguments": {"seconds": 1}},
    },
]


async def test_requests_written_before_stdin_closes_are_all_answered_then_the_sidecar_exits_0(tmp_path: Path) -> None:
    # The fixture starts slowly (it imports the SDK), so tools/list is still pending when stdin closes.
    config = write_settings(tmp_path, {"fx": fixture_server("--name", "fx")}, supervisor={"shutdown_grace_sec": 20})
    stdin = "".join(json.dumps(frame) + "\n" for frame in FRAMES).encode()
    with trio.fail_after(BOUND_SEC):
        done = await trio.run_process(
            sidecar_argv(config),
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(REPO_ROOT),
            env=sidecar_env(),
        )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    messages = [json.loads(line) for line in done.stdout.decode().splitlines()]
    answers = {message["id"]: message for message in messages if "id" in message}
    assert set(answers) == {1, 2, 3}
    assert "mcp__fx__echo" in [tool["name"] for tool in answers[2]["result"]["tools"]]
    assert answers[3]["result"]["content"][0]["text"] == "done"
