"""One request and its answer on the HTTP front's server (``ops.http1_server``): the app's ``receive`` and ``send``.

``Exchange`` runs the ASGI app on one parsed request (``ops.http1_request``):
``receive`` reads the body as the app asks for it (a chunked one framed by an
``h11.Connection``), ``send`` frames the answer (the server's rules are in
``ops.http1_server``'s docstring).

**A detached answer** (``DETACH``, an extension in ``scope["extensions"]``). An
app whose answer another task will write (the wire splice's: the upstream's
stdout pump has it) calls ``detach(watcher)`` and returns at once. It gets a
synchronous send: each message is framed and written there and then, and
what the socket does not take is written by the connection's task, in order.
The connection's task, meanwhile, only reads, as it would between requests
anyway: that read is how it learns the client left (``Watcher.hung_up``),
and every ``silent_sec`` with the answer incomplete it tells the watcher
(``silent``: a keepalive is due). The answer's last bytes end it
(``Watcher.ended``, in the task that wrote them), and the task's read then
becomes the wait for the next request, with ``IDLE_SEC``. So an answer costs
one write in the task that has it, and nothing wakes the connection's task
for it: a woken read (a cancel scope, the exception, the read again) cost
about a tenth of a spliced call's CPU.

Concurrency: every write goes through ``_emit`` (no await): straight to the
socket when nothing is waiting to be written, else behind what is
(``_backlog``), so bytes leave in the order they were sent, whichever task
sent them; the backlog is written under one lock, by the task that awaits
(``send``), or for a detached answer by the connection's task, woken for it.
The app may call ``receive`` from one task while it sends from another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import unquote

import h11
import trio

from supervisor.ops.http1_request import PHRASES, Refused, Request, date_header, refusal
from supervisor.wire.locks import QuickLock

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message

logger = logging.getLogger(__name__)

DETACH: Final = "mcp-supervisor.detach"
"""The ``scope["extensions"]`` key of ``Exchange.detach`` (module docstring)."""
IDLE_SEC: Final = 5.0
"""How long a kept-alive connection waits for its next request (hypercorn's ``keep_alive_timeout``)."""
MAX_HEAD_BYTES: Final = 16 * 1024
"""A request's head at most (hypercorn's ``h11_max_incomplete_size``)."""
MAX_DRAIN_BYTES: Final = 64 * 1024
"""Unread body a connection reads off to be reused; more, and it is closed instead."""
_ASGI: Final = {"version": "3.0", "spec_version": "2.3"}
_NO_BODY: Final = frozenset({204, 304})
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"

SendNow = Callable[["Message"], None]
"""A detached answer's send: frames and writes at once, never waits (module docstring)."""


class Ended(Exception):
    """The connection ended (or broke) where more of a request was due."""


class Link(Protocol):
    """The connection an exchange is on (``ops.http1_server``): its socket, and the bytes read off it."""

    app: ASGIApp
    buffer: bytearray
    client: tuple[str, int] | None
    server: tuple[str, int] | None

    async def fill(self) -> None:
        """Read more into ``buffer``; ``Ended`` at the connection's end."""
        ...

    def write_now(self, data: bytes | memoryview) -> int | None:
        """One non-blocking write: the bytes taken, None: the connection broke."""
        ...

    async def send_all(self, data: bytes | memoryview) -> None: ...


class Watcher(Protocol):
    """What the app of a detached answer hears (``Exchange.detach``), in the connection's task unless said."""

    def silent(self) -> None:
        """``silent_sec`` passed with the answer incomplete (again): a keepalive is due."""
        ...

    def hung_up(self) -> None:
        """The client left, or the connection is being closed, before the answer was complete."""
        ...

    def ended(self) -> None:
        """The answer is over: written whole (in the task that wrote its last bytes), or after ``hung_up``. Once."""
        ...


class Exchange:
    """One request and its answer: the scope, and the ``receive`` and ``send`` the app gets."""

    def __init__(self, connection: Link, request: Request) -> None:
        self._connection = connection
        self._request = request
        self._body_left = request.length
        """Bytes left of a ``Content-Length`` body."""
        self._body_done = not request.chunked and not request.length
        self._chunks: h11.Connection | None = None
        """A chunked body's framing, h11's: fed the head, then the body's bytes as they come."""
        if request.chunked:
            self._chunks = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
            self._chunks.receive_data(request.head + b"\r\n\r\n")
        self._body_given = False
        self._refused: Refused | None = None
        """Why the body could not be read on (its chunk framing): the client's answer once the app gave up."""
        self._keep_alive = request.keep_alive
        self._continue_due = request.expect_continue
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._started = self._head_sent = self._complete = self._gone = False
        self._framing = b""
        """How the answer's body is framed: ``b"length"``, ``b"chunked"``, ``b"close"``, ``b"none"``."""
        self._length_left: int | None = None
        """Bytes of a ``Content-Length`` answer still due (-1: a length that is not one)."""
        self._send_lock = QuickLock()
        self._backlog: list[bytes | memoryview] = []
        """Bytes sent but not yet written (the socket was full, or a write was under way), in order."""
        self._waiting: trio.CancelScope | None = None
        """The connection task's read while the answer is due (``receive``'s, or a detached answer's)."""
        self._watcher: Watcher | None = None
        self._silent_sec = 0.0
        self._ended = self._parked = False

    async def run(self) -> bool:
        """Run the app on the request; whether the connection may serve another."""
        request = self._request
        raw_path, _, query = request.target.partition(b"?")
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": "1.0" if request.http10 else "1.1",
            "method": request.method,
            "scheme": "http",
            "path": unquote(raw_path.decode("ascii")),
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": request.headers,
            "client": self._connection.client,
            "server": self._connection.server,
            "extensions": {DETACH: self.detach},
        }
        try:
            await self._connection.app(scope, self._receive, self._send)
        except Exception:
            if self._gone:  # it heard http.disconnect (the client left, or sent a body not framed) and gave up
                logger.debug("the app gave up on %s %s", request.method, scope["path"], exc_info=True)
            else:
                logger.exception("the HTTP front failed on %s %s", request.method, scope["path"])
            if self._watcher is not None:
                self._end_detached(hung_up=True)
            await self._refuse()
            return False
        if self._watcher is not None:
            if not await self._until_answered():
                return False
        elif not self._complete:
            await self._refuse()  # the app answered nothing, or not all
            return False
        return self._keep_alive and not self._gone and await self._drain()

    async def _refuse(self) -> None:
        """Unless some of an answer was written: 400 (or so) for a body whose framing was refused, else 500."""
        refused = self._refused
        if not self._head_sent and (refused is not None or not self._gone):  # gone: nobody to answer
            status, text = (500, "Internal Server Error") if refused is None else (refused.status, refused.text)
            await self._connection.send_all(refusal(status, text))

    def detach(self, watcher: Watcher, silent_sec: float) -> SendNow:
        """The ``DETACH`` extension: the app returns before its answer is complete, which ``SendNow`` writes."""
        if self._watcher is not None or self._complete:
            raise RuntimeError("an answer detached twice, or once it was complete")
        self._watcher, self._silent_sec = watcher, silent_sec
        return self._send_now

    async def _until_answered(self) -> bool:
        """Read for the client's hang-up (and keep what a next request sends) until the detached answer is over.

        Whether the connection may serve another request. ``_send_now``'s last
        bytes do not wake this read: it becomes the wait for the next request
        (its deadline moved to ``IDLE_SEC``). A backlog or a full buffer wakes it.
        """
        watcher = self._watcher
        assert watcher is not None
        try:
            while not self._gone:
                if self._backlog:
                    await self._write_backlog()
                    continue
                if self._complete:
                    self._end_detached(hung_up=False)
                    return True
                deadline = trio.current_time() + self._silent_sec
                with trio.CancelScope(deadline=deadline) as self._waiting:
                    await self._read_on()
                waiting, self._waiting = self._waiting, None
                if not waiting.cancelled_caught or trio.current_time() < waiting.deadline:
                    continue  # bytes came (or the end), or it was woken to write the backlog
                if self._complete and not self._backlog:
                    return False  # idle for IDLE_SEC after the answer: closed, as between requests
                if not (self._complete or self._gone):
                    watcher.silent()
        finally:
            if not self._ended:
                self._end_detached(hung_up=not self._complete)  # the client left, or we are closing
        return False

    def _end_detached(self, *, hung_up: bool) -> None:
        """Tell the watcher the answer is over (once): after ``hung_up`` if it was not complete."""
        if self._ended or self._watcher is None:
            return
        self._ended = True
        if hung_up:
            self._gone = True  # nothing more of it may be written: the connection is not reused
            self._watcher.hung_up()
        self._watcher.ended()

    async def _receive(self) -> Message:
        if self._gone or self._complete:
            return {"type": "http.disconnect"}
        if not self._body_done or not self._body_given:
            self._body_given = True  # a request without a body is still one (empty) http.request message
            if self._body_done:
                return {"type": "http.request", "body": b"", "more_body": False}
            if self._continue_due:
                self._continue_due = False
                await self._write(_CONTINUE)
            try:
                body = await self._body()
            except (Ended, Refused) as exc:  # the end, or a chunk framing that is not one: it cannot be read on
                self._refused = exc if isinstance(exc, Refused) else None
                self._gone = True
                return {"type": "http.disconnect"}
            return {"type": "http.request", "body": body, "more_body": not self._body_done}
        await self._wait_for_end()
        return {"type": "http.disconnect"}

    async def _wait_for_end(self) -> None:
        """Read until the connection ends, or the answer is complete (``send`` cancels the wait)."""
        with trio.CancelScope() as self._waiting:
            while not (self._complete or self._gone):
                await self._read_on()
        self._waiting = None

    async def _read_on(self) -> None:
        """One more read, for the client's end (``_gone``), keeping what a next request sends; parked instead
        while enough of one is kept (``_parked``: the answer's end wakes it, and the next request is served)."""
        if len(self._connection.buffer) > MAX_HEAD_BYTES:
            self._parked = True
            try:
                await trio.sleep_forever()
            finally:
                self._parked = False
        try:
            await self._connection.fill()
        except Ended:
            self._gone = True

    async def _body(self) -> bytes:
        """The next bytes of the body (``b""`` at the end of a chunked one)."""
        buffer = self._connection.buffer
        if self._chunks is not None:
            return await self._chunk(self._chunks, buffer)
        if not buffer:
            await self._connection.fill()
        take = min(self._body_left, len(buffer))
        data = bytes(buffer[:take])
        del buffer[:take]
        self._body_left -= take
        self._body_done = not self._body_left
        return data

    async def _chunk(self, chunks: h11.Connection, buffer: bytearray) -> bytes:
        """The next bytes of a chunked body, framed by h11 (its trailers checked and dropped); ``Refused`` as h11
        refuses them. h11 is not on the way of a ``Content-Length`` body: it cost about 30% more CPU per call."""
        while True:
            try:
                event = chunks.next_event()
            except h11.RemoteProtocolError as exc:  # its text quotes the client's bytes: not echoed back
                raise Refused(exc.error_status_hint, "Not a chunked body this server can read") from exc
            if type(event) is h11.Data:
                return bytes(event.data)
            if type(event) is h11.EndOfMessage:
                self._body_done = True
                buffer[:0] = chunks.trailing_data[0]  # what came after the body (a next request) is the connection's
                return b""
            if event is h11.NEED_DATA:  # (else the h11.Request of the head it was fed first)
                if not buffer:
                    await self._connection.fill()
                chunks.receive_data(bytes(buffer))
                buffer.clear()

    async def _drain(self) -> bool:
        """Read off what is left of the body the app did not read; whether the connection can go on."""
        if self._body_done:
            return True  # the usual case: the app read it all (no deadline to set up)
        drained = 0
        with trio.move_on_after(IDLE_SEC):
            while not self._body_done:
                try:
                    drained += len(await self._body())
                except (Ended, Refused):
                    return False
                if drained > MAX_DRAIN_BYTES:
                    return False
            return True
        return False

    async def _send(self, message: Message) -> None:
        out = self._encode(message)
        if out:
            await self._write(out)
        if self._complete and self._waiting is not None and self._watcher is None:
            self._waiting.cancel()  # ``receive``'s wait for the end: the answer is complete

    def _send_now(self, message: Message) -> None:
        """A detached answer's send (``SendNow``): framed and written now, the rest by the connection's task."""
        if self._ended:
            return  # the client left: nothing is written any more (the app hears it from its watcher)
        out = self._encode(message)
        if out:
            self._emit(out)
        if self._complete and not self._backlog:
            self._end_detached(hung_up=False)
            if self._parked:  # a next request is kept whole: its task serves it now
                assert self._waiting is not None
                self._waiting.cancel()
            elif self._waiting is not None:  # the connection's read: now the wait for the next request
                self._waiting.deadline = trio.current_time() + IDLE_SEC

    def _encode(self, message: Message) -> bytes:
        """The bytes ``message`` puts on the wire (its head too, when it is due); the answer's state kept."""
        kind = message["type"]
        if kind == "http.response.start":
            if self._started:
                raise RuntimeError("http.response.start sent twice")
            self._started = True
            self._status = message["status"]
            self._headers = list(message.get("headers", ()))
            if not any(name.lower() == b"content-length" for name, _ in self._headers):
                # A streamed answer (an event stream): its head goes now, so the client sees it has begun.
                self._head_sent = True
                return self._head(None)
            return b""
        if kind != "http.response.body":
            raise RuntimeError(f"an ASGI message this server does not serve: {kind!r}")
        if not self._started or self._complete:
            raise RuntimeError("http.response.body before http.response.start, or after the last one")
        body: bytes = message.get("body", b"")
        more = message.get("more_body", False)
        out = b"" if self._head_sent else self._head(None if more else len(body))
        if self._framing == b"chunked":
            if body:
                out += b"%x\r\n%b\r\n" % (len(body), body)
            if not more:
                out += b"0\r\n\r\n"
        elif self._framing != b"none":
            out += body
            if self._length_left is not None:
                self._length_left -= len(body)
        self._head_sent = True
        if not more:
            self._complete = True
            if self._length_left:  # fewer or more bytes than its Content-Length: the client cannot frame another
                self._keep_alive = False
        return out

    async def _write(self, data: bytes) -> None:
        """Write ``data`` after whatever was sent before it; wait until the socket took it all."""
        self._emit(data)
        if self._backlog:
            await self._write_backlog()

    def _emit(self, data: bytes | memoryview) -> None:
        """Put ``data`` on the socket now if nothing waits to be written before it, else behind that (no await)."""
        if self._gone:
            return  # uvicorn's rule: the app learns of it from receive (or its watcher)
        if not self._backlog and not self._send_lock.locked():
            sent = self._connection.write_now(data)
            if sent is None:
                self._gone = True
                return
            if sent == len(data):
                return
            data = memoryview(data)[sent:]
        self._backlog.append(data)
        if self._watcher is not None and self._waiting is not None:
            self._waiting.cancel()  # a detached answer's rest: its connection's task writes it

    async def _write_backlog(self) -> None:
        """Write what waits to be written, in order (one writer at a time)."""
        async with self._send_lock:
            backlog = self._backlog
            while backlog and not self._gone:
                try:
                    await self._connection.send_all(backlog[0])
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    self._gone = True
                del backlog[0]
            backlog.clear()

    def _head(self, length: int | None) -> bytes:
        """The answer's status line and headers; sets the body's framing (``length``: a single body's size)."""
        status = self._status
        lines = [b"HTTP/1.1 %d %b\r\n" % (status, PHRASES.get(status, b""))]
        declared = False
        for name, value in self._headers:
            lowered = name.lower()
            if lowered == b"content-length":
                declared = True
                self._length_left = int(value) if value.strip().isdigit() else -1
            elif lowered == b"transfer-encoding":
                continue  # the framing is this server's
            elif lowered == b"connection" and b"close" in value.lower():
                self._keep_alive = False
                continue
            lines.append(b"%b: %b\r\n" % (name, value))
        if status in _NO_BODY or status < 200 or self._request.method == "HEAD":
            self._framing = b"none"
        elif declared:
            self._framing = b"length"
        elif length is not None:
            self._framing = b"length"
            self._length_left = length
            lines.append(b"content-length: %d\r\n" % length)
        elif self._request.http10:
            self._framing = b"close"
            self._keep_alive = False
        else:
            self._framing = b"chunked"
            lines.append(b"transfer-encoding: chunked\r\n")
        if not self._keep_alive:
            lines.append(b"connection: close\r\n")
        lines.append(b"date: %b\r\n\r\n" % date_header())
        return b"".join(lines)
