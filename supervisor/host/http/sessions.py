"""The HTTP front's own answer to a handshake-era session's plain ``tools/call`` POST (issue 29).

A handshake-era host over HTTP holds a stateful session (``Mcp-Session-Id``,
issued by the SDK's ``StreamableHTTPSessionManager`` at ``initialize``), and
the SDK serves each of its requests through the session's transport,
dispatcher and server runner, then our client session to the upstream: about
2.7 ms of CPU per call (issue 29, round 17). A plain call to a stdio server
of either era needs none of it: ``HandshakeCalls`` answers it on the wire
splice's HTTP half (``host.http.splice``), as bytes both ways, with the
guarantees listed there (between eras: the session's log level named, the
call's log messages on its response, input rounds run in the sidecar). It
takes a POST (``host.http.posts`` read its body, and replays it to the
SDK's app for anything not taken here) when all of these hold:

* the headers: a session id, an ``MCP-Protocol-Version`` of a handshake
  version or none, JSON content, an ``Accept`` of both JSON and event streams
  (the SDK's rule in its event-stream mode);
* the session is one the SDK's manager serves now, for this credential
  (``compat.sdk_sessions.live_session``), and it is initialized
  (``Front.http_session``: its connection, captured at
  ``notifications/initialized``);
* the body is one JSON-RPC ``tools/call`` request, its id not one of this
  session's calls in flight here, its params plain (``host.pipeline.paths``: no
  progress token; trace context goes upstream as it came), and ``path_of``
  says ``"splice"`` for it (a stdio generation whose splice is ready), not
  shutting down. Where it says ``"fast"`` (a 2026-era server with no splice
  ready: over HTTP, as a rule), the call is run in its POST's task instead
  (``_serve``: ``runner.reply``, every task-run call's runner, its
  questions and log messages on its response as here, its cancel in
  ``_running``): 2,845 us of sidecar CPU per call on the SDK's session
  transport, dispatcher, server runner and client before (issue 29).

While the call runs, its session is held open (the idle countdown stops, as
for a request the SDK serves: ``compat.sdk_sessions.hold``), until its answer
is written or its host hung up (``HttpAnswer.on_end``). Two more kinds
of POST belong to such a call and are answered here, 202 as the SDK does:

* the host's ``notifications/cancelled`` for it: the call is abandoned
  upstream and answered ``REQUEST_CANCELLED`` (``HttpSplice.cancel``). A host
  that hung up (the era's rule: the call goes on) can still cancel it so,
  until its upstream answers;
* the host's reply to a request its upstream sent it mid-call. The upstream's
  request (sampling, elicitation, roots) reaches the call as the SDK path's
  would (``Relay.ask_host``, the call counted in flight on its server), and
  ``PostAsker`` asks it on the call's own response, which becomes an event
  stream, with an id of ours (``ASK_ID_PREFIX``); the reply POST carries it.
  A question the upstream withdraws (or one past its timeout) is cancelled
  toward the host on the same response, as the SDK's dispatcher would.

Concurrency: ``take`` is synchronous (no await between checking the session
and holding it). A spliced call's POST task returns once the call is sent: its answer
is detached, written by whichever task settles the call (``host.http.splice``);
a question is written by the upstream's request handler task (the response's
writes never wait: ``host.http.answers.PostAnswer``), and waits for the reply
POST's task to settle it. Tables are changed only in synchronous code.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import trio
from mcp import MCPError
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.shared.exceptions import NoBackChannelError
from mcp_types import INTERNAL_ERROR, REQUEST_TIMEOUT
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from supervisor.calls.attribution import HostCall
from supervisor.compat.sdk import notify_progress, progress_token_of, request_context_on
from supervisor.compat.sdk_sessions import hold, live_session
from supervisor.host.http.answers import PostAnswer, PostHeaders, answer_post
from supervisor.host.http.splice import HttpAnswer, HttpSplice
from supervisor.host.pipeline.adapters import reply
from supervisor.host.pipeline.call import ToolCall
from supervisor.host.pipeline.paths import path_of, plain_call
from supervisor.ops.http1_exchange import DETACH
from supervisor.wire.codec import to_json

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import Receive, Scope, Send

    from supervisor.calls.splice import SplicedCall
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.host.front import Front
    from supervisor.server_actor import ServerActor

ASK_ID_PREFIX: Final = "mcp-supervisor/ask/"
"""Ids of the requests asked on a spliced call's response; a reply POST that carries one is ours."""

