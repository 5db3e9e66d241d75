"""The HTTP front's own answer to a plain 2026 ``tools/call`` (``host.http.posts``), over raw ASGI.

The Front and the SDK's app are fakes behind the ASGI seam: each test sends
one POST as hypercorn would and checks who answered it and how. Which POSTs
it takes is the module's list, one case per condition; everything else must
reach the SDK's app with its body intact. End to end, with a real host and
upstream: ``test_http_front.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, Final

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INVALID_PARAMS,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)

from supervisor.host.http.answers import PING_SEC
from supervisor.host.http.posts import HttpFastCalls
from supervisor.host.pipeline.call import ToolCall
from supervisor.telemetry.spans import TELEMETRY

MODERN: Final = "2026-07-28"
ENVELOPE: Final = {
    PROTOCOL_VERSION_META_KEY: MODERN,
    CLIENT_INFO_META_KEY: {"name": "host", "version": "1"},
    CLIENT_CAPABILITIES_META_KEY: {"sampling": {}},
}
HEADERS: Final = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": MODERN,
    "mcp-method": "tools/call",
    "mcp-name": "mcp__fx__echo",
}
LIMIT: Final = 4096


def _body(**changes: Any) -> dict[str, Any]:
    params = {"name": "mcp__fx__echo", "arguments": {"text": "hi"}, "_meta": dict(ENVELOPE)}
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params, **changes}


class _FakeFront:
    """What ``HttpFastCalls`` reads of a Front: its routes and the fast path's runner."""

    def __init__(self, call: Any = None, schema: dict[str, Any] | None = None) -> None:
        definition = SimpleNamespace(input_schema=schema or {"type": "object"})
        self.tool = SimpleNamespace(source=SimpleNamespace(output_schema=None), definition=definition)
        self.actor = SimpleNamespace(ready_upstream=SimpleNamespace(splice=None))
        self.contexts: list[Any] = []
        self._call = call
        self.tool_calls = self

    def route(self, name: str) -> Any:
        return (self.tool, self.actor) if name == "mcp__fx__echo" else None

    async def run(self, call: ToolCall) -> dict[str, Any]:
        assert call.origin == "http"
        ctx, arguments = call.host, call.arguments or {}
        self.contexts.append(ctx)
        if self._call is not None:
            result: dict[str, Any] = await self._call(arguments)
            return result
        return {"content": [{"type": "text", "text": arguments["text"]}], "resultType": "complete"}


