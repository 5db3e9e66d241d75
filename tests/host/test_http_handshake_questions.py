"""A server's questions to a handshake-era session's host mid-call, on the call's own response (``PostAsker``).

The upstream's request (sampling, elicitation, roots) reaches the spliced call
as the SDK path's would (the call counted in flight on its server), and is asked
on the call's response with an id of ours; the host's reply POST settles it. In-process, as
``test_http_handshake_splice.py``, whose session and host these tests share.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INTERNAL_ERROR, REQUEST_TIMEOUT

from supervisor.host.http.sessions import ASK_ID_PREFIX
from tests.host.test_http_handshake_splice import BOUND_SEC, _answered, _call, _keeping_events, _session
from tests.host.test_http_splice import _Upstream


def ask_roots(session: Any, outcomes: list[Any], timeout: float | None = None) -> Callable[[], Awaitable[None]]:
    """A task asking the host ``roots/list`` on ``session``, as call 7's server would; its result or ``MCPError``
    goes to ``outcomes``."""

    async def ask() -> None:
        metadata = ServerMessageMetadata(related_request_id=7)
        try:
            outcomes.append(
                await session.send_request(types.ListRootsRequest(), types.ListRootsResult, timeout, metadata=metadata)
            )
        except MCPError as exc:
            outcomes.append(exc)

    return ask


def _adopted(front: Any) -> Any:
    """Call 7's ``HostCall``, as ``Relay.ask_host`` finds it first for a question of its server."""
    host_call = front.calls.attribute("fx", adopt=True)
    assert host_call is not None and host_call.ctx.request_id == 7
    return host_call


async def test_the_servers_question_mid_call_rides_the_calls_response_and_the_hosts_reply_post_answers_it(
    make_upstream: Callable[..., _Upstream],
) -> None:
    events: list[dict[str, Any]] = []
    watch = _keeping_events(events)
    with trio.fail_after(BOUND_SEC):
        async with _session(make_upstream) as (host, front, upstream):
            got = host.post_soon(_call(), watch=watch)
            request = await upstream.request()
            answers: list[Any] = []
            async with trio.open_nursery() as asking:
                asking.start_soon(ask_roots(_adopted(front).ctx.session, answers))
                await trio.testing.wait_all_tasks_blocked()
                (question,) = events
                assert question["method"] == "roots/list" and question["id"].startswith(ASK_ID_PREFIX)
                reply = await host.post({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": []}})
                assert reply[0]["status"] == 202
            assert answers == [types.ListRootsResult(roots=[])]
            await _answered(upstream, request, result={"content": []})
            start, *_, last = got()
            assert dict(start["headers"])[b"content-type"] == b"text/event-stream"
            assert events[-1] == {"jsonrpc": "2.0", "id": 7, "result": {"content": []}} and last["more_body"] is False
            # The call is over: a late question is refused, a stray reply is the SDK's.
            assert front.calls.attribute("fx", adopt=True) is None
            await host.post({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": []}})
    assert host.app.taken == {"handshake splice": 1, "handshake reply": 1, "sdk": 1}


async def test_a_question_still_waiting_when_the_call_ends_fails_and_its_late_reply_is_the_sdks(
    make_upstream: Callable[..., _Upstream],
) -> None:
    with trio.fail_after(BOUND_SEC):
        async with _session(make_upstream) as (host, front, upstream):
            got = host.post_soon(_call())
            request = await upstream.request()
            failures: list[Any] = []
            async with trio.open_nursery() as asking:
                asking.start_soon(ask_roots(_adopted(front).ctx.session, failures))
                await trio.testing.wait_all_tasks_blocked()
                await upstream.answer({"jsonrpc": "2.0", "id": request["id"], "result": {"content": []}})
            (failure,) = failures
            assert (
                isinstance(failure, MCPError)
                and failure.code == INTERNAL_ERROR
                and "the call ended before its host replied" in failure.message
            )
            await trio.testing.wait_all_tasks_blocked()
            question = json.loads(got()[1]["body"].removeprefix(b"event: message\r\ndata: "))
            await host.post({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": []}})
    assert host.app.taken == {"handshake splice": 1, "sdk": 1}


@pytest.mark.parametrize("abandoned", ["withdrawn", "timed out"])
async def test_a_question_abandoned_mid_call_is_cancelled_toward_the_host_and_its_late_reply_is_the_sdks(
    make_upstream: Callable[..., _Upstream], abandoned: str
) -> None:
    """The upstream withdraws its question (its handler is cancelled), or it is asked with a timeout that passes:
    the host hears ``notifications/cancelled`` for our id on the call's response, as from the SDK's dispatcher."""
    events: list[dict[str, Any]] = []
    with trio.fail_after(BOUND_SEC):
        async with _session(make_upstream) as (host, front, upstream):
            got = host.post_soon(_call(), watch=_keeping_events(events))
            request = await upstream.request()
            timed_out: list[Any] = []
            timeout = None if abandoned == "withdrawn" else 0.01
            async with trio.open_nursery() as asking:
                asking.start_soon(ask_roots(_adopted(front).ctx.session, timed_out, timeout))
                await trio.testing.wait_all_tasks_blocked()
                (question,) = events
                if abandoned == "withdrawn":
                    asking.cancel_scope.cancel()  # what the SDK does to the handler of a request its server cancels
            reason = "caller cancelled" if abandoned == "withdrawn" else "timed out after 0.01s"
            assert events[1:] == [
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": question["id"], "reason": reason},
                }
            ]
            assert [e.code for e in timed_out] == ([] if abandoned == "withdrawn" else [REQUEST_TIMEOUT])
            await host.post({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": []}})  # late: the SDK's
            await _answered(upstream, request, result={"content": []})
            assert (
                events[-1] == {"jsonrpc": "2.0", "id": 7, "result": {"content": []}} and got()[-1]["more_body"] is False
            )
    assert host.app.taken == {"handshake splice": 1, "sdk": 1}
