"""One POST as the HTTP front's own answers read and write it: its headers, and its response.

``post_headers`` reads the headers the front's own answers decide on, in one
pass. ``PostAnswer`` writes the response: JSON, or an event stream once it must be one.

A call answered by the front itself (``host.http.posts``,
``host.http.sessions``) starts as a plain ``application/json``
response. It becomes ``text/event-stream`` at the first message that must go
before the answer (a 2026 call's log message, a handshake-era call's
server→host request) or once the call has been silent for ``PING_SEC``, when
keepalive comments begin so that a proxy's idle timeout cannot cut it, as the
SDK does (``_SSE_PING_INTERVAL``); the answer is then the stream's last event.

Concurrency: the POST's own task and any task writing a message for its call
(a watcher, an upstream's request handler) share one lock around ``send``. A
detached answer's writes (``send_now``) never wait, so they are atomic in
whichever task makes them (the upstream's stdout pump writes the answer).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import trio

from supervisor.wire.codec import to_json
from supervisor.wire.locks import QuickLock

if TYPE_CHECKING:
    from starlette.types import Message, Receive, Scope, Send

    from supervisor.ops.http1_exchange import SendNow

PING_SEC: Final = 15.0
"""A silent call's keepalive interval once it committed to an event stream (the SDK's ``_SSE_PING_INTERVAL``)."""

_JSON_HEADERS: Final = [(b"content-type", b"application/json")]
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
_PING: Final = {"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True}


@dataclass(slots=True)
class PostHeaders:
    """The MCP headers of a POST the front may answer itself (``post_headers``)."""

    version: str | None
    """``MCP-Protocol-Version`` (None: absent)."""
    method: bytes | None
    """``Mcp-Method`` (the 2026 routing header; None: absent)."""
    session_id: str | None
    """``Mcp-Session-Id`` (a handshake-era session's; None: absent)."""
    mcp_params: bool
    """Whether any ``Mcp-Param-*`` header came (the SDK checks those against the tool's schema)."""
    routing: dict[str, str]
    """The routing headers that came (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``), decoded, by
    lower-case name: what the SDK's ``classify_inbound_request`` reads of a request's headers."""
    duplicated_routing: bool
    """Whether one of them came twice (the SDK's ``find_duplicated_routing_header``: refused)."""


def post_headers(scope: Scope) -> PostHeaders | None:
    """What a POST's raw ASGI headers (lower-case names) say, if it has JSON content and an ``Accept`` of both
    JSON and event streams (the SDK's rule, wildcards and all); None: only the SDK's app answers it."""
    version = method = session_id = content_type = accept = None
    mcp_params = duplicated = False
    routing: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name == b"accept":
            if accept is None:  # the first, as the SDK reads it (starlette's ``Headers.get``)
                accept = value
        elif name == b"content-type":
            content_type = value
        elif name == b"mcp-session-id":
            session_id = value.decode("latin-1")
        elif name.startswith(b"mcp-"):
            key = _ROUTING.get(name)
            if key is not None:
                duplicated = duplicated or key in routing
                routing[key] = value.decode("latin-1")
                if name == b"mcp-protocol-version":
                    version = routing[key]
                elif name == b"mcp-method":
                    method = value
            elif name.startswith(b"mcp-param-"):
                mcp_params = True
    if content_type is None or not content_type.lower().startswith(b"application/json"):
        return None
    if not accepts_json_and_events(accept):
        return None
    return PostHeaders(version, method, session_id, mcp_params, routing, duplicated)


_ROUTING: Final = {name.encode(): name for name in ("mcp-protocol-version", "mcp-method", "mcp-name")}


def accepts_json_and_events(accept: bytes | None) -> bool:
    """Whether an ``Accept`` value admits both JSON and event streams: the SDK's ``check_accept_headers`` rule
    (RFC 9110 wildcards, parameters ignored), on the raw value; ``tests/host/test_http_answers.py`` holds the two
    to the same answers."""
    if accept is None:
        return False
    types = {part.split(b";", 1)[0].strip().lower() for part in accept.split(b",")}
    if b"*/*" in types:
        return True
    return bool(types & _JSON_TYPES) and bool(types & _EVENT_TYPES)


_JSON_TYPES: Final = frozenset({b"application/json", b"application/*"})
_EVENT_TYPES: Final = frozenset({b"text/event-stream", b"text/*"})


class PostAnswer:
    """One POST's response: JSON, or once it carried a message or was silent for ``PING_SEC``, an event stream.

    ``headers``: sent with either (a handshake-era session's ``Mcp-Session-Id``).
    ``send_now``: a detached answer's send (``ops.http1_exchange.DETACH``),
    which never waits: ``answer_now`` and ``ping_now`` write with it from any
    task, and the async methods too (their lock is then never held across a
    wait, so the synchronous ones need not take it).
    """

    def __init__(
        self, send: Send | None, headers: list[tuple[bytes, bytes]] | None = None, *, send_now: SendNow | None = None
    ) -> None:
        self._send_now = send_now
        self._send: Send = send if send_now is None else self._sending_now  # type: ignore[assignment]
        self._headers = headers or []
        self._lock = QuickLock()
        self._events = False

    async def _sending_now(self, message: Message) -> None:
        assert self._send_now is not None
        self._send_now(message)

    async def ping(self) -> None:
        """A keepalive comment on the event stream (which the response becomes, if not yet)."""
        await self._write(self._ping)

    def ping_now(self) -> None:
        """``ping`` for a detached answer (a silent call, in its connection's task)."""
        self._write_now(self._ping)

    async def notice(self, method: str, params: Mapping[str, Any] | None) -> None:
        """A notice of the call (a log message): the response becomes an event stream, if not yet."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.message(message)

    async def message(self, message: Mapping[str, Any]) -> None:
        """One JSON-RPC message before the answer (a notice, a request to the host), as an event."""
        await self.event_line(to_json(message))

    def message_now(self, message: Mapping[str, Any]) -> None:
        """``message`` for a detached answer: written now, never waiting (a cancelled task may still send it)."""
        self._write_now(partial(self._event, to_json(message)))

    async def event_line(self, line: bytes) -> None:
        """One encoded JSON-RPC message (a framed line too: ``wire.codec.frame``) before the answer, as an event."""
        await self._write(partial(self._event, line))

    async def answer(self, body: bytes, status: int) -> None:
        """The call's answer (one JSON-RPC message): the JSON body, or the stream's last event."""
        await self._write(partial(self._answer, body, status))

    def answer_now(self, body: bytes, status: int) -> None:
        """``answer`` for a detached answer: written now, in the caller's task (the upstream's stdout pump)."""
        self._write_now(partial(self._answer, body, status))

    async def _write(self, messages: Callable[[], list[Message]]) -> None:
        """Send what ``messages`` makes of the response's state, under the lock: decided and sent as one."""
        async with self._lock:
            for message in messages():
                await self._send(message)

    def _write_now(self, messages: Callable[[], list[Message]]) -> None:
        """``_write`` for a detached answer: its sends never wait, so nothing can come between them."""
        assert self._send_now is not None
        for message in messages():
            self._send_now(message)

    def _as_events(self) -> list[Message]:
        """The event stream's start, if the response is not one yet (it is, from now on)."""
        if self._events:
            return []
        self._events = True
        return [{"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS + self._headers}]

    def _event(self, line: bytes) -> list[Message]:
        return [
            *self._as_events(),
            {"type": "http.response.body", "body": event(line.rstrip(b"\n")), "more_body": True},
        ]

    def _ping(self) -> list[Message]:
        return [*self._as_events(), _PING]

    def _answer(self, body: bytes, status: int) -> list[Message]:
        if self._events:
            return [{"type": "http.response.body", "body": event(body), "more_body": False}]
        headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()), *self._headers]
        return [
            {"type": "http.response.start", "status": status, "headers": headers},
            {"type": "http.response.body", "body": body, "more_body": False},
        ]


def event(message: bytes) -> bytes:
    """One JSON-RPC message as one ``event: message`` of the stream."""
    return b"event: message\r\ndata: " + message + b"\r\n\r\n"


async def answer_post(
    stream: PostAnswer,
    receive: Receive,
    answered: Callable[[], Awaitable[tuple[bytes, int]]],
    hung_up: Callable[[], None],
) -> None:
    """Answer a POST whose call its own task runs: ``answered`` gives the body and status, written on ``stream``.

    Meanwhile one watcher pings every ``PING_SEC`` of silence and, at the host's
    hang-up, calls ``hung_up`` once and stops: a 2026-era host's call is
    cancelled so (the caller's scope), a handshake-era one's goes on.
    """
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_watch, stream, receive, hung_up)
        body, status = await answered()
        await stream.answer(body, status)
        nursery.cancel_scope.cancel()


async def _watch(stream: PostAnswer, receive: Receive, hung_up: Callable[[], None]) -> None:
    while True:
        with trio.move_on_after(PING_SEC):
            message = await receive()
            if message["type"] == "http.disconnect":
                hung_up()
                return
            continue
        await stream.ping()
