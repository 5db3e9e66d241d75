"""The upstream stdio transport's read side (DESIGN I12, I15): garbage is dropped, an endless line loses it.

Real child processes; each carries the test's orphan marker through the
server's ``env`` table, as the sidecar's children do.
"""

from __future__ import annotations

import json
import os
import sys

import mcp_types as types
import pytest
import trio
from mcp.shared.message import SessionMessage

from supervisor.config.servers import ServerSettings
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.stdio import open_stdio_transport, screen_oversized_listing
from tests.sidecar import MARK_ENV

BOUND_SEC = 15.0
NOTICE = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}'


def _server(code: str) -> ServerSettings:
    return ServerSettings(name="fx", command=sys.executable, args=["-c", code], env={MARK_ENV: os.environ[MARK_ENV]})


@pytest.mark.e2e
async def test_non_json_lines_are_dropped_and_the_next_message_arrives_even_with_crlf_endings() -> None:
    code = (
        "import sys\n"
        f"sys.stdout.buffer.write(b'not json\\r\\n\\r\\n{{\"half\": \\r\\n' + {NOTICE!r} + b'\\r\\n')\n"
        "sys.stdout.flush()\n"
        "sys.stdin.read()\n"
    )
    health = TransportHealth()
    with trio.fail_after(BOUND_SEC):
        async with open_stdio_transport(_server(code), health) as (read, _write):
            item = await read.receive()
            assert isinstance(item, SessionMessage)
            assert isinstance(item.message, types.JSONRPCNotification)
            assert item.message.params == {"level": "info", "data": "hi"}
            assert not health.lost.is_set()


@pytest.mark.e2e
async def test_a_stdout_line_growing_past_the_cap_loses_the_transport_before_the_line_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("supervisor.upstream.stdio._MAX_LINE_BYTES", 1024 * 1024)
    # A line that never ends: only a cap enforced while the line grows can notice it.
    code = "import sys\nblock = b'x' * 65536\nwhile True: sys.stdout.buffer.write(block)\n"
    health = TransportHealth()
    with trio.fail_after(BOUND_SEC):
        async with open_stdio_transport(_server(code), health):
            await health.lost.wait()
    assert health.reason == "stdout line longer than 1048576 bytes"


def _listing_line(count: int, request_id: str = "7") -> bytes:
    schema = '{"type":"object","properties":{"name":{"type":"string"}}}'
    tools = ",".join(f'{{"name":"t_{i}","inputSchema":{schema}}}' for i in range(count))
    return f'{{"jsonrpc":"2.0","id":{request_id},"result":{{"tools":[{tools}]}}}}'.encode()


def test_a_huge_listing_line_is_answered_with_an_error_from_a_count_not_a_parse() -> None:
    refused = json.loads(screen_oversized_listing(_listing_line(100_000), 2000))
    assert refused["id"] == 7
    assert refused["error"]["message"] == (
        "a listing of 100000 entries exceeds max_tools = 2000 (refused before parsing)"
    )
    assert json.loads(screen_oversized_listing(_listing_line(50, '"abc"'), 10))["id"] == "abc"


def test_a_listing_within_the_limit_and_any_other_line_pass_unchanged() -> None:
    line = _listing_line(2000)
    assert screen_oversized_listing(line, 2000) is line
    assert screen_oversized_listing(b'{"jsonrpc":"2.0","method":"x"}', 0) == b'{"jsonrpc":"2.0","method":"x"}'