class _FakeSdk:
    """The SDK's app: records what reached it, the body as it read it."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b"sdk", "more_body": False})


async def _post(
    front: _FakeFront,
    body: bytes,
    headers: dict[str, str] = HEADERS,
    *,
    chunk: int = 0,
    hang_up: bool = False,
    watch: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[HttpFastCalls, _FakeSdk, list[dict[str, Any]]]:
    """POST ``body`` to a fresh ``HttpFastCalls`` over ``front``: what it sent (each message also to ``watch``)."""
    sdk = _FakeSdk()
    app = HttpFastCalls(front, sdk, LIMIT)  # type: ignore[arg-type]
    scope = {"type": "http", "method": "POST", "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
    parts = [body[i : i + chunk] for i in range(0, len(body), chunk)] if chunk else [body]
    incoming: list[dict[str, Any]] = [
        {"type": "http.request", "body": part, "more_body": index < len(parts) - 1} for index, part in enumerate(parts)
    ]
    gone = trio.Event()

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        if hang_up:
            return {"type": "http.disconnect"}
        await gone.wait()  # the host stays until the answer is written
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if watch is not None:
            watch(message)

    await app(scope, receive, send)  # type: ignore[arg-type]
    return app, sdk, sent


def _json_answer(sent: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    start, body = sent
    assert (b"content-type", b"application/json") in start["headers"]
    return start["status"], json.loads(body["body"])


async def test_a_plain_2026_call_is_answered_here_with_the_envelope_as_its_context() -> None:
    front = _FakeFront()
    app, sdk, sent = await _post(front, json.dumps(_body()).encode())
    status, answer = _json_answer(sent)
    assert status == 200 and answer == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"content": [{"type": "text", "text": "hi"}], "resultType": "complete"},
    }
    assert sdk.bodies == [] and app.taken == {"fast": 1}
    (ctx,) = front.contexts
    assert (ctx.protocol_version, ctx.request_id, ctx.method) == (MODERN, 7, "tools/call")
    assert ctx.session.client_capabilities.sampling is not None  # the host's, from its envelope


@pytest.mark.parametrize("telemetry", [False, True], ids=["telemetry-off", "telemetry-on"])
async def test_a_call_with_trace_context_is_answered_here_whether_telemetry_is_on_or_off(
    telemetry: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Telemetry is a stage of the call, not a reason to leave for the SDK's app (issue 47)."""
    monkeypatch.setattr(TELEMETRY, "on", telemetry)
    front = _FakeFront()
    meta = {**ENVELOPE, "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    body = json.dumps(_body(params={"name": "mcp__fx__echo", "arguments": {"text": "hi"}, "_meta": meta}))
    app, sdk, sent = await _post(front, body.encode())
    assert _json_answer(sent)[0] == 200
    assert sdk.bodies == [] and app.taken == {"fast": 1}
    (ctx,) = front.contexts
    assert ctx.meta["traceparent"] == meta["traceparent"], "the host's context reaches the call's stages"


def _without(name: str) -> dict[str, str]:
    return {k: v for k, v in HEADERS.items() if k != name}


BODY: Final = json.dumps(_body()).encode()
PASSED_ON: Final = [
    pytest.param(BODY, _without("mcp-method"), id="no-mcp-method"),
    pytest.param(BODY, {**HEADERS, "mcp-protocol-version": "2025-11-25"}, id="handshake-version"),
    pytest.param(BODY, {**HEADERS, "mcp-session-id": "s"}, id="session"),
    pytest.param(BODY, {**HEADERS, "mcp-param-text": "hi"}, id="mcp-param-header"),
    pytest.param(BODY, {**HEADERS, "accept": "application/json"}, id="accepts-json-only"),
    pytest.param(BODY, {**HEADERS, "content-type": "text/plain"}, id="not-json-content"),
    pytest.param(BODY, {**HEADERS, "mcp-name": "mcp__fx__other"}, id="name-header-mismatch"),
    pytest.param(b"{not json", HEADERS, id="not-json"),
    pytest.param(json.dumps([_body()]).encode(), HEADERS, id="batch"),
    pytest.param(json.dumps(_body(method="tools/list")).encode(), HEADERS, id="other-method"),
    pytest.param(json.dumps({k: v for k, v in _body().items() if k != "id"}).encode(), HEADERS, id="no-id"),
    pytest.param(json.dumps(_body(id=True)).encode(), HEADERS, id="bool-id"),
    pytest.param(
        json.dumps(_body(params={"name": "mcp__fx__echo", "inputResponses": [1], "_meta": ENVELOPE})).encode(),
        HEADERS,
        id="a-retry-the-sdks-model-refuses",
    ),
    pytest.param(
        json.dumps(_body(params={"name": "mcp__fx__nope", "_meta": ENVELOPE})).encode(),
        {**HEADERS, "mcp-name": "mcp__fx__nope"},
        id="not-routed",
    ),
]


@pytest.mark.parametrize(("body", "headers"), PASSED_ON)
async def test_every_other_post_reaches_the_sdks_app_with_its_body_whole(body: bytes, headers: dict[str, str]) -> None:
    front = _FakeFront()
    app, sdk, sent = await _post(front, body, headers)
    assert sdk.bodies == [body] and front.contexts == []
    assert app.taken == {"sdk": 1} and sent[0]["status"] == 299


async def test_a_body_over_the_limit_reaches_the_sdk_whole_for_its_413() -> None:
    body = json.dumps(_body(params={"name": "mcp__fx__echo", "arguments": {"text": "x" * LIMIT}})).encode()
    _, sdk, _ = await _post(_FakeFront(), body, chunk=1000)
    assert sdk.bodies == [body]


async def test_a_tool_that_mirrors_arguments_into_headers_is_the_sdks_to_check() -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string", "x-mcp-header": "Text"}}}
    app, sdk, _ = await _post(_FakeFront(schema=schema), BODY)
    assert sdk.bodies == [BODY] and app.taken == {"sdk": 1}


@pytest.mark.parametrize(("code", "status"), [(INVALID_PARAMS, 400), (-32042, 200)])
async def test_a_json_rpc_error_of_the_call_is_its_error_answer_with_the_sdks_status(code: int, status: int) -> None:
    async def fail(arguments: Any) -> dict[str, Any]:
        raise MCPError(code, "no", {"why": 1})

    _, _, sent = await _post(_FakeFront(fail), BODY)
    got_status, answer = _json_answer(sent)
    assert got_status == status
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": {"code": code, "message": "no", "data": {"why": 1}}}


async def test_a_host_that_hangs_up_cancels_its_call_and_gets_no_answer() -> None:
    cancelled = trio.Event()

    async def hang(arguments: Any) -> dict[str, Any]:
        try:
            await trio.Event().wait()  # a call that never ends on its own
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    with trio.fail_after(5):
        _, _, sent = await _post(_FakeFront(hang), BODY, hang_up=True)
    assert cancelled.is_set() and sent == []


async def test_a_calls_log_messages_turn_its_answer_into_an_event_stream_in_order() -> None:
    async def logs(arguments: Any) -> dict[str, Any]:
        (ctx,) = front.contexts
        assert ctx.meta[LOG_LEVEL_META_KEY] == "info"  # what HostCall.log_level reads
        for text in ("one", "two"):
            log = types.LoggingMessageNotificationParams(level="info", data=text)
            await ctx.session.send_notification(types.LoggingMessageNotification(params=log), related_request_id=7)
        return {"content": [], "resultType": "complete"}

    front = _FakeFront(logs)
    body = json.dumps(_body(params={"name": "mcp__fx__echo", "_meta": {**ENVELOPE, LOG_LEVEL_META_KEY: "info"}}))
    app, sdk, sent = await _post(front, body.encode())
    assert app.taken == {"fast": 1} and sdk.bodies == []
    start, *events = sent
    assert (b"content-type", b"text/event-stream") in start["headers"]
    messages = [json.loads(e["body"].removeprefix(b"event: message\r\ndata: ")) for e in events]
    assert [m.get("params", {}).get("data") for m in messages[:2]] == ["one", "two"]
    assert [m.get("method") for m in messages[:2]] == ["notifications/message"] * 2
    assert messages[2] == {"jsonrpc": "2.0", "id": 7, "result": {"content": [], "resultType": "complete"}}
    assert [e["more_body"] for e in events] == [True, True, False]


async def test_a_calls_progress_rides_its_answers_event_stream_against_the_hosts_token() -> None:
    """A progress token keeps the call here (issue 47): its notices are events of the call's own response."""

    async def progress(arguments: Any) -> dict[str, Any]:
        (ctx,) = front.contexts
        await ctx.session.report_progress(1, 2, "one of two")  # what HostCall.report_progress does
        return {"content": [], "resultType": "complete"}

    front = _FakeFront(progress)
    body = json.dumps(_body(params={"name": "mcp__fx__echo", "_meta": {**ENVELOPE, "progressToken": 42}}))
    app, sdk, sent = await _post(front, body.encode())
    assert app.taken == {"fast": 1} and sdk.bodies == []
    start, *events = sent
    assert (b"content-type", b"text/event-stream") in start["headers"]
    messages = [json.loads(e["body"].removeprefix(b"event: message\r\ndata: ")) for e in events]
    assert messages[0] == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 42, "progress": 1, "total": 2, "message": "one of two"},
    }
    assert messages[1]["id"] == 7 and "result" in messages[1]


async def test_a_silent_call_commits_to_an_event_stream_and_pings_until_its_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pings: list[float] = []
    pinged_twice = trio.Event()
    started = trio.current_time()

    def watch(message: dict[str, Any]) -> None:
        if message.get("body") == b": ping\r\n\r\n":
            pings.append(trio.current_time() - started)
            if len(pings) == 2:
                pinged_twice.set()

    async def slow(arguments: Any) -> dict[str, Any]:
        await pinged_twice.wait()  # silent until the front has pinged twice (the clock jumps to each ping)
        return {"content": [], "resultType": "complete"}

    _, _, sent = await _post(_FakeFront(slow), BODY, watch=watch)
    assert pings == [pytest.approx(PING_SEC), pytest.approx(2 * PING_SEC)]
    start, *middle, last = sent
    assert start["status"] == 200 and (b"content-type", b"text/event-stream") in start["headers"]
    assert [p["body"] for p in middle] == [b": ping\r\n\r\n"] * 2
    assert last["more_body"] is False and last["body"].startswith(b"event: message\r\ndata: ")
    assert json.loads(last["body"].removeprefix(b"event: message\r\ndata: "))["result"] == {
        "content": [],
        "resultType": "complete",
    }