Serve = Callable[["Receive", "Send"], Awaitable[None]]
"""What answers a POST taken here."""


def handshake_session(headers: PostHeaders) -> bool:
    """Whether a POST's headers are the module's first condition (JSON and an ``Accept`` of both: ``post_headers``)."""
    version = headers.version
    return headers.session_id is not None and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)


class HandshakeCalls:
    """One view's own answer to handshake-era sessions' plain calls, their cancels and their hosts' replies."""

    def __init__(self, front: Front, manager: StreamableHTTPSessionManager) -> None:
        self._front = front
        self._manager = manager
        self.splice = HttpSplice(front, handshake=True)
        self._calls: dict[tuple[str, str | int], HttpAnswer] = {}
        """(session id, the host's request id) → a spliced call not yet settled (for the host's cancel)."""
        self._running: dict[tuple[str, str | int], trio.CancelScope] = {}
        """(session id, the host's request id) → a call its POST's task runs on the fast path (``_serve``), for
        the host's cancel."""
        self._asked: dict[str, _Question] = {}
        """Our request id → a question on a call's response, waiting for the host's reply."""
        self._ids = itertools.count(1)

    @property
    def front(self) -> Front:
        return self._front

    def take(self, session_id: str, scope: Scope, body: bytes) -> tuple[str, Serve] | None:
        """(which kind, what answers it) if this POST is one of the module's three, else None (the SDK's app)."""
        if not (self._calls or self._running or self._asked) and b'"tools/call"' not in body:
            return None  # the session's other traffic (tools/list, notices, pings): not parsed here as well
        try:
            message = json.loads(body)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None
        method = message.get("method")
        if method is None:
            if not self._asked:
                return None
            return self._take_reply(session_id, scope, message)
        if method == "notifications/cancelled":
            return self._take_cancel(session_id, scope, message) if self._calls or self._running else None
        if method != "tools/call" or self._front.shutting_down:
            return None
        transport = live_session(self._manager, session_id, scope.get("user"))
        connection = self._front.http_session(session_id) if transport is not None else None
        if connection is None or transport is None:
            return None
        host_id, params = message.get("id"), message.get("params")
        if isinstance(host_id, bool) or not isinstance(host_id, str | int):
            return None
        key = (session_id, host_id)
        if key in self._calls or key in self._running:
            return None
        plain = plain_call(params, handshake_host=True)
        routed = self._front.route(plain.name) if plain is not None else None
        path = path_of(plain, routed, front="http", handshake_host=True)
        if path == "fast":
            assert plain is not None and routed is not None and isinstance(params, dict)
            asker = PostAsker(self, session_id, connection)
            asker.progress_token = progress_token_of(params)
            ctx = request_context_on(
                connection, "tools/call", host_id, params, outbound=asker, meta=params.get("_meta")
            )
            call = self._running[key] = trio.CancelScope()
            release = hold(transport)  # the session stays open while the call runs
            serve = partial(self._serve, key=key, call=call, ctx=ctx, routed=routed, asker=asker, release=release,
                            arguments=plain.arguments)  # fmt: skip
            return "fast", serve
        detach = scope.get("extensions", {}).get(DETACH)
        if detach is None or path != "splice":
            return None
        assert plain is not None and routed is not None
        tool, actor = routed
        asker = PostAsker(self, session_id, connection)
        token = progress_token_of(params)
        answer = self.splice.submit(
            host_id, tool, actor, plain.arguments, None, asker=asker, carrier=plain.carrier, progress_token=token
        )
        if answer is None:
            return None
        self._calls[key] = answer
        answer.on_end = hold(transport)  # the session stays open while the call's POST is

        def settled() -> None:
            del self._calls[key]  # not before: a host that hung up may still cancel the call (the era's way)

        answer.on_settled = settled
        asker.stream = answer.attach(detach, _session_headers(session_id))
        return "splice", _detached

    async def _serve(
        self,
        receive: Receive,
        send: Send,
        *,
        key: tuple[str, str | int],
        call: trio.CancelScope,
        ctx: ServerRequestContext[Any],
        routed: tuple[RegisteredTool, ServerActor],
        arguments: dict[str, Any] | None,
        asker: PostAsker,
        release: Callable[[], None],
    ) -> None:
        """Run a call ``path_of`` gives the fast path in its POST's task and answer it on its response.

        Its questions and log messages ride the response (``asker``); a hang-up
        fails its questions and the call goes on (the era cancels by notice);
        the host's cancel (``call``) is answered ``REQUEST_CANCELLED``, as the
        SDK's transport answers it.
        """
        stream = asker.stream = PostAnswer(send, _session_headers(key[0]))
        front = self._front
        tool_call = ToolCall(ctx, *routed, arguments, "http")

        async def answered() -> tuple[bytes, int]:
            answer = _CANCELLED | {"id": key[1]}
            with call:
                answer = await reply(front.tool_calls, tool_call)
            return to_json(answer), 200

        try:
            await answer_post(stream, receive, answered, asker.close)
        finally:
            asker.close()  # a question still waiting for the host fails: the call is over
            del self._running[key]
            release()

    def _take_reply(self, session_id: str, scope: Scope, message: dict[str, Any]) -> tuple[str, Serve] | None:
        request_id = message.get("id")
        question = self._asked.get(request_id) if isinstance(request_id, str) else None
        if question is None or question.session_id != session_id or ("result" in message) == ("error" in message):
            return None
        if live_session(self._manager, session_id, scope.get("user")) is None:
            return None
        question.settle(message)
        return "reply", partial(_accepted, session_id)

    def _take_cancel(self, session_id: str, scope: Scope, message: dict[str, Any]) -> tuple[str, Serve] | None:
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return None
        key = (session_id, request_id)
        answer, running = self._calls.get(key), self._running.get(key)
        if (answer is None and running is None) or live_session(self._manager, session_id, scope.get("user")) is None:
            return None
        if running is not None:
            running.cancel()  # answered REQUEST_CANCELLED by its POST's task (``_serve``)
        elif answer is not None and not self.splice.cancel(answer):
            return None  # answered meanwhile: the SDK's app ignores it as well
        return "cancel", partial(_accepted, session_id)

    def ask(self, session_id: str) -> _Question:
        """A new question of ours to the host of ``session_id``, waiting for its reply (``forget`` it after)."""
        question = _Question(f"{ASK_ID_PREFIX}{next(self._ids)}", session_id)
        self._asked[question.id] = question
        return question

    def forget(self, question: _Question) -> None:
        self._asked.pop(question.id, None)


