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
  ``Content-Length`` values, ``Content-Length`` with ``Transfer-Encoding``, not
  exactly one ``Host`` (RFC 9112 3.2), and any transfer coding but ``chunked``
  (501); a body whose chunks are not framed (a size such as ``+ea``) gets its
  400 once the app gave up on it, with no traceback;
* the body as the app reads it, framed by ``Content-Length``, or by h11 when
  ``chunked`` (extensions and trailers checked and dropped); ``Expect:
  100-continue`` answered when the app first reads; a body the app left
  unread is read off (up to ``MAX_DRAIN_BYTES``) so the connection can serve
  the next request, or the connection is closed;
* the answer framed by the app's own ``Content-Length`` (its head then goes
  out with the first body bytes: one write for a whole answer), or else
  ``chunked``, its head written at once (an event stream's client sees it
  began) and each body message on the wire as it comes; HTTP/1.0 answers end
  with the connection, and so does an answer whose body did not match its
  ``Content-Length`` (the client could not tell where the next one starts);
  ``Date`` added.

Why not h11 throughout: on the same design, h11 parsing and framing cost about
30% more CPU per call on the ``httpfront`` pair (issue 47); hosts send
``Content-Length`` bodies, so only chunked ones take it. The rest frames as
h11 does all the same, input by input: ``tests/ops/test_http1_differential.py``
feeds the same bytes (valid, edge-case, hostile, pipelined) to this server
and to h11, and every kind of answer to both, and fails on any difference it
does not list.

The app's ``receive``, once the body is read, waits for the end of the
connection (``http.disconnect``: the 2026 wire's cancellation), and returns it
too once the answer is complete; bytes a client sends meanwhile (a pipelined
request) are kept for the next request. ``send`` after the client left does
nothing (uvicorn's rule; the app learns of it from ``receive``). An app may
instead detach its answer, for another task to write without waiting
(``ops.http1_exchange.DETACH``): the wire splice's answers are written by the
upstream's stdout pump that read them.

Concurrency: ``trio.serve_listeners`` runs one task per connection in this
function's nursery; the request's app runs in it (``ops.http1_exchange``), and
may call ``receive`` from one task of its own while it sends from another:
bytes leave in the order they were sent, and at most one task reads the
socket at any time (the connection's task between requests and while a
detached answer is due, the app's reader during one). The socket is read and
written directly (``os.read`` once it is readable, ``os.write``), not through
``trio.SocketStream``'s layers, except for a write the socket cannot take at
once. An app that
fails is logged, its request answered 500 if no answer was started, and its
connection closed. Cancelling the caller closes the listener and every
connection.
"""

from __future__ import annotations

import logging
import os
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import trio

from supervisor.ops.http1_exchange import IDLE_SEC, MAX_DRAIN_BYTES, MAX_HEAD_BYTES, Ended, Exchange
from supervisor.ops.http1_request import Refused, parse_head, refusal
from supervisor.ops.listen import announce, bound_url, listening_socket

if TYPE_CHECKING:
    from starlette.types import ASGIApp

logger = logging.getLogger(__name__)

__all__ = ["HEAD_SEC", "IDLE_SEC", "MAX_DRAIN_BYTES", "MAX_HEAD_BYTES", "serve_http1"]

HEAD_SEC: Final = 10.0
"""How long a request's head may take to arrive once it started."""
RECEIVE_BYTES: Final = 64 * 1024


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


class _Connection:
    """One client connection: the bytes read off it that no request has used yet, and its addresses."""

    def __init__(self, app: ASGIApp, stream: trio.SocketStream) -> None:
        self.app = app
        self.stream = stream
        self.buffer = bytearray()
        self._fd = stream.socket.fileno()
        """Its socket's: the server reads and writes it directly (``fill``, ``write_now``); closed only at the end."""
        self.client = _address(stream.socket.getpeername())
        self.server = _address(stream.socket.getsockname())

    async def serve(self) -> None:
        while True:
            try:
                head = await self._read_head()
                if head is None:
                    return
                exchange = Exchange(self, parse_head(head))
            except Refused as refused:
                await self.stream.send_all(refusal(refused.status, refused.text))
                return
            if not await exchange.run():
                return

    async def fill(self) -> None:
        """Read more into ``buffer``; ``Ended`` at the connection's end or failure.

        It parks first and reads once the socket is readable: it is called when the bytes it wants are not
        there yet (the next request, the rest of a body, a hang-up), so a read first would mostly fail.
        """
        fd = self._fd
        while True:
            try:
                await trio.lowlevel.wait_readable(fd)
                data = os.read(fd, RECEIVE_BYTES)  # a socket's read(2) is its recv()
            except BlockingIOError:
                continue  # a spurious report
            except (trio.ClosedResourceError, OSError) as exc:
                raise Ended from exc
            if not data:
                raise Ended
            self.buffer += data
            return

    async def send_all(self, data: bytes | memoryview) -> None:
        await self.stream.send_all(data)

    def write_now(self, data: bytes | memoryview) -> int | None:
        """One non-blocking write of ``data``: the bytes the socket took (0: its buffer is full), None: it broke."""
        try:
            return os.write(self._fd, data)  # a socket's write(2) is its send(); SIGPIPE is ignored by Python
        except BlockingIOError:
            return 0
        except OSError:
            return None

    async def _read_head(self) -> bytes | None:
        """The next request's head (None: the client closed, or stayed idle, between requests)."""
        buffer = self.buffer
        end = buffer.find(b"\r\n\r\n")
        if 0 < end <= MAX_HEAD_BYTES and not buffer.startswith(b"\r\n"):  # here already (read with the last answer's)
            head = bytes(buffer[:end])
            del buffer[: end + 4]
            return head
        started = timed = False
        with trio.move_on_after(IDLE_SEC) as deadline:
            while True:
                if not started:
                    while buffer[:2] == b"\r\n":  # empty lines before a request are ignored (RFC 9112 2.2)
                        del buffer[:2]
                    started = bool(buffer)
                if started:
                    end = buffer.find(b"\r\n\r\n")
                    if end >= 0:
                        break
                    if len(buffer) > MAX_HEAD_BYTES:
                        raise Refused(431, "Request header fields too large")
                    if not timed:  # a head that came whole (the usual case) needs no deadline of its own
                        timed = True
                        deadline.deadline = trio.current_time() + HEAD_SEC
                try:
                    await self.fill()
                except Ended:
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


def _address(address: Any) -> tuple[str, int] | None:
    return (address[0], address[1]) if isinstance(address, tuple) else None
