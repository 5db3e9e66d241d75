"""A handshake-era session's plain call on the splice's HTTP half (``host.http.sessions``), in-process.

Through ``HttpFastCalls`` over raw ASGI, with a real session of a real SDK
session manager (opened by an ``initialize`` POST, as in
``tests/compat/test_sdk_sessions.py``) and a real handshake-era
``UpstreamSplice`` whose stdin the test reads and whose stdout pump it plays
(``test_http_splice._Upstream``). Its server's questions mid-call:
``test_http_handshake_questions.py``; a call run by its POST off the splice:
``test_http_handshake_fast.py``. End to end, with a real host and server:
``test_http_handshake_calls.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
import pytest
import trio
import trio.testing
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import (
    INVALID_PARAMS,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)

from supervisor.calls.attribution import CallTracker
from supervisor.compat.sdk_sessions import live_session
from supervisor.host.http.posts import HttpFastCalls
from tests.compat.test_sdk_sessions import _initialize
from tests.host import detaching
from tests.host.test_http_fast_calls import LIMIT, _FakeSdk
from tests.host.test_http_splice import _Front, _Upstream
from tests.sidecar import scaled

HANDSHAKE: Final = "2025-11-25"
BOUND_SEC: Final = scaled(5)


class _HandshakeFront(_Front):
    """``_Front`` with what a handshake-era session's call reads of a Front: its session and its calls in flight."""

    def __init__(self, upstream: _Upstream, session_id: str, *, initialized: bool = True) -> None:
        super().__init__(upstream)
        self.calls = CallTracker()
        self.connection = Connection(None, protocol_version=HANDSHAKE, session_id=session_id)  # type: ignore[arg-type]
        self._session_id = session_id
        self._initialized = initialized

    def http_session(self, session_id: str) -> Connection | None:
        return self.connection if self._initialized and session_id == self._session_id else None

    def connection_log_level(self, connection: Connection) -> str:
        return "warning"  # what the session set with logging/setLevel


