"""The stdio front's prelude (issue 57): a host's first answers before the SDK is imported, the rest left in order.

In process over real pipes (no process): the test writes the host's lines into
one pipe, reads the prelude's answers from another, and takes the hand-over as
the stdio link does. What the prelude answers is exactly what the Front would
(``tests/host/test_capabilities.py`` holds its builders to the SDK's); what it
cannot answer exactly, it leaves to the Front, in order.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from supervisor.catalog.disk import ALL_FACTS, ViewFacts, ViewSnapshot, answer_digest
from supervisor.host.capabilities import instructions
from supervisor.host.stdio.prelude import REPLAYED_INITIALIZE_ID, Handover, Prelude, PreludeAnswer
from supervisor.wire.host_pipes import READ_CHUNK_BYTES, HostPipes
from supervisor.wire.pipes import PipeReader
from tests.sidecar import wait_until

BOUND_SEC = 10.0
TOOLS = '{"tools":[{"name":"demo__echo","inputSchema":{"type":"object"}}]}'
MODERN_TOOLS = '{"tools":[],"resultType":"complete"}'
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "h", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
NO_RESOURCES = ViewFacts(prompts=False, resources=False, templates=False)


def _snapshot(expires_in_sec: float = 60) -> ViewSnapshot:
    answers = {"tools/list": {"2025-11-25": TOOLS, "2026-07-28": MODERN_TOOLS}}
    return ViewSnapshot("", "key", NO_RESOURCES, answers, {"tools/list": time.time() + expires_in_sec})


def _initialize(request_id: int = 1, version: str = "2025-06-18") -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


class _Host:
    """The host's ends of the two pipes."""

    def __init__(self, to_prelude: int, from_prelude: int) -> None:
        self._to = to_prelude
        self._from = trio.lowlevel.FdStream(from_prelude)
        self._buffer = b""
        self.closed = False

    def send(self, *messages: dict[str, Any] | bytes) -> None:
        data = b"".join(m if isinstance(m, bytes) else json.dumps(m).encode() + b"\n" for m in messages)
        os.write(self._to, data)

    def hang_up(self) -> None:
        os.close(self._to)
        self.closed = True

    async def aclose(self) -> None:
        await self._from.aclose()
        if not self.closed:
            self.hang_up()

    async def answer(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            self._buffer += await self._from.receive_some()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message


async def _handled(prelude: Prelude, lines: int) -> None:
    """Until the prelude has read and handled ``lines`` lines (answered them, or kept them for the Front)."""
    await wait_until(lambda: prelude.handled >= lines, what=f"{lines} line(s) handled", bound_sec=BOUND_SEC)


def _front_gets(handover: Handover) -> list[bytes]:
    """Every line the Front goes on with: the prelude's, then what is still in its line buffer and the pipe.

    The hand-over may come before the prelude has read all that the host wrote; the Front reads the rest.
    """
    pipes = handover.pipes
    while True:
        try:
            chunk = os.read(pipes.wire_in.fileno(), READ_CHUNK_BYTES)
        except BlockingIOError:
            break
        if not chunk:
            break
        pipes.lines.feed(chunk)
    rest = []
    while (line := pipes.lines.next_line()) is not None:
        rest.append(line)
    return [*handover.lines, *rest]


@asynccontextmanager
async def _prelude(snapshot: ViewSnapshot | None = None) -> AsyncIterator[tuple[Prelude, _Host]]:
    host_out, prelude_in = os.pipe()
    prelude_out, host_in = os.pipe()
    wire_in = trio.lowlevel.FdStream(host_out)
    pipes = HostPipes(wire_in, trio.lowlevel.FdStream(host_in), PipeReader(wire_in, READ_CHUNK_BYTES))
    host = _Host(prelude_in, prelude_out)
    facts = snapshot.facts if snapshot is not None else ALL_FACTS
    prelude = Prelude(pipes, facts, instructions(""), snapshot)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(prelude.run)
            yield prelude, host
            prelude.stop()
    for stream in (pipes.wire_in, pipes.wire_out):
        await stream.aclose()
    await host.aclose()


async def test_initialize_is_answered_at_once_and_replayed_to_the_front_under_its_own_id() -> None:
    async with _prelude() as (prelude, host):
        host.send(_initialize(7), {"jsonrpc": "2.0", "method": "notifications/initialized"})
        answer = await host.answer()
        await _handled(prelude, 2)
        assert answer["id"] == 7
        assert answer["result"]["protocolVersion"] == "2025-06-18"
        assert answer["result"]["serverInfo"]["name"] == "mcp-supervisor"
        assert set(answer["result"]["capabilities"]) == {"completions", "logging", "prompts", "resources", "tools"}
        handover = await prelude.hand_over()
        front_gets = handover.lines
    replayed, initialized = (json.loads(line) for line in front_gets)
    assert replayed == {**_initialize(7), "id": REPLAYED_INITIALIZE_ID}
    assert initialized["method"] == "notifications/initialized"
    assert handover.handshake_version == "2025-06-18"


async def test_an_unknown_version_is_negotiated_to_the_latest_and_a_second_initialize_goes_to_the_front() -> None:
    async with _prelude() as (prelude, host):
        host.send(_initialize(1, "1999-01-01"))
        assert (await host.answer())["result"]["protocolVersion"] == "2025-11-25"
        host.send(_initialize(2))
        await _handled(prelude, 2)
        handover = await prelude.hand_over()
        front_gets = handover.lines
    assert [json.loads(line)["id"] for line in front_gets] == [REPLAYED_INITIALIZE_ID, 2]
    assert prelude.answers == 1


async def test_an_initialize_the_sdk_might_refuse_is_left_to_it() -> None:
    async with _prelude() as (prelude, host):
        broken = {**_initialize(), "params": {"protocolVersion": 5}}
        host.send(broken, b"not json\n")
        await _handled(prelude, 2)
        handover = await prelude.hand_over()
        front_gets = handover.lines
    assert front_gets == [json.dumps(broken).encode(), b"not json"]
    assert handover.handshake_version is None


async def test_a_first_page_list_is_answered_from_a_fresh_snapshot_in_the_negotiated_version() -> None:
    async with _prelude(_snapshot()) as (prelude, host):
        host.send(_initialize(1, "2025-11-25"), {"jsonrpc": "2.0", "id": "l", "method": "tools/list"})
        init = await host.answer()
        assert set(init["result"]["capabilities"]) == {"logging", "tools"}, "the snapshot's facts: no resources"
        listed = await host.answer()
        assert listed == {"jsonrpc": "2.0", "id": "l", "result": json.loads(TOOLS)}
        handover = await prelude.hand_over()
    assert handover.answered == (PreludeAnswer("tools", "2025-11-25", answer_digest(TOOLS)),)


async def test_a_list_the_snapshot_cannot_answer_exactly_waits_for_the_front() -> None:
    async with _prelude(_snapshot(expires_in_sec=-1)) as (prelude, host):
        host.send(_initialize(1, "2025-11-25"))
        await host.answer()
        stale = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        host.send(stale)
        await _handled(prelude, 2)
        handover = await prelude.hand_over()
        front_gets = handover.lines
    assert json.loads(front_gets[-1]) == stale
    assert handover.answered == ()


async def test_a_cursor_an_unknown_version_or_no_handshake_leaves_the_list_to_the_front() -> None:
    async with _prelude(_snapshot()) as (prelude, host):
        before_handshake = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        host.send(before_handshake, _initialize(2, "2025-11-25"))
        await host.answer()
        cursor = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "c"}}
        host.send(cursor)
        await _handled(prelude, 3)
        handover = await prelude.hand_over()
        front_gets = handover.lines
    assert [json.loads(line)["id"] for line in front_gets] == [1, REPLAYED_INITIALIZE_ID, 3]


