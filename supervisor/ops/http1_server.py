"""The HTTP front's server: HTTP/1.1 for an ASGI app on trio, one task per connection (issue 29).

Hypercorn under trio spends about 1.1 ms of CPU per request here (its h11
state machine, a task per request and the channels and events between it and
the connection's task): half of the HTTP front's cost per ``tools/call``
(``python -m bench.profile_pair httpfront``). ``serve_http1`` runs the app in
the connection's own task and parses the little of HTTP/1.1 (RFC 9112) a host
sends, with the limits hypercorn applied:

* a request's head (request line and headers) within ``MAX_HEAD_BYTES`` (431
  beyond), at most ``MAX_HEADERS`` headers (431), complete ``HEAD_SEC`` after
  its first byte (408: a slow-loris client holds a task for no longer), and an
  idle kept-alive connection closed after ``IDLE_SEC`` (hypercorn's
  ``keep_alive_timeout``);
* a head that is not HTTP/1.x is refused (400, or 505 for another version: an
  HTTP/2 preface gets 505), and so are what request smuggling is made of: bare
  CR or LF, NUL, folded header lines, a space before the colon, two different
  ``Content-Length`` values, ``Content-Length`` with ``Transfer-Encoding``, and
  any transfer coding but ``chunked`` (501);
* the body as the app reads it, framed by ``Content-Length`` or ``chunked``
  (extensions and trailers skipped); ``Expect: 100-continue`` answered when the
  app first reads; a body the app left unread is read off (up to
  ``MAX_DRAIN_BYTES``) so the connection can serve the next request, or the
  connection is closed;
* the answer framed by the app's own ``Content-Length`` (its head then goes
  out with the first body bytes: one write for a whole answer), or else
  ``chunked``, its head written at once (an event stream's client sees it
  began) and each body message on the wire as it comes; HTTP/1.0 answers end
  with the connection, and so does an answer whose body did not match its
  ``Content-Length`` (the client could not tell where the next one starts);
  ``Date`` added.

The app's ``receive``, once the body is read, waits for the end of the
connection (``http.disconnect``: the 2026 wire's cancellation), and returns it
too once the answer is complete; bytes a client sends meanwhile (a pipelined
request) are kept for the next request. ``send`` after the client left does
nothing (uvicorn's rule; the app learns of it from ``receive``).

Concurrency: ``trio.serve_listeners`` runs one task per connection in this
function's nursery; the request's app runs in it, and may call ``receive``
from one task of its own while it sends from another: ``send``'s writes are
serialized by a lock, and at most one task reads the socket at any time (the
connection's task between requests, the app's reader during one). An app that
fails is logged, its request answered 500 if no answer was started, and its
connection closed. Cancelling the caller closes the listener and every
connection.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote

import trio

from supervisor.ops.http1_request import PHRASES, Refused, Request, date_header, parse_head, refusal
from supervisor.ops.listen import announce, bound_url, listening_socket

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message

logger = logging.getLogger(__name__)

MAX_HEAD_BYTES: Final = 16 * 1024
"""A request's head at most (hypercorn's ``h11_max_incomplete_size``)."""
IDLE_SEC: Final = 5.0
"""How long a kept-alive connection waits for its next request (hypercorn's ``keep_alive_timeout``)."""
HEAD_SEC: Final = 10.0
"""How long a request's head may take to arrive once it started."""
MAX_DRAIN_BYTES: Final = 64 * 1024
"""Unread body a connection reads off to be reused; more, and it is closed instead."""
RECEIVE_BYTES: Final = 64 * 1024
_ASGI: Final = {"version": "3.0", "spec_version": "2.3"}
_NO_BODY: Final = frozenset({204, 304})
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


async def serve_http1(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    settings_key: str,
    url_path: str = "",
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port`` (``0``: a port the OS picks) until cancelled.

    Reports started with the URLs it bound (``http://127.0.0.1:PORT`` + ``url_path``),
    after logging each of them (``ops.listen``).

    Raises:
        SupervisorError: The address cannot be bound (in use, not local, no permission).
    """
    sock = listening_socket(host, port, settings_key)
    try:
        urls = [bound_url(sock) + url_path]
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        async with trio.open_nursery() as nursery:
            handler = partial(_serve_connection, app)
            nursery.start_soon(partial(trio.serve_listeners, handler, [listener], handler_nursery=nursery))
            announce(settings_key, urls)
            task_status.started(urls)
    finally:
        sock.close()


async def _serve_connection(app: ASGIApp, stream: trio.SocketStream) -> None:
    """Serve requests on one connection until either side ends it; never raises but ``Cancelled``."""
    connection = _Connection(app, stream)
    try:
        await connection.serve()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        logger.debug("connection from %s ended: %r", connection.client, exc)  # the client went away
    except Exception:
        logger.exception("the HTTP front failed on a connection from %s", connection.client)
    finally:
        await trio.aclose_forcefully(stream)


class _Ended(Exception):
    """The connection ended (or broke) where more of a request was due."""


class _Connection:
    """One client connection: the bytes read off it that no request has used yet, and its addresses."""

    def __init__(self, app: ASGIApp, stream: trio.SocketStream) -> None:
        self.app = app
        self.stream = stream
        self.buffer = bytearray()
        self.client = _address(stream.socket.getpeername())
        self.server = _address(stream.socket.getsockname())

    async def serve(self) -> None:
        while True:
            try:
                head = await self._read_head()
                if head is None:
                    return
                exchange = _Exchange(self, parse_head(head))
            except Refused as refused:
                await self.stream.send_all(refusal(refused.status, refused.text))
                return
            if not await exchange.run():
                return

    async def fill(self) -> None:
        """Read more into ``buffer``; ``_Ended`` at the connection's end or failure."""
        try:
            data = await self.stream.receive_some(RECEIVE_BYTES)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise _Ended from exc
        if not data:
            raise _Ended
        self.buffer += data

    async def _read_head(self) -> bytes | None:
        """The next request's head (None: the client closed, or stayed idle, between requests)."""
        buffer = self.buffer
        started = False
        with trio.move_on_after(IDLE_SEC) as deadline:
            while True:
                if not started:
                    while buffer[:2] == b"\r\n":  # empty lines before a request are ignored (RFC 9112 2.2)
                        del buffer[:2]
                    if buffer:
                        started = True
                        deadline.deadline = trio.current_time() + HEAD_SEC
                if started:
                    end = buffer.find(b"\r\n\r\n")
                    if end >= 0:
                        break
                    if len(buffer) > MAX_HEAD_BYTES:
                        raise Refused(431, "Request header fields too large")
                try:
                    await self.fill()
                except _Ended:
                    return None  # before or within a head: there is nobody to answer
        if deadline.cancelled_caught:
            if started:
                raise Refused(408, "Request head not received in time")
            return None
        if end > MAX_HEAD_BYTES:
            raise Refused(431, "Request header fields too large")
        head = bytes(buffer[:end])
        del buffer[: end + 4]
        return head


class _Exchange:
    """One request and its answer: the scope, and the ``receive`` and ``send`` the app gets."""

    def __init__(self, connection: _Connection, request: Request) -> None:
        self._connection = connection
        self._request = request
        self._body_left = request.length
        """Bytes left of the body (``Content-Length``) or of this chunk (``chunked``)."""
        self._body_done = not request.chunked and not request.length
        self._body_given = False
        self._keep_alive = request.keep_alive
        self._continue_due = request.expect_continue
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._started = self._head_sent = self._complete = self._gone = False
        self._framing = b""
        """How the answer's body is framed: ``b"length"``, ``b"chunked"``, ``b"close"``, ``b"none"``."""
        self._length_left: int | None = None
        """Bytes of a ``Content-Length`` answer still due (-1: a length that is not one)."""
        self._send_lock = trio.Lock()
        self._waiting: trio.CancelScope | None = None

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
        }
        try:
            await self._connection.app(scope, self._receive, self._send)
        except Exception:
            logger.exception("the HTTP front failed on %s %s", request.method, scope["path"])
            if not self._started:
                await self._connection.stream.send_all(refusal(500, "Internal Server Error"))
            return False
        if not self._complete:
            if not self._started:  # the app answered nothing
                await self._connection.stream.send_all(refusal(500, "Internal Server Error"))
            return False
        return self._keep_alive and not self._gone and await self._drain()

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
            except (_Ended, Refused):  # the end, or a chunk framing that is not one: the request cannot be read on
                self._gone = True
                return {"type": "http.disconnect"}
            return {"type": "http.request", "body": body, "more_body": not self._body_done}
        await self._wait_for_end()
        return {"type": "http.disconnect"}

    async def _wait_for_end(self) -> None:
        """Read until the connection ends, or the answer is complete (``send`` cancels the wait)."""
        connection = self._connection
        with trio.CancelScope() as self._waiting:
            while not self._complete:
                if len(connection.buffer) > MAX_HEAD_BYTES:
                    await trio.sleep_forever()  # enough of a next request kept: read on after this answer
                try:
                    await connection.fill()
                except _Ended:
                    self._gone = True
                    break
        self._waiting = None

    async def _body(self) -> bytes:
        """The next bytes of the body (``b""`` at the end of a chunked one)."""
        connection = self._connection
        buffer = connection.buffer
        if self._request.chunked and not self._body_left:
            await self._chunk_start()
            if self._body_done:
                return b""
        if not buffer:
            await connection.fill()
        take = min(self._body_left, len(buffer))
        data = bytes(buffer[:take])
        del buffer[:take]
        self._body_left -= take
        if not self._body_left:
            if self._request.chunked:
                if await self._line():
                    raise Refused(400, "A chunk longer than its size")
            else:
                self._body_done = True
        return data

    async def _chunk_start(self) -> None:
        """Read a chunk's size line; past the last chunk, the trailers (skipped), and the body is done."""
        size = (await self._line()).partition(b";")[0].strip()
        if not size or len(size) > 16 or size.strip(b"0123456789abcdefABCDEF"):
            raise Refused(400, "Not a chunk size")
        self._body_left = int(size, 16)
        if not self._body_left:
            while await self._line():
                pass
            self._body_done = True

    async def _line(self) -> bytes:
        connection = self._connection
        while (end := connection.buffer.find(b"\r\n")) < 0:
            if len(connection.buffer) > MAX_HEAD_BYTES:
                raise Refused(400, "A chunk line beyond the head limit")
            await connection.fill()
        line = bytes(connection.buffer[:end])
        del connection.buffer[: end + 2]
        return line

    async def _drain(self) -> bool:
        """Read off what is left of the body the app did not read; whether the connection can go on."""
        if self._body_done:
            return True  # the usual case: the app read it all (no deadline to set up)
        drained = 0
        with trio.move_on_after(IDLE_SEC):
            while not self._body_done:
                try:
                    drained += len(await self._body())
                except (_Ended, Refused):
                    return False
                if drained > MAX_DRAIN_BYTES:
                    return False
            return True
        return False

    async def _send(self, message: Message) -> None:
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
                await self._write(self._head(None))
            return
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
        if out and not self._gone:
            await self._write(out)
        if self._complete and self._waiting is not None:
            self._waiting.cancel()

    async def _write(self, data: bytes) -> None:
        async with self._send_lock:
            try:
                await self._connection.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                self._gone = True  # uvicorn's rule: the app learns of it from receive

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


def _address(address: Any) -> tuple[str, int] | None:
    return (address[0], address[1]) if isinstance(address, tuple) else None
