"""One connection of the fast path's HTTP/1.1 client (``upstream.http1``), and the answers read off it.

``Connection`` is one kept-alive TCP (or TLS) connection and the bytes read
off it that no answer used yet. A plain TCP connection's socket is read and
written directly (``os.read`` once readable, ``os.write``; ``send_all`` only
for what the socket does not take at once), a TLS one through its stream.
``Answer`` reads one answer's head and body off it (the framing rules are
``upstream.http1``'s docstring).

Concurrency: a connection belongs to one call at a time (``Http1Pool.post``); nothing here is shared.
"""

from __future__ import annotations

import os
import select
import zlib
from typing import Final

import httpx2
import trio

MAX_HEAD_BYTES: Final = 64 * 1024
RECEIVE_BYTES: Final = 64 * 1024
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})


class Connection:
    """One TCP (or TLS) connection and the bytes read off it that no answer has used yet."""

    __slots__ = ("_fd", "_more_due", "buffer", "idle_since", "socket", "stream")

    def __init__(self, stream: trio.abc.Stream, socket: trio.socket.SocketType) -> None:
        self.stream = stream
        self.socket = socket
        self.buffer = bytearray()
        self.idle_since = 0.0
        self._fd = socket.fileno() if isinstance(stream, trio.SocketStream) else -1
        """A plain TCP connection's socket, read and written directly (TLS goes through its stream); else -1."""
        self._more_due = False
        """The last read filled ``RECEIVE_BYTES``: more is likely there already, so the next read tries first."""

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

    async def fill(self, what: str) -> None:
        """Read more into ``buffer``; the end of the connection is ``RemoteProtocolError`` (``what`` was due).

        A plain connection's read parks first (the answer is not there yet when it is called), unless the last
        read filled its buffer.
        """
        try:
            data = await (self._read() if self._fd >= 0 else self.stream.receive_some(RECEIVE_BYTES))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpx2.ReadError(str(exc) or type(exc).__name__) from exc
        if not data:
            raise httpx2.RemoteProtocolError(f"Server disconnected without sending {what}.")
        self.buffer += data

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
    """One answer on a connection: its head read; the body read with ``next_chunk``, ``aread`` or ``body``."""

    def __init__(self, connection: Connection, status: int, headers: dict[str, str], set_cookies: list[str]) -> None:
        self._connection = connection
        self.status_code = status
        self.headers = headers
        """Names in lower case; a repeated header's values joined by commas (``set-cookie`` aside)."""
        self.set_cookies = set_cookies
        self.redirected = status in _REDIRECTS and "location" in headers
        self._keep_alive = "close" not in _tokens(headers.get("connection", ""))
        self._chunked = False
        self._left: int | None = None
        """Bytes left of the body (``Content-Length``) or of this chunk; None: until the end, or no chunk yet."""
        self.done = status < 200 or status in (204, 304)
        self._decoder = _decoder(headers.get("content-encoding", ""))
        codings = _tokens(headers.get("transfer-encoding", ""))
        if codings:
            if codings != ["chunked"]:  # as h11 (and so httpx) refuses it; RFC 9112 6.3 would read until the end
                raise httpx2.RemoteProtocolError(f"a Transfer-Encoding other than chunked: {codings[:4]}")
            self._chunked = True
        elif "content-length" in headers:
            self._left = _length(headers["content-length"])
            self.done = self.done or self._left == 0
        else:
            self._keep_alive = self.done  # framed by the connection's end (or no body at all)

    @classmethod
    async def read(cls, connection: Connection) -> Answer:
        """The next final answer's head on ``connection`` (interim ``1xx`` answers are skipped)."""
        while True:
            buffer = connection.buffer
            while (end := buffer.find(b"\r\n\r\n")) < 0:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise httpx2.RemoteProtocolError("an answer's head beyond 64 KiB")
                await connection.fill("a response")
            head = bytes(buffer[:end])
            del buffer[: end + 4]
            status, headers, set_cookies, http10 = _parse_head(head)
            if status == 101:
                raise httpx2.RemoteProtocolError("a protocol switch nobody asked for")
            if 100 <= status < 200:
                continue
            answer = cls(connection, status, headers, set_cookies)
            answer._keep_alive = answer._keep_alive and not http10
            return answer

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").lower()

    @property
    def reusable(self) -> bool:
        """Read to its end, nothing after it, and kept alive by both sides."""
        return self.done and self._keep_alive and not self._connection.buffer

    async def next_chunk(self) -> bytes:
        """The next bytes of the body (decoded if the server encoded them); ``b""`` at its end."""
        while not self.done:
            data = await self._next_raw()
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

    async def _next_raw(self) -> bytes:
        connection = self._connection
        if self._chunked and not self._left:
            await self._chunk_start()
            if self.done:
                return b""
        if self._left is None:  # until the connection's end
            if not connection.buffer:
                try:
                    await connection.fill("")
                except httpx2.RemoteProtocolError:
                    self.done = True
                    return b""
            data = bytes(connection.buffer)
            connection.buffer.clear()
            return data
        if not connection.buffer:
            await connection.fill("the rest of the body")
        take = min(self._left, len(connection.buffer))
        data = bytes(connection.buffer[:take])
        del connection.buffer[:take]
        self._left -= take
        if not self._left:
            if self._chunked:
                await self._expect_crlf()
            else:
                self.done = True
        return data

    async def _chunk_start(self) -> None:
        """Read a chunk's size line (past the end: the trailers, and the body is done)."""
        line = await self._line()
        size_text = line.split(b";", 1)[0].rstrip(b" \t")  # whitespace after the size only, as h11 reads it
        if not size_text or len(size_text) > 16 or not all(c in b"0123456789abcdefABCDEF" for c in size_text):
            raise httpx2.RemoteProtocolError(f"a chunk size that is not one: {line[:40]!r}")
        self._left = int(size_text, 16)
        if self._left == 0:
            while await self._line():  # trailers, until the empty line
                pass
            self.done = True

    async def _expect_crlf(self) -> None:
        if await self._line():
            raise httpx2.RemoteProtocolError("a chunk longer than its size")

    async def _line(self) -> bytes:
        connection = self._connection
        while (end := connection.buffer.find(b"\r\n")) < 0:
            if len(connection.buffer) > MAX_HEAD_BYTES:
                raise httpx2.RemoteProtocolError("a chunk line beyond 64 KiB")
            await connection.fill("the rest of the body")
        line = bytes(connection.buffer[:end])
        del connection.buffer[: end + 2]
        return line