class _Host:
    """A handshake-era host on one session: POSTs to the app, each in its own task, and what each got back."""

    def __init__(self, app: HttpFastCalls, session_id: str, nursery: trio.Nursery) -> None:
        self.app = app
        self.session_id = session_id
        self._nursery = nursery

    def headers(self, **changes: str) -> list[tuple[bytes, bytes]]:
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": HANDSHAKE,
            "mcp-session-id": self.session_id,
            **changes,
        }
        return [(k.encode(), v.encode()) for k, v in headers.items()]

    async def post(
        self,
        message: dict[str, Any],
        *,
        hang_up: trio.Event | None = None,
        watch: Any = None,
        headers: dict[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """POST ``message``; what the app sent back (the host stays until the answer, or hangs up at ``hang_up``)."""
        body = json.dumps(message).encode()
        return await detaching.post(self.app, self.headers(**(headers or {})), body, hang_up=hang_up, watch=watch)

    def post_soon(self, message: dict[str, Any], **options: Any) -> Callable[[], list[dict[str, Any]]]:
        """POST in a task of its own; a getter for what it got, once done."""
        got: list[list[dict[str, Any]]] = []

        async def run() -> None:
            got.append(await self.post(message, **options))

        self._nursery.start_soon(run)
        return lambda: got[0]


def _call(request_id: int = 7, **params: Any) -> dict[str, Any]:
    body = {"name": "mcp__fx__echo", "arguments": {"text": "hi"}, **params}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


def _json(sent: list[dict[str, Any]], session_id: str) -> tuple[int, dict[str, Any]]:
    start, body = sent
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json" and headers[b"mcp-session-id"] == session_id.encode()
    return start["status"], json.loads(body["body"])


async def _answered(upstream: _Upstream, request: dict[str, Any], **reply: Any) -> None:
    """The upstream answers ``request`` (``result=`` or ``error=``); returns once the POST's task wrote it."""
    await upstream.answer({"jsonrpc": "2.0", "id": request["id"], **reply})
    await trio.testing.wait_all_tasks_blocked()


def _keeping_events(events: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    """A ``watch`` that keeps the JSON-RPC message of each event the response sends, in order, in ``events``."""

    def watch(message: dict[str, Any]) -> None:
        body = message.get("body", b"")
        if body.startswith(b"event: message\r\ndata: "):
            events.append(json.loads(body.removeprefix(b"event: message\r\ndata: ")))

    return watch


@asynccontextmanager
async def _session(
    make: Callable[..., _Upstream], *, initialized: bool = True, timeout_sec: float = 60.0, modern: bool = False
) -> AsyncIterator[tuple[_Host, _HandshakeFront, _Upstream]]:
    manager = StreamableHTTPSessionManager(app=Server("t"))
    upstream = make(timeout_sec, modern=modern)
    async with manager.run(), trio.open_nursery() as nursery:
        session_id = await _initialize(manager)
        front = _HandshakeFront(upstream, session_id, initialized=initialized)
        sdk = _FakeSdk()
        app = HttpFastCalls(front, sdk, LIMIT, manager)  # type: ignore[arg-type]
        nursery.start_soon(upstream.splice.serve_deadlines)
        yield _Host(app, session_id, nursery), front, upstream
        nursery.cancel_scope.cancel()


async def _playing(upstream_side: Callable[[], Awaitable[None]]) -> None:
    with trio.fail_after(BOUND_SEC):
        await upstream_side()


async def test_a_plain_call_crosses_with_our_id_in_flight_on_its_server_and_its_answer_is_handshake_shaped(
    make_upstream: Callable[..., _Upstream],
) -> None:
    result = {"content": [{"type": "text", "text": "hi"}], "resultType": "complete", "_meta": {SERVER_INFO_META_KEY: 1}}
    with trio.fail_after(BOUND_SEC):
        async with _session(make_upstream) as (host, front, upstream):
            assert host.app.handshake is not None
            transport = live_session(host.app.handshake._manager, host.session_id, None)
            assert transport is not None and transport.idle_scope is not None
            got = host.post_soon(_call())
            request = await upstream.request()
            assert request["id"].startswith("mcp-supervisor/splice/") and "_meta" not in request["params"]
            assert front.calls.in_flight("fx") == 1  # its server may ask its host something: attributed to it
            assert transport.idle_scope.deadline == float("inf")  # the session is held open while the call runs
            await _answered(upstream, request, result=result)
            status, answer = _json(got(), host.session_id)
            assert transport.idle_scope.deadline < float("inf")  # its answer written: the hold is released
            again = host.post_soon(_call())  # the same id, now free again
            await _answered(upstream, await upstream.request(), result=result)
            assert _json(again(), host.session_id)[1]["id"] == 7
    assert status == 200 and answer == {"jsonrpc": "2.0", "id": 7, "result": {"content": result["content"]}}
    assert host.app.taken == {"handshake splice": 2} and front.outcomes == ["ok", "ok"]
    assert front.calls.in_flight("fx") == 0


@pytest.mark.parametrize("modern", [False, True], ids=["handshake-era server", "2026-era server"])
async def test_the_hosts_trace_context_goes_upstream_as_it_came(
    modern: bool, make_upstream: Callable[..., _Upstream]
) -> None:
    carrier = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01", "tracestate": "k=v"}
    with trio.fail_after(BOUND_SEC):
        async with _session(make_upstream, modern=modern) as (host, _, upstream):
            got = host.post_soon(_call(_meta=carrier))
            request = await upstream.request()
            await _answered(upstream, request, result={"content": []})
            _, answer = _json(got(), host.session_id)
    meta = request["params"]["_meta"]
    assert {key: meta[key] for key in carrier} == carrier and answer["result"] == {"content": []}
    assert (LOG_LEVEL_META_KEY in meta) == modern  # to a 2026-era server, with the session's level and envelope
    assert host.app.taken == {"handshake splice": 1}


async def test_a_json_rpc_error_passes_through_as_a_200_and_the_actor_hears_of_it_for_its_heal(
    make_upstream: Callable[..., _Upstream],
) -> None:
    error = {"code": INVALID_PARAMS, "message": "no"}
    with trio.fail_after(BOUND_SEC):
        async with _session(make_upstream) as (host, front, upstream):
            got = host.post_soon(_call())
            request = await upstream.request()
            await _answered(upstream, request, error=error)
            status, answer = _json(got(), host.session_id)
    assert status == 200 and answer == {"jsonrpc": "2.0", "id": 7, "error": error}  # the era's status: no table
    assert upstream.healed == [("echo", INVALID_PARAMS)] and front.outcomes == ["rpc_error"]


async def test_the_hosts_cancel_abandons_the_call_upstream_and_answers_it_request_cancelled(
    make_upstream: Callable[..., _Upstream],
) -> None:
    with trio.fail_after(BOUND_SEC):
        async with _session(make_upstream) as (host, front, upstream):
            got = host.post_soon(_call())
            request = await upstream.request()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            accepted = await host.post(cancel)
            courtesy = await upstream.request()
            await trio.testing.wait_all_tasks_blocked()
            _, answer = _json(got(), host.session_id)
    assert accepted[0]["status"] == 202 and dict(accepted[0]["headers"])[b"mcp-session-id"] == host.session_id.encode()
    assert courtesy == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request["id"], "reason": "the host cancelled the request"},
    }
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": {"code": REQUEST_CANCELLED, "message": "Request cancelled"}}
    assert host.app.taken == {"handshake splice": 1, "handshake cancel": 1} and front.outcomes == ["cancelled"]


@pytest.mark.parametrize("then", ["its server answers", "it cancels"])
async def test_a_host_that_hangs_up_leaves_the_call_running_until_its_answer_goes_nowhere_or_it_cancels(
    make_upstream: Callable[..., _Upstream], then: str
) -> None:
    """The era cancels by notice, not by hanging up: a cancel after the hang-up is still the call's."""
    hang_up = trio.Event()
    with trio.fail_after(BOUND_SEC):
        async with _session(make_upstream) as (host, front, upstream):
            got = host.post_soon(_call(), hang_up=hang_up)
            request = await upstream.request()
            hang_up.set()
            await trio.testing.wait_all_tasks_blocked()
            assert got() == [] and front.outcomes == []  # no courtesy cancel: the era cancels by notice only
            with pytest.raises(anyio.WouldBlock):
                upstream.reads.receive_nowait()
            if then == "its server answers":
                await upstream.answer({"jsonrpc": "2.0", "id": request["id"], "result": {"content": []}})
            else:
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
                accepted = await host.post(cancel)
                courtesy = await upstream.request()
                again = await host.post(cancel)  # the call is over: the SDK's app has it (and ignores it)
                assert accepted[0]["status"] == 202 and again[0]["status"] == 299  # 299: ``_FakeSdk``'s
                assert courtesy["method"] == "notifications/cancelled"
                assert courtesy["params"]["requestId"] == request["id"]
    assert got() == [] and front.calls.in_flight("fx") == 0
    assert front.outcomes == (["ok"] if then == "its server answers" else ["cancelled"])
    assert host.app.taken == {
        "handshake splice": 1,
        **({} if then == "its server answers" else {"handshake cancel": 1, "sdk": 1}),
    }


async def test_a_call_past_tool_timeout_sec_is_the_general_paths_timeout_result_in_the_hosts_shape(
    autojump_clock: trio.testing.MockClock, make_upstream: Callable[..., _Upstream]
) -> None:
    with trio.fail_after(BOUND_SEC * 100):
        async with _session(make_upstream, timeout_sec=10.0) as (host, front, _):
            started = trio.current_time()
            sent = await host.post(_call())
            assert trio.current_time() - started == pytest.approx(10.0)
    status, answer = _json(sent, host.session_id)
    assert status == 200 and answer["result"]["isError"] is True and "resultType" not in answer["result"]
    assert "did not answer within 10s (tool_timeout_sec)" in answer["result"]["content"][0]["text"]
    assert front.outcomes == ["timeout"]


async def test_a_call_to_a_2026_era_server_names_the_sessions_level_and_its_log_messages_ride_its_response(
    make_upstream: Callable[..., _Upstream],
) -> None:
    events: list[dict[str, Any]] = []
    watch = _keeping_events(events)
    with trio.fail_after(BOUND_SEC):
        async with _session(make_upstream, modern=True) as (host, front, upstream):
            got = host.post_soon(_call(), watch=watch)
            request = await upstream.request()
            meta = request["params"]["_meta"]
            assert meta[LOG_LEVEL_META_KEY] == "warning" and meta[PROTOCOL_VERSION_META_KEY] == "2026-07-28"
            for level in ("info", "error"):  # info is below the session's level: taken, and dropped
                notice = {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": level, "data": level},
                }
                assert await upstream.splice.deliver_notice(json.dumps(notice).encode()) is not None
            result = {"content": [], "resultType": "complete"}
            await _answered(upstream, request, result=result)
            assert got()[-1]["more_body"] is False
    log = {"level": "error", "logger": "fx", "data": "error"}
    assert events == [
        {"jsonrpc": "2.0", "method": "notifications/message", "params": log},
        {"jsonrpc": "2.0", "id": 7, "result": {"content": []}},
    ]
    assert host.app.taken == {"handshake splice": 1} and front.outcomes == ["ok"]


@pytest.mark.parametrize(
    ("change", "headers"),
    [
        pytest.param({"session": "nope"}, {}, id="a session the manager does not serve"),
        pytest.param({"initialized": False}, {}, id="a session not initialized yet"),
        pytest.param({"terminated": True}, {}, id="a session the manager ended, its connection not yet gone"),
        pytest.param({"meta": {"x-test/own": 1}}, {}, id="a _meta key of the host's own"),
        pytest.param({}, {"mcp-protocol-version": "2026-07-28"}, id="a 2026 version: not this era's"),
        pytest.param({}, {"accept": "application/json"}, id="JSON only: the SDK refuses it"),
        pytest.param({"same_id": True}, {}, id="the id of a call of this session in flight here"),
    ],
)
async def test_a_post_it_cannot_take_reaches_the_sdks_app_whole(
    change: dict[str, Any], headers: dict[str, str], make_upstream: Callable[..., _Upstream]
) -> None:
    with trio.fail_after(BOUND_SEC):
        session = _session(
            make_upstream, initialized=change.get("initialized", True), modern=change.get("modern", False)
        )
        async with session as (host, _, upstream):
            if change.get("same_id"):
                host.post_soon(_call())
                await upstream.request()
            if "session" in change:
                host.session_id = change["session"]
            if change.get("terminated"):
                await host.app.handshake._manager._server_instances[host.session_id].terminate()  # type: ignore[union-attr]
            message = _call(**({"_meta": change["meta"]} if "meta" in change else {}))
            sent = await host.post(message, headers=headers)
    assert sent[0]["status"] == 299 and host.app._sdk.bodies == [json.dumps(message).encode()]  # type: ignore[attr-defined]
