"""``host.stdio.tasks``: a stdio host's fast-path call, run off the host wire, not by the SDK's server.

In-process: the host wire is a memory stream, the call's upstream a fake
behind the driver (``ToolCalls.run``: the fast path's own code is the SDK
path's, tested there), routed to a 2026-era server over HTTP (no splice), so
``path_of`` says ``"fast"`` for a host of either era. End to end, with a real
host and server: ``tests/e2e/test_fidelity_routing.py``'s
``test_a_hosts_calls_to_a_2026_http_server_take_our_own_post…``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest
import trio
import trio.testing
from mcp import MCPError, types
from mcp.server.connection import Connection
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INVALID_PARAMS,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)

from supervisor.host.pipeline.call import ToolCall
from supervisor.host.stdio.reader import HostSplice
from supervisor.telemetry.spans import TELEMETRY
from supervisor.wire.codec import BIG_LINE_BYTES
from tests.fakes import SpliceFront, SpliceTracker
from tests.sidecar import scaled

BOUND_SEC = scaled(10)
ENVELOPE = {
    PROTOCOL_VERSION_META_KEY: "2026-07-28",
    CLIENT_INFO_META_KEY: {"name": "host", "version": "1"},
    CLIENT_CAPABILITIES_META_KEY: {},
}
RESULT = {"content": [{"type": "text", "text": "hi"}], "resultType": "complete"}


class _ToolCalls:
    """The driver (``ToolCalls.run``) as the fake upstream plays it: each call waits for the test to answer it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, dict[str, Any] | None]] = []
        self.started = trio.Event()
        self.answer: trio.Event = trio.Event()
        self.result: dict[str, Any] | Exception = RESULT
        self.cancelled = False
        self.log_first = False
        self.progress_first = False

    async def run(self, call: ToolCall) -> Any:
        assert call.origin in ("stdio", "http")  # a front's own task read it
        ctx = call.host
        self.calls.append((ctx, call.arguments))
        self.started.set()
        if self.log_first:  # what ``HostCall.send_log`` sends for an upstream's log message of the call
            params = types.LoggingMessageNotificationParams(level="info", data="working")
            notice = types.LoggingMessageNotification(params=params)
            await ctx.session.send_notification(notice, related_request_id=ctx.request_id)
        if self.progress_first:  # what ``HostCall.report_progress`` does for an upstream's progress notice
            await ctx.session.report_progress(0.5, 1.0, "half")
        try:
            await self.answer.wait()
        except trio.Cancelled:
            self.cancelled = True
            raise
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


class _Front(SpliceFront):
    """What the splice and the fast calls ask of the Front: one tool, on a server over HTTP (no splice)."""

    def __init__(self) -> None:
        super().__init__()
        self.tool_calls = _ToolCalls()
        self.shutting_down = False
        tool = SimpleNamespace(source=SimpleNamespace(output_schema=None), owner="fx", raw_name="echo")
        self._routed = (tool, SimpleNamespace(ready_upstream=SimpleNamespace(splice=None, modern=True)))

    def route(self, name: str) -> Any:
        return self._routed if name == "mcp__fx__echo" else None


def _call(request_id: int = 7, /, text: str = "hi", **meta: Any) -> bytes:
    params = {"name": "mcp__fx__echo", "arguments": {"text": text}, "_meta": {**ENVELOPE, **meta}}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


@asynccontextmanager
async def _wired(front: _Front, tracker: SpliceTracker) -> AsyncIterator[tuple[HostSplice, Any]]:
    """A host splice on a memory host wire, its fast calls in a nursery of the test's."""
    splice = HostSplice(cast(Any, front), tracker)
    send, receive = anyio.create_memory_object_stream[Any](16)
    with send, receive:
        async with trio.open_nursery() as nursery:
            splice.attach(send.clone())
            splice.fast.nursery = nursery
            yield splice, receive
            splice.attach(None)


async def test_a_plain_call_to_an_http_server_is_run_off_the_wire_and_its_answer_is_one_line() -> None:
    front, tracker = _Front(), SpliceTracker()
    with trio.fail_after(BOUND_SEC):
        async with _wired(front, tracker) as (splice, wire):
            assert splice.on_line(_call()) is True  # the SDK's server never sees it
            await front.tool_calls.started.wait()
            front.tool_calls.answer.set()
            line = await wire.receive()
    assert json.loads(line) == {"jsonrpc": "2.0", "id": 7, "result": RESULT} and line.endswith(b"\n")
    ((ctx, arguments),) = front.tool_calls.calls
    assert arguments == {"text": "hi"} and ctx.request_id == 7 and ctx.protocol_version == "2026-07-28"
    assert splice.taken == {"fast": 1} and tracker.settled == [7] and not splice.fast.running


