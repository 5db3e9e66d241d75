"""One connection of the fast path's HTTP/1.1 client (``upstream.http1``), and the answers read off it.

``Connection`` is one kept-alive TCP (or TLS) connection and **h11**'s client
state machine for it: h11 parses each answer's head and frames its body
(``Content-Length``, ``chunked``, or the connection's end; interim ``1xx``
answers; what is left after an answer), and says whether the connection may
carry the next request. What h11 refuses is ``httpx2.RemoteProtocolError``,
as httpx (over h11 too) would raise it. The request's bytes are written here
(``Http1Pool.post`` frames one ``POST`` with a ``Content-Length``); h11 is
told of it (``Connection.send_request``), since a request frames its answer.
A plain TCP connection's socket is read and written directly (``os.read``
once readable, ``os.write``; ``send_all`` only for what the socket does not
take at once), a TLS one through its stream. ``Answer`` reads one answer off
it and decodes a ``gzip`` or ``deflate`` body (h11 leaves content codings).

Concurrency: a connection belongs to one call at a time (``Http1Pool.post``); nothing here is shared.
"""

from __future__ import annotations

import os
import select
import zlib
from typing import Final, cast

import h11
import httpx2
import trio

MAX_HEAD_BYTES: Final = 64 * 1024
"""An answer's head, or one chunk-size line, beyond this is refused (h11's ``max_incomplete_event_size``)."""
RECEIVE_BYTES: Final = 64 * 1024
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_SENT: Final = h11.Request(method=b"POST", target=b"/", headers=[(b"host", b"upstream"), (b"content-length", b"0")])
"""What h11 is told of each request: a kept-alive POST (all that frames its answer; the bytes are ours)."""
_SENT_END: Final = h11.EndOfMessage()


class Connection:
    """One TCP (or TLS) connection, and h11's client state for it: what was read that no answer used yet."""

    __slots__ = ("_fd", "_more_due", "idle_since", "parser", "socket", "stream")

    def __init__(self, stream: trio.abc.Stream, socket: trio.socket.SocketType) -> None:
        self.stream = stream
        self.socket = socket
        self.parser = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.idle_since = 0.0
        self._fd = socket.fileno() if isinstance(stream, trio.SocketStream) else -1
        """A plain TCP connection's socket, read and written directly (TLS goes through its stream); else -1."""
        self._more_due = False
        """The last read filled ``RECEIVE_BYTES``: more is likely there already, so the next read tries first."""

    async def send_request(self, data: bytes) -> None:
        """Write one POST (``data``, head and body, as ``Http1Pool.post`` framed it) and tell h11 it went.

        h11 frames the answer by the request it was sent (a POST that keeps the
        connection alive): ``_SENT`` stands for every request written here.
        """
        self.parser.send(_SENT)
        self.parser.send(_SENT_END)
        await self.send(data)

    async def send(self, data: bytes) -> None:
        """Write ``data``: at once if the socket takes it all (no checkpoint: a request is usually one write)."""
        try:
            if self._fd >= 0:
                try:
                    sent = os.write(self._fd, data)  # a socket's write(2) is its send(); SIGPIPE is ignored
                except BlockingIOError:
                    sent = 0
                if sent == len(data):
                    return
                await self.stream.send_all(memoryview(data)[sent:])
                return
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpx2.WriteError(str(exc) or type(exc).__name__) from exc

    async def next_event(self, what: str) -> h11.Event:
        """h11's next event of the answer, reading as it needs; its refusals are ``RemoteProtocolError``.

        ``what``: what was due, for the message when the server closed the connection before it.
        """
        parser = self.parser
        while True:
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError as exc:
                if parser.trailing_data[1] and not parser.trailing_data[0]:  # it ended where h11 wanted more
                    raise httpx2.RemoteProtocolError(f"Server disconnected without sending {what}: {exc}") from exc
                raise httpx2.RemoteProtocolError(f"the server's answer is not HTTP/1.1: {exc}") from exc
            if event is h11.NEED_DATA:
                parser.receive_data(await self._receive())
                continue
            if isinstance(event, h11.ConnectionClosed):
                raise httpx2.RemoteProtocolError(f"Server disconnected without sending {what}.")
            return cast("h11.Event", event)

    def next_cycle(self) -> bool:
        """Ready the connection for its next request, if h11 says both sides keep it alive and nothing came after."""
        parser = self.parser
        left, closed = parser.trailing_data  # closed: the server ended it (an answer framed by the end)
        if parser.our_state is not h11.DONE or parser.their_state is not h11.DONE or left or closed:
            return False
        parser.start_next_cycle()
        return True

    async def _receive(self) -> bytes:
        try:
            return await self._read() if self._fd >= 0 else bytes(await self.stream.receive_some(RECEIVE_BYTES))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpx2.ReadError(str(exc) or type(exc).__name__) from exc

    async def _read(self) -> bytes:
        fd, first = self._fd, self._more_due
        while True:
            if not first:
                await trio.lowlevel.wait_readable(fd)
            first = False
            try:
                data = os.read(fd, RECEIVE_BYTES)  # a socket's read(2) is its recv()
            except BlockingIOError:
                continue
            self._more_due = len(data) == RECEIVE_BYTES
            return data

    def readable(self) -> bool:
        """Whether the idle connection has something to read: its end, or bytes nobody asked for."""
        poller = select.poll()  # not select(): it cannot watch a descriptor past 1023
        try:
            poller.register(self.socket.fileno(), select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):  # closed already
            return True

    def close(self) -> None:
        """Close at once, without a TLS goodbye (a connection given up is not reused either way)."""
        self.socket.close()


