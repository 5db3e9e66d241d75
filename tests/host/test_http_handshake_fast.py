"""A handshake-era session's plain call to a 2026-era server, off the splice, run by its POST (``_serve``).

In-process, as ``test_http_handshake_splice.py``: ``HttpFastCalls`` over raw
ASGI, a real session of a real SDK session manager, and a Front whose tool's
server has no splice (a server over HTTP), so ``path_of`` says ``"fast"``; the
pipeline's driver (``ToolCalls.run``, tested with the SDK path's)
is a script here. End to end, with a real host and server:
``tests/e2e/test_fidelity_routing.py``'s ``test_a_hosts_calls_to_a_2026_http_server…``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp import MCPError
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INVALID_PARAMS

from supervisor.compat.sdk_sessions import live_session
from tests.host.test_http_handshake_questions import ask_roots
from tests.host.test_http_handshake_splice import (
    BOUND_SEC,
    HANDSHAKE,
    _call,
    _HandshakeFront,
    _Host,
    _json,
    _keeping_events,
    _session,
)
from tests.host.test_http_splice import _Upstream
from tests.host.test_stdio_fast_calls import _ToolCalls as _Runner

RESULT = {"content": [{"type": "text", "text": "hi"}]}
TRACEPARENT = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"


@asynccontextmanager
async def _fast_session(
    make_upstream: Callable[..., _Upstream],
) -> AsyncIterator[tuple[_Host, _HandshakeFront, _Runner]]:
    """A handshake-era session whose tool's server is 2026-era over HTTP (no splice): its calls run here."""
    async with _session(make_upstream) as (host, front, _):
        front.actor = SimpleNamespace(ready_upstream=SimpleNamespace(splice=None, modern=True))
        runner = _Runner()  # ``ToolCalls.run`` as a script: each call waits for ``answer``
        runner.result = RESULT
        front.run = runner.run  # type: ignore[method-assign]
        yield host, front, runner


async def test_a_plain_call_runs_in_its_posts_task_holding_its_session_and_is_answered_as_json(
    make_upstream: Callable[..., _Upstream],
) -> None:
    with trio.fail_after(BOUND_SEC):
        async with _fast_session(make_upstream) as (host, _, runner):
            assert host.app.handshake is not None
            transport = live_session(host.app.handshake._manager, host.session_id, None)
            assert transport is not None and transport.idle_scope is not None
            got = host.post_soon(_call(7, _meta={"traceparent": TRACEPARENT}))
            await runner.started.wait()
            assert transport.idle_scope.deadline == float("inf")  # the session is held open while the call runs
            runner.answer.set()
            await trio.testing.wait_all_tasks_blocked()
            status, answer = _json(got(), host.session_id)
            assert transport.idle_scope.deadline < float("inf")  # answered: the hold is released
    ((ctx, _),) = runner.calls
    assert ctx.protocol_version == HANDSHAKE and ctx.request_id == 7 and ctx.meta == {"traceparent": TRACEPARENT}
    assert status == 200 and answer == {"jsonrpc": "2.0", "id": 7, "result": RESULT}
    assert host.app.taken == {"handshake fast": 1}


async def test_the_hosts_cancel_ends_the_call_answered_request_cancelled(
    make_upstream: Callable[..., _Upstream],
) -> None:
    with trio.fail_after(BOUND_SEC):
        async with _fast_session(make_upstream) as (host, _, runner):
            got = host.post_soon(_call())
            await runner.started.wait()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            accepted = await host.post(cancel)
            await trio.testing.wait_all_tasks_blocked()
            _, answer = _json(got(), host.session_id)
            late = await host.post(cancel)  # the call is over: the SDK's app has it (and ignores it)
    assert accepted[0]["status"] == 202 and runner.cancelled and late[0]["status"] == 299
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": {"code": REQUEST_CANCELLED, "message": "Request cancelled"}}
    assert host.app.taken == {"handshake fast": 1, "handshake cancel": 1, "sdk": 1}


async def test_a_question_of_the_call_rides_its_response_and_the_hosts_reply_post_answers_it(
    make_upstream: Callable[..., _Upstream],
) -> None:
    """An input round's question (the sidecar runs a handshake-era host's rounds) goes to this host on its call."""
    events: list[dict[str, Any]] = []
    with trio.fail_after(BOUND_SEC):
        async with _fast_session(make_upstream) as (host, _, runner):
            got = host.post_soon(_call(), watch=_keeping_events(events))
            await runner.started.wait()
            answers: list[Any] = []
            async with trio.open_nursery() as asking:
                asking.start_soon(ask_roots(runner.calls[0][0].session, answers))
                await trio.testing.wait_all_tasks_blocked()
                (question,) = events
                reply = await host.post({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": []}})
            runner.answer.set()
            await trio.testing.wait_all_tasks_blocked()
    assert question["method"] == "roots/list" and reply[0]["status"] == 202
    assert answers == [types.ListRootsResult(roots=[])]
    assert events[-1] == {"jsonrpc": "2.0", "id": 7, "result": RESULT} and got()[-1]["more_body"] is False
    assert host.app.taken == {"handshake fast": 1, "handshake reply": 1}


async def test_a_host_that_hangs_up_leaves_the_call_running_and_its_questions_fail(
    make_upstream: Callable[..., _Upstream],
) -> None:
    hang_up = trio.Event()
    metadata = ServerMessageMetadata(related_request_id=7)
    with trio.fail_after(BOUND_SEC):
        async with _fast_session(make_upstream) as (host, _, runner):
            host.post_soon(_call(), hang_up=hang_up)
            await runner.started.wait()
            session = runner.calls[0][0].session
            failures: list[Any] = []
            async with trio.open_nursery() as asking:
                asking.start_soon(ask_roots(session, failures))
                await trio.testing.wait_all_tasks_blocked()
                hang_up.set()
            assert not runner.cancelled  # the era cancels by notice only
            assert [f.message for f in failures] == ["mcp-supervisor: the call ended before its host replied"]
            with pytest.raises(NoBackChannelError):  # its response is gone: nobody to ask
                await session.send_request(types.ListRootsRequest(), types.ListRootsResult, metadata=metadata)
            runner.answer.set()
            await trio.testing.wait_all_tasks_blocked()
            assert host.app.handshake is not None and not host.app.handshake._running


@pytest.mark.parametrize(
    ("raised", "error"),
    [
        (MCPError(INVALID_PARAMS, "no such tool", None), {"code": INVALID_PARAMS, "message": "no such tool"}),
        (RuntimeError("it broke"), {"code": 0, "message": "it broke"}),  # the dispatcher's catch-all
    ],
    ids=["an MCP error", "anything else"],
)
async def test_what_the_call_raises_is_the_sdk_dispatchers_error(
    make_upstream: Callable[..., _Upstream], raised: Exception, error: dict[str, Any]
) -> None:
    with trio.fail_after(BOUND_SEC):
        async with _fast_session(make_upstream) as (host, _, runner):
            runner.result = raised
            runner.answer.set()
            _, answer = _json(await host.post(_call()), host.session_id)
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": error}