def _parse_head(head: bytes) -> tuple[int, dict[str, str], list[str], bool]:
    """Status, headers, ``set-cookie`` values and whether it is HTTP/1.0, from an answer's head."""
    status_line, *lines = head.split(b"\r\n")
    version, _, rest = status_line.partition(b" ")
    code = rest[:3]
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit() or rest[3:4] not in b" ":
        raise httpx2.RemoteProtocolError(f"not an HTTP/1.1 status line: {status_line[:60]!r}")
    headers: dict[str, str] = {}
    set_cookies: list[str] = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or b" " in name or b"\t" in name:
            raise httpx2.RemoteProtocolError(f"not a header line: {line[:60]!r}")
        key, text = name.decode("latin-1").lower(), value.strip(b" \t").decode("latin-1")
        if key == "set-cookie":
            set_cookies.append(text)
        elif key in headers:
            if key == "content-length" and headers[key] != text:
                raise httpx2.RemoteProtocolError("two different Content-Length headers")
            headers[key] = text if key == "content-length" else f"{headers[key]}, {text}"
        else:
            headers[key] = text
    return int(code), headers, set_cookies, version == b"HTTP/1.0"


def _tokens(value: str) -> list[str]:
    return [token.strip().lower() for token in value.split(",") if token.strip()]


def _length(value: str) -> int:
    if not value.isdigit() or len(value) > 18:
        raise httpx2.RemoteProtocolError(f"a Content-Length that is not one: {value[:40]!r}")
    return int(value)


def _decoder(value: str) -> zlib._Decompress | None:
    codings = _tokens(value)
    if not codings or codings == ["identity"]:
        return None
    if codings in (["gzip"], ["x-gzip"]):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if codings == ["deflate"]:
        return zlib.decompressobj()
    raise httpx2.RemoteProtocolError(f"a Content-Encoding nobody asked for: {value[:40]!r}")