class Answer:
    """One answer on a connection: its head read; the body read with ``next_chunk`` or ``aread``."""

    def __init__(self, connection: Connection, response: h11.Response) -> None:
        self._connection = connection
        self.status_code = response.status_code
        headers: dict[str, str] = {}
        self.set_cookies: list[str] = []
        for raw_name, raw_value in response.headers:  # h11 gives names in lower case, values stripped
            name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
            if name == "set-cookie":
                self.set_cookies.append(value)
            else:
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self.headers = headers
        """Names in lower case; a repeated header's values joined by commas (``set-cookie`` aside)."""
        self.redirected = self.status_code in _REDIRECTS and "location" in headers
        self.done = False
        self._decoder = _decoder(headers.get("content-encoding", ""))

    @classmethod
    async def read(cls, connection: Connection) -> Answer:
        """The next final answer's head on ``connection`` (interim ``1xx`` answers are skipped)."""
        while True:  # h11 refuses a 101 nobody asked for; other 1xx answers are skipped
            event = await connection.next_event("a response")
            if isinstance(event, h11.Response):
                return cls(connection, event)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").lower()

    async def next_chunk(self) -> bytes:
        """The next bytes of the body (decoded if the server encoded them); ``b""`` at its end."""
        while not self.done:
            event = await self._connection.next_event("the rest of the body")
            if isinstance(event, h11.Data):
                data = bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.done, data = True, b""
            else:  # h11 gives nothing else between a response's head and its end
                raise httpx2.RemoteProtocolError(f"{type(event).__name__} in an answer's body")
            if self._decoder is not None:
                data = self._decoder.decompress(data) if data else self._decoder.flush()
            if data:
                return data
        return b""

    async def aread(self) -> bytes:
        """The whole body."""
        parts = []
        while chunk := await self.next_chunk():
            parts.append(chunk)
        return b"".join(parts)


def _tokens(value: str) -> list[str]:
    return [token.strip().lower() for token in value.split(",") if token.strip()]


def _decoder(value: str) -> zlib._Decompress | None:
    codings = _tokens(value)
    if not codings or codings == ["identity"]:
        return None
    if codings in (["gzip"], ["x-gzip"]):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if codings == ["deflate"]:
        return zlib.decompressobj()
    raise httpx2.RemoteProtocolError(f"a Content-Encoding nobody asked for: {value[:40]!r}")
