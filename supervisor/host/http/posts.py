"""The HTTP front's own answer to a 2026-era host's plain ``tools/call`` POST (issue 29).

The SDK's streamable-HTTP server spends, per 2026 request, a starlette request
and response, its security check, a task group with two tasks and a memory
channel (it cannot know whether the handler will send notices), and a
``ServerRunner``: a third of the HTTP front's CPU per call. A plain call
(its ``_meta`` the envelope and at most a log level and trace context: no
progress token) needs none of it: ``HttpFastCalls`` reads the body, checks it
as the SDK would, runs the fast path (the driver, ``ToolCalls.run``, the same
code as every call a task runs: routing, shutdown refusal, ``tool_timeout_sec``,
errors, the unknown-tool heal, metrics) in the ASGI task, and writes the
JSON-RPC answer as ``application/json`` with the SDK's status table. The
call's log messages (a host that named a level) turn the response into an
event stream at the first one, as the SDK's entry does; the answer is then
its last event. A call ``host.pipeline.paths`` splices (no log level, a 2026-era
stdio server) skips the SDK's client too: it crosses as bytes on the wire
splice's HTTP half (``host.http.splice``), and its answer is the upstream's.

It takes a POST only when every one of these holds, and hands anything else
to the SDK's app unchanged (the body it read is replayed): no session id, a
2026 ``MCP-Protocol-Version`` header, ``Mcp-Method: tools/call``, JSON content,
an ``Accept`` of both JSON and event streams, no ``Mcp-Param-*`` header, a body
within the front's limit that is one JSON-RPC request the SDK's ladder
(``classify_inbound_request``, duplicated routing headers) accepts, params
``plain_call`` reads with only the envelope, a log level and trace context in
``_meta``, a tool whose schema declares no ``x-mcp-header``, and the fast path
by ``path_of``. With telemetry on, the call's SERVER span is ours
(a ``ToolCall`` of origin ``http``; the splice's: ``SplicedTrace``). The Host/Origin check, the token and the
declared body size are the guard's (``ops.http``), before any of this.

The 2026 wire cancels a request by closing its stream: one watcher task per
call waits for ``http.disconnect`` and cancels the call. A call silent for
``PING_SEC`` commits to ``text/event-stream`` and sends keepalive comments, as
the SDK does, so a proxy's idle timeout cannot cut it; its answer is then the
stream's last event. ``taken`` counts each way (``"splice"``, ``"fast"``,
``"sdk"``), so tests can prove which path a call took.

Concurrency: each POST in its own ASGI task, plus its watcher; the two share
one lock around ``send``. No state across requests beyond counters and the
schema cache (replaced whole when full).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import trio
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundModernRoute,
    classify_inbound_request,
    find_invalid_x_mcp_header,
    x_mcp_header_map,
)
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from supervisor.compat.sdk import modern_request_context, progress_token_of
from supervisor.host.http.answers import PostAnswer, PostHeaders, answer_post, post_headers
from supervisor.host.http.sessions import HandshakeCalls, handshake_session
from supervisor.host.http.splice import HttpAnswer, HttpSplice
from supervisor.host.pipeline.adapters import reply
from supervisor.host.pipeline.call import ToolCall
from supervisor.host.pipeline.paths import ENVELOPE_KEYS, path_of, plain_call
from supervisor.ops.http1_exchange import DETACH
from supervisor.telemetry.conventions import TRACE_KEYS
from supervisor.wire.codec import to_json

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from supervisor.host.front import Front

MAX_SCHEMAS: Final = 4096
"""Tool schemas whose ``x-mcp-header`` verdict is kept (a catalog's worth)."""

_TAKEN_META_KEYS: Final = ENVELOPE_KEYS | {LOG_LEVEL_META_KEY, "progressToken"} | frozenset(TRACE_KEYS)
"""What ``_meta`` may hold: the envelope, a log level and a progress token (the call's log messages and progress ride
its own response), and trace context (upstream as it came; with telemetry on, the call's own spans parent on it)."""

Notify = Callable[[str, "Mapping[str, Any] | None"], Awaitable[None]]
Run = Callable[[Notify], Awaitable[dict[str, Any]]]
"""Runs a call on the fast path: its JSON-RPC reply, its notices to ``Notify``."""


class HttpFastCalls:
    """ASGI app in front of one view's SDK app (``sdk``): takes the calls above, passes on the rest."""

    def __init__(
        self,
        front: Front,
        sdk: ASGIApp,
        max_body_bytes: int,
        manager: StreamableHTTPSessionManager | None = None,
    ) -> None:
        self._front = front
        self._sdk = sdk
        self._max_body_bytes = max_body_bytes
        self._declares_headers: dict[int, tuple[Any, bool]] = {}
        self._splice = HttpSplice(front)
        self.handshake = HandshakeCalls(front, manager) if manager is not None else None
        """The answer to handshake-era sessions' plain calls (``host.http.sessions``); None: the SDK's."""
        self.taken: Counter[str] = Counter()
        """How many POSTs took each way: ``"splice"`` or ``"fast"`` (answered here), or ``"sdk"`` (passed on);
        of handshake-era sessions', ``"handshake splice"``, ``"handshake reply"`` or ``"handshake cancel"``."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = post_headers(scope) if scope["method"] == "POST" else None
        if headers is not None and _modern_call(headers):
            await self._modern_post(headers, scope, receive, send)
        elif headers is not None and self.handshake is not None and handshake_session(headers):
            assert headers.session_id is not None
            await self._handshake_post(headers.session_id, scope, receive, send)
        else:
            self.taken["sdk"] += 1
            await self._sdk(scope, receive, send)

    async def _modern_post(self, headers: PostHeaders, scope: Scope, receive: Receive, send: Send) -> None:
        """A 2026 ``tools/call`` POST by its headers: answered here if ``_take`` takes it, else by the SDK's app."""
        body, read = await _read_body(receive, self._max_body_bytes)
        taken = self._take(headers, scope, body) if body is not None else None
        if taken is None:
            self.taken["sdk"] += 1
            await self._sdk(scope, _replaying(read, receive), send)
            return
        if not isinstance(taken, HttpAnswer):  # a spliced call's answer is detached: written by whoever has it
            await _answer(taken, receive, send)

    async def _handshake_post(self, session_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A handshake-era session's POST: answered by ``HandshakeCalls`` if it takes it, else by the SDK's app."""
        assert self.handshake is not None
        body, read = await _read_body(receive, self._max_body_bytes)
        taken = self.handshake.take(session_id, scope, body) if body is not None else None
        if taken is None:
            self.taken["sdk"] += 1
            await self._sdk(scope, _replaying(read, receive), send)
            return
        kind, serve = taken
        self.taken[f"handshake {kind}"] += 1
        await serve(receive, send)

    def _take(self, headers: PostHeaders, scope: Scope, body: bytes) -> Run | HttpAnswer | None:
        """What runs the call (its notices to ``Notify``), or its spliced answer, if this POST is one to answer here.

        A call the splice carries is sent here, at once (``host.http.splice``), and its answer detached: whoever
        settles the call writes it (the server's ``DETACH``; without it, the fast path takes the call).
        """
        try:
            request = json.loads(body)
        except ValueError:
            return None
        if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" or request.get("method") != "tools/call":
            return None
        request_id, params = request.get("id"), request.get("params")
        if isinstance(request_id, bool) or not isinstance(request_id, str | int) or not isinstance(params, dict):
            return None
        if headers.duplicated_routing:  # the SDK's ``find_duplicated_routing_header``, read in ``post_headers``
            return None
        verdict = classify_inbound_request(request, headers=headers.routing)
        if not isinstance(verdict, InboundModernRoute):
            return None
        plain = plain_call(params, handshake_host=False)
        if plain is None or not _TAKEN_META_KEYS.issuperset(params.get("_meta") or ()):
            return None
        front = self._front
        routed = front.route(plain.name)
        path = path_of(plain, routed, front="http", handshake_host=False)
        if path == "sdk":
            return None
        assert routed is not None
        tool, actor = routed
        if self._declares_mcp_headers(tool.definition.input_schema):
            return None
        detach = scope.get("extensions", {}).get(DETACH) if path == "splice" and not front.shutting_down else None
        if detach is not None:
            spliced = self._splice.submit(
                request_id, tool, actor, plain.arguments, params.get("_meta"), progress_token=progress_token_of(params)
            )
            if spliced is not None:
                self.taken["splice"] += 1
                spliced.attach(detach)
                return spliced
        self.taken["fast"] += 1

        def run(notify: Notify) -> Awaitable[dict[str, Any]]:
            ctx = modern_request_context(verdict, "tools/call", request_id, params, notify)
            return reply(front.tool_calls, ToolCall(ctx, tool, actor, plain.arguments, "http"))

        return run

    def _declares_mcp_headers(self, schema: Any) -> bool:
        """Whether ``schema`` mirrors arguments into ``Mcp-Param-*`` headers (the SDK checks those)."""
        held = self._declares_headers.get(id(schema))
        if held is not None and held[0] is schema:
            return held[1]
        if len(self._declares_headers) >= MAX_SCHEMAS:
            self._declares_headers = {}
        declares = find_invalid_x_mcp_header(schema) is not None or bool(x_mcp_header_map(schema))
        self._declares_headers[id(schema)] = (schema, declares)  # the schema is held: its id is not reused
        return declares


def _modern_call(headers: PostHeaders) -> bool:
    """The header checks of the module docstring (JSON and an ``Accept`` of both: ``post_headers``)."""
    return (
        headers.method == b"tools/call"
        and headers.version in MODERN_PROTOCOL_VERSIONS
        and headers.session_id is None
        and not headers.mcp_params
    )


async def _read_body(receive: Receive, limit: int) -> tuple[bytes | None, list[Message]]:
    """The whole request body (None: past ``limit``, or the host hung up), and the messages it was read from.

    Reading stops at the first chunk past ``limit``: the SDK's app reads the rest, and refuses it.
    """
    read: list[Message] = []
    size = 0
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            return None, read  # a hang-up: the SDK's app sees it
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            return (b"".join(m.get("body", b"") for m in read) if size <= limit else None), read
        if size > limit:
            return None, read


def _replaying(read: list[Message], receive: Receive) -> Receive:
    """``receive`` giving the messages already ``read`` first, so the SDK's app reads the request whole."""
    pending = read[::-1]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


async def _answer(run: Run, receive: Receive, send: Send) -> None:
    """Run the call, cancelled if the host hangs up (the 2026 wire's cancel: then no answer), and write its answer
    (an event stream once it sent notices or went silent), with the SDK's HTTP status for an error's code."""
    stream = PostAnswer(send)

    async def answered() -> tuple[bytes, int]:
        answer = await run(stream.notice)
        error = answer.get("error")
        return to_json(answer), 200 if error is None else ERROR_CODE_HTTP_STATUS.get(error["code"], 200)

    with trio.CancelScope() as call:
        await answer_post(stream, receive, answered, call.cancel)