async def test_a_2026_era_host_gets_discover_and_its_list_from_the_snapshot() -> None:
    async with _prelude(_snapshot()) as (prelude, host):
        host.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}})
        discovered = await host.answer()
        assert discovered["result"]["supportedVersions"] == ["2026-07-28"]
        host.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": ENVELOPE}})
        assert (await host.answer())["result"] == json.loads(MODERN_TOOLS)
        extra = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {**ENVELOPE, "x": 1}}}
        host.send(extra)
        await _handled(prelude, 3)
        handover = await prelude.hand_over()
        front_gets = handover.lines
    assert [json.loads(line) for line in front_gets] == [extra]
    assert handover.handshake_version is None


async def test_the_hand_over_comes_at_a_line_boundary_and_leaves_a_partial_line_to_the_front() -> None:
    async with _prelude() as (prelude, host):
        host.send(_initialize(1), b'{"jsonrpc":"2.0","id":2,"me')
        await host.answer()
        handover = await prelude.hand_over()
        assert [json.loads(line)["id"] for line in handover.lines] == [REPLAYED_INITIALIZE_ID]
        host.send(b'thod":"ping"}\n')
        assert json.loads(_front_gets(handover)[-1]) == {"jsonrpc": "2.0", "id": 2, "method": "ping"}


async def test_a_host_that_hangs_up_owing_no_answer_is_gone_one_owed_an_answer_is_not() -> None:
    async with _prelude(_snapshot()) as (prelude, host):
        host.send(_initialize(1, "2025-11-25"), {"jsonrpc": "2.0", "method": "notifications/initialized"})
        await host.answer()
        host.hang_up()
        await prelude.host_gone.wait()
    async with _prelude() as (prelude, host):
        host.send(_initialize(1), {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x"}})
        await host.answer()
        host.hang_up()
        handover = await prelude.hand_over()
        front_gets = handover.lines
        assert not prelude.host_gone.is_set()
    assert json.loads(front_gets[-1])["method"] == "tools/call"