async def test_a_large_calls_arguments_reach_the_call_whole() -> None:
    front, tracker = _Front(), SpliceTracker()
    front.tool_calls.answer.set()
    text = "x" * (2 * BIG_LINE_BYTES)  # the splice reads such a line's envelope only (``wire.codec.load``)
    with trio.fail_after(BOUND_SEC):
        async with _wired(front, tracker) as (splice, wire):
            assert splice.on_line(_call(text=text))
            assert json.loads(await wire.receive())["id"] == 7
    ((_, arguments),) = front.tool_calls.calls
    assert arguments == {"text": text}


async def test_a_calls_log_messages_go_on_the_wire_before_its_answer() -> None:
    front, tracker = _Front(), SpliceTracker()
    front.tool_calls.log_first = True
    with trio.fail_after(BOUND_SEC):
        async with _wired(front, tracker) as (splice, wire):
            assert splice.on_line(_call(**{LOG_LEVEL_META_KEY: "info"}))
            notice = json.loads(await wire.receive())
            front.tool_calls.answer.set()
            answer = json.loads(await wire.receive())
    assert notice["method"] == "notifications/message" and notice["params"]["data"] == "working"
    assert answer["id"] == 7 and answer["result"] == RESULT


@pytest.mark.parametrize("handshake", [False, True], ids=["2026-host", "handshake-host"])
async def test_a_calls_progress_goes_on_the_wire_against_the_hosts_token_before_its_answer(handshake: bool) -> None:
    """A progress token keeps the call here (issue 47): its notices take the call's own channel."""
    front, tracker = _Front(), SpliceTracker()
    front.tool_calls.progress_first = True
    if handshake:
        _handshake(front)
    with trio.fail_after(BOUND_SEC):
        async with _wired(front, tracker) as (splice, wire):
            if handshake:
                splice.handshake_version = HANDSHAKE
            assert splice.on_line(_bare_call(progressToken="p-1") if handshake else _call(progressToken="p-1"))
            notice = json.loads(await wire.receive())
            front.tool_calls.answer.set()
            answer = json.loads(await wire.receive())
    assert notice == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "p-1", "progress": 0.5, "total": 1.0, "message": "half"},
    }
    assert answer["id"] == 7 and answer["result"] == RESULT and splice.taken == {"fast": 1}


async def test_the_hosts_cancel_ends_the_call_unanswered() -> None:
    front, tracker = _Front(), SpliceTracker()
    with trio.fail_after(BOUND_SEC):
        async with _wired(front, tracker) as (splice, wire):
            assert splice.on_line(_call())
            await front.tool_calls.started.wait()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            assert splice.on_line(json.dumps(cancel).encode()) is True  # the SDK does not know the call
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(anyio.WouldBlock):
                wire.receive_nowait()  # JSON-RPC wants no answer to a cancelled request
    assert front.tool_calls.cancelled and tracker.settled == [7]


async def test_what_the_call_raises_is_the_sdk_runners_error() -> None:
    front, tracker = _Front(), SpliceTracker()
    front.tool_calls.result = MCPError(INVALID_PARAMS, "no such tool", None)
    front.tool_calls.answer.set()
    with trio.fail_after(BOUND_SEC):
        async with _wired(front, tracker) as (splice, wire):
            assert splice.on_line(_call())
            answer = json.loads(await wire.receive())
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": {"code": INVALID_PARAMS, "message": "no such tool"}}


@pytest.mark.parametrize(
    "line",
    [
        _call(**{PROTOCOL_VERSION_META_KEY: "1999-01-01"}),  # the ladder refuses it: the SDK answers why
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "mcp__fx__echo"}}).encode(),
    ],
    ids=["unsupported version", "no envelope"],
)
async def test_calls_it_does_not_take_are_the_sdks(line: bytes) -> None:
    front, tracker = _Front(), SpliceTracker()
    front.tool_calls.answer.set()
    async with _wired(front, tracker) as (splice, _):
        assert splice.on_line(line) is False
    assert splice.taken == {"sdk": 1} and front.tool_calls.calls == []