class _Question:
    """One request asked on a call's response: its id and the host's reply, once it came."""

    def __init__(self, request_id: str, session_id: str) -> None:
        self.id = request_id
        self.session_id = session_id
        self.reply: Mapping[str, Any] | None = None
        self._done = trio.Event()

    def settle(self, reply: Mapping[str, Any]) -> None:
        if self.reply is None:
            self.reply = reply
            self._done.set()

    async def wait(self) -> Mapping[str, Any]:
        await self._done.wait()
        assert self.reply is not None
        return self.reply


class PostAsker:
    """A spliced handshake-era call's response as the SDK's ``DispatchContext``: its host, asked mid-call.

    ``host_call`` (``HttpSplice.adopt``) gives the call's ``HostCall``, whose
    session sends request-scoped messages here: a request becomes an event of
    the call's response with an id of ours, and waits for the host's reply POST
    (``HandshakeCalls._take_reply``); a notice becomes an event. ``close`` (the
    call is over, or its host hung up) fails the questions still waiting.
    """

    can_send_request = True

    def __init__(self, calls: HandshakeCalls, session_id: str, connection: Connection) -> None:
        self._calls = calls
        self._session_id = session_id
        self.connection = connection
        self.stream: PostAnswer | None = None
        self.progress_token: Any = None
        """The host's progress token, for a call run on the fast path (``HandshakeCalls._serve``)."""
        self._waiting: set[_Question] = set()
        self._closed = False

    def host_call(self, call: SplicedCall) -> HostCall | None:
        if self._closed:
            return None
        ctx = request_context_on(self.connection, "tools/call", call.host_id, None, outbound=self)
        level = self._calls.front.connection_log_level(self.connection)
        return HostCall(ctx, call.tool.owner, connection_log_level=level)

    def close(self) -> None:
        self._closed = True
        for question in self._waiting:
            question.settle(_ENDED)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        if not self._closed and self.stream is not None:
            await self.stream.notice(method, params)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        await notify_progress(self.notify, self.progress_token, progress, total, message)

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> dict[str, Any]:
        """Ask the host ``method`` on the call's response; its result, or its error raised as ``MCPError``.

        Abandoned (the caller cancelled: the upstream withdrew its request; or past ``opts["timeout"]``), the
        question is cancelled toward the host with ``notifications/cancelled``, as the SDK's dispatcher does
        (its ``cancel_on_abandon`` is for ``initialize``, which a server never sends).
        """
        if self._closed or self.stream is None:
            raise NoBackChannelError(method)
        opts = opts or {}
        question = self._calls.ask(self._session_id)
        self._waiting.add(question)
        try:
            request: dict[str, Any] = {"jsonrpc": "2.0", "id": question.id, "method": method}
            if params is not None:
                request["params"] = params
            await self.stream.message(request)
            timeout = opts.get("timeout")
            with trio.move_on_after(math.inf if timeout is None else timeout) as clock:
                reply = await question.wait()
            if clock.cancelled_caught:
                self._abandon(question, f"timed out after {timeout}s")
                raise MCPError(REQUEST_TIMEOUT, f"Request {method!r} timed out")
        except trio.Cancelled:
            self._abandon(question, "caller cancelled")
            raise
        finally:
            self._waiting.discard(question)
            self._calls.forget(question)
        error = reply.get("error")
        if error is not None:
            code, text = (error.get("code"), error.get("message")) if isinstance(error, dict) else (None, None)
            data = error.get("data") if isinstance(error, dict) else None
            raise MCPError(code if isinstance(code, int) else INTERNAL_ERROR, str(text), data)
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

    def _abandon(self, question: _Question, reason: str) -> None:
        """Cancel ``question`` toward the host, on the call's response if it is still open (never waits)."""
        if question.reply is None and not self._closed and self.stream is not None:
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": question.id, "reason": reason},
            }
            self.stream.message_now(cancel)


_CANCELLED: Final = {"jsonrpc": "2.0", "error": {"code": REQUEST_CANCELLED, "message": "Request cancelled"}}
_ENDED: Final = {"error": {"code": INTERNAL_ERROR, "message": "mcp-supervisor: the call ended before its host replied"}}


async def _detached(receive: Receive, send: Send) -> None:
    """A spliced call's POST: its answer is detached (``HttpAnswer``), nothing is left for its task to do."""


def _session_headers(session_id: str) -> list[tuple[bytes, bytes]]:
    return [(b"mcp-session-id", session_id.encode("latin-1"))]


async def _accepted(session_id: str, receive: Receive, send: Send) -> None:
    """202 Accepted with the session's id, no body: the SDK's answer to a notification or a reply."""
    headers = [(b"content-type", b"application/json"), (b"content-length", b"0"), *_session_headers(session_id)]
    await send({"type": "http.response.start", "status": 202, "headers": headers})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
