"""A host that writes its requests and closes stdin still gets every answer (issue 9: EOF with requests pending).

``printf '…initialize…\\n…tools/list…\\n' | mcp-supervisor run`` is how people try a
server: stdin is closed before the answers exist. The stdio wire lets the end of
input reach the server only once the requests read so far are answered (bounded by
``shutdown_grace_sec``), so the ``tools/list`` answer is written, then the sidecar exits 0.

Any stdin a launcher hands a child (issue 57, item 6): a pipe, a regular file
(``run < requests.jsonl``) and ``/dev/null``, which epoll refuses, are read the
way the SDK's own stdio servers read them: every request answered, exit 0 at
the end. The bundled demo server too.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Literal

import pytest
import trio

from tests.sidecar import REPO_ROOT, fixture_server, scaled, sidecar_argv, sidecar_env, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(60)
FRAMES: list[dict[str, Any]] = [
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


StdinKind = Literal["pipe", "file"]


async def _run(argv: list[str], stdin_kind: StdinKind, tmp_path: Path, frames: list[dict[str, Any]]) -> Any:
    """Run ``argv`` to its end with ``frames`` on its stdin, as a pipe or as a regular file."""
    data = "".join(json.dumps(frame) + "\n" for frame in frames).encode()
    with trio.fail_after(BOUND_SEC):
        if stdin_kind == "pipe":
            return await trio.run_process(
                argv, stdin=data, capture_stdout=True, capture_stderr=True, check=False, cwd=str(REPO_ROOT),
                env=sidecar_env(),
            )  # fmt: skip
        requests = tmp_path / "requests.jsonl"
        requests.write_bytes(data)
        return await _run_with_stdin_of(argv, requests)


async def _run_with_stdin_of(argv: list[str], path: Path) -> Any:
    """Run ``argv`` to its end with the file ``path`` (a regular file, ``/dev/null``) as its stdin."""
    stdin = os.open(path, os.O_RDONLY)
    try:
        return await trio.run_process(
            argv, stdin=stdin, capture_stdout=True, capture_stderr=True, check=False, cwd=str(REPO_ROOT),
            env=sidecar_env(),
        )  # fmt: skip
    finally:
        os.close(stdin)


def _answers(stdout: bytes) -> dict[Any, dict[str, Any]]:
    messages = [json.loads(line) for line in stdout.decode().splitlines()]
    return {message["id"]: message for message in messages if "id" in message}


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
async def test_requests_written_before_stdin_closes_are_all_answered_then_the_sidecar_exits_0(
    tmp_path: Path, stdin_kind: StdinKind
) -> None:
    # The fixture starts slowly (it imports the SDK), so tools/list is still pending when stdin closes.
    config = write_settings(tmp_path, {"fx": fixture_server("--name", "fx")}, supervisor={"shutdown_grace_sec": 20})
    done = await _run(sidecar_argv(config), stdin_kind, tmp_path, FRAMES)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answers = _answers(done.stdout)
    assert set(answers) == {1, 2, 3}
    assert "mcp__fx__echo" in [tool["name"] for tool in answers[2]["result"]["tools"]]
    assert answers[3]["result"]["content"][0]["text"] == "done"
    assert b"Traceback" not in done.stderr


async def test_a_stdin_of_dev_null_is_an_empty_host_the_sidecar_exits_0_without_a_traceback(tmp_path: Path) -> None:
    config = write_settings(tmp_path, {"fx": fixture_server("--name", "fx")})
    with trio.fail_after(BOUND_SEC):
        done = await _run_with_stdin_of(sidecar_argv(config), Path(os.devnull))
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout == b""
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
async def test_the_bundled_demo_server_answers_every_request_of_a_closed_stdin(
    tmp_path: Path, stdin_kind: StdinKind
) -> None:
    frames = [*FRAMES[:3], {**FRAMES[3], "params": {"name": "echo", "arguments": {"text": "hi"}}}]
    done = await _run([sys.executable, "-m", "supervisor.demo"], stdin_kind, tmp_path, frames)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answers = _answers(done.stdout)
    assert set(answers) == {1, 2, 3}
    assert answers[3]["result"]["content"][0]["text"] == "hi"