async def test_telemetry_on_and_trace_context_keep_a_call_here_and_only_a_stopped_link_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Telemetry is a stage of the call, not a reason to leave for the SDK's server (issue 47)."""
    front, tracker = _Front(), SpliceTracker()
    front.tool_calls.answer.set()
    async with _wired(front, tracker) as (splice, _):
        monkeypatch.setattr(TELEMETRY, "on", True)
        assert splice.on_line(_call(1, traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01")) is True
        monkeypatch.setattr(TELEMETRY, "on", False)
        splice.fast.nursery = None  # the link stopped serving
        assert splice.on_line(_call(2)) is False
    assert splice.taken == {"fast": 1, "sdk": 1}


# -- a handshake-era host ----------------------------------------------------------------------------

HANDSHAKE = "2025-11-25"


class _HostChannel:
    """The connection's own channel (the SDK's dispatcher on the host wire): what a call's question goes through."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []

    async def send_raw_request(self, method: str, params: Any, opts: Any = None) -> dict[str, Any]:
        self.asked.append((method, params))
        return {"roots": []}

    async def notify(self, method: str, params: Any, opts: Any = None) -> None:
        raise AssertionError("a call's notices go on the host wire in order with its answer, not here")


def _handshake(front: _Front) -> _HostChannel:
    channel = _HostChannel()
    front.handshake_connection = Connection(cast(Any, channel), protocol_version=HANDSHAKE)
    return channel


def _bare_call(request_id: int = 7, /, **meta: Any) -> bytes:
    params: dict[str, Any] = {"name": "mcp__fx__echo", "arguments": {"text": "hi"}}
    if meta:
        params["_meta"] = meta
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


async def test_a_handshake_hosts_call_runs_on_its_connection_its_notices_and_question_in_order_with_its_answer() -> (
    None
):
    front, tracker = _Front(), SpliceTracker()
    channel = _handshake(front)
    front.tool_calls.log_first = True
    traceparent = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    with trio.fail_after(BOUND_SEC):
        async with _wired(front, tracker) as (splice, wire):
            splice.handshake_version = HANDSHAKE
            assert splice.on_line(_bare_call(traceparent=traceparent)) is True
            notice = json.loads(await wire.receive())
            ((ctx, _),) = front.tool_calls.calls
            roots = await ctx.session.send_request(
                types.ListRootsRequest(), types.ListRootsResult, metadata=ServerMessageMetadata(related_request_id=7)
            )
            front.tool_calls.answer.set()
            answer = json.loads(await wire.receive())
    assert notice["method"] == "notifications/message" and notice["params"]["data"] == "working"
    assert answer == {"jsonrpc": "2.0", "id": 7, "result": RESULT}
    assert ctx.protocol_version == HANDSHAKE and ctx.request_id == 7 and ctx.meta == {"traceparent": traceparent}
    assert channel.asked == [("roots/list", None)] and roots == types.ListRootsResult(roots=[])
    assert splice.taken == {"fast": 1} and tracker.settled == [7]


@pytest.mark.parametrize(
    ("raised", "error"),
    [
        (MCPError(INVALID_PARAMS, "no such tool", None), {"code": INVALID_PARAMS, "message": "no such tool"}),
        (RuntimeError("it broke"), {"code": 0, "message": "it broke"}),  # the dispatcher's catch-all, not the runner's
    ],
    ids=["an MCP error", "anything else"],
)
async def test_what_a_handshake_hosts_call_raises_is_the_sdk_dispatchers_error(
    raised: Exception, error: dict[str, Any]
) -> None:
    front, tracker = _Front(), SpliceTracker()
    _handshake(front)
    front.tool_calls.result = raised
    front.tool_calls.answer.set()
    with trio.fail_after(BOUND_SEC):
        async with _wired(front, tracker) as (splice, wire):
            splice.handshake_version = HANDSHAKE
            assert splice.on_line(_bare_call())
            answer = json.loads(await wire.receive())
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": error}


async def test_a_handshake_hosts_call_before_its_connection_is_known_or_with_other_meta_is_the_sdks() -> None:
    front, tracker = _Front(), SpliceTracker()
    front.tool_calls.answer.set()
    async with _wired(front, tracker) as (splice, _):
        splice.handshake_version = HANDSHAKE
        assert splice.on_line(_bare_call(1)) is False  # the SDK has not answered its initialize yet
        _handshake(front)
        assert splice.on_line(_bare_call(2, custom=1)) is False  # _meta of its own: the SDK's
        assert splice.on_line(_bare_call(3, **{LOG_LEVEL_META_KEY: "info"})) is False
    assert splice.taken == {"sdk": 3} and front.tool_calls.calls == []
