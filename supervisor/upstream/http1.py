"""The fast path's own HTTP/1.1 client: keep-alive POSTs to one streamable-HTTP upstream (issue 29).

httpx spends about 1.1-1.4 ms of CPU on each POST of a ``tools/call`` here
(its request and response models, httpcore's pool and h11's state machine),
four times what writing the request and reading its answer off a kept-alive
socket costs (``python -m bench.http_client``). ``Http1Pool`` does only the
latter, and only where httpx would have done nothing more: ``compat.httpx
.plain_route`` says when (no proxy, no mounted transport, no HTTP/2) and gives
the TLS context httpx would use, so trust is the same), and no auth flow. A
server with OAuth, behind a proxy, or anything else is posted to by httpx as
before (``upstream.http_calls``).

What it does of HTTP/1.1 (RFC 9112), as a client of one origin that sends
only ``POST`` with a ``Content-Length``:

* the request: the client's own headers (configured headers, bearer token,
  user agent), its cookies when its jar holds any, then the request's; no
  ``Accept-Encoding``, so the answer comes uncompressed (a server that encodes
  it anyway with gzip or deflate is decoded);
* the answer's head (a status line and headers, at most ``MAX_HEAD_BYTES``),
  skipping interim ``1xx`` answers; its body framed by ``Transfer-Encoding:
  chunked``, a ``Content-Length``, or the connection's end (which is then not
  reused); a ``Set-Cookie`` goes to the client's jar, as httpx would keep it;
* a connection is reused only once its answer was read to the end, nothing
  came after it, and neither side asked to close; an idle one older than
  ``KEEP_ALIVE_SEC`` (servers' own limits are 5 s and up) or one that turned
  readable while idle (the server closed it) is closed instead of reused;
* a redirect is not followed here: the answer says so (``Answer.redirected``),
  and ``HttpCalls`` leaves this endpoint's POSTs to httpx from then on, which
  sends the request again under the SDK's rule (within the origin).

Failures are httpx's exceptions, so that ``upstream.errors.ErrorTranslator``
reads them as it reads httpx's own: ``httpx2.ConnectError`` /
``ConnectTimeout`` (connecting, TLS), ``WriteError``, ``ReadError``,
``RemoteProtocolError`` (a head or framing that is not HTTP/1.1, an end
before the answer did).

Concurrency: ``post`` runs in the caller's task; a connection belongs to one
call from ``post`` until it is back in the idle list (synchronous code) or
closed. At most ``MAX_CONNECTIONS`` are open at once, as httpx allows. A
cancelled call closes its connection: the 2026 wire's cancellation.
"""

from __future__ import annotations

import re
import select
import zlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Final

import httpx2
import trio

from supervisor.compat.httpx import PlainRoute, plain_route

MAX_CONNECTIONS: Final = 100
"""Connections open at once (httpx's default limit); a call beyond them waits for one."""
MAX_IDLE: Final = 64
"""Idle connections kept for reuse; more are closed when their answer ends."""
KEEP_ALIVE_SEC: Final = 4.0
"""How long an idle connection is reused (servers close theirs after 5 s and more: hypercorn, uvicorn, Node)."""
MAX_HEAD_BYTES: Final = 64 * 1024
RECEIVE_BYTES: Final = 64 * 1024
_DROPPED: Final = frozenset({b"accept", b"accept-encoding", b"connection", b"content-length", b"content-type", b"host"})
"""Client headers the request sets itself (or leaves out: ``accept-encoding``)."""
_UNSAFE: Final = re.compile(r"[\r\n\0]|[^\x00-\x7f]")
"""What a request's own header may not hold here (httpx refuses a str that is not ASCII itself)."""
_UNSAFE_BYTES: Final = re.compile(rb"[\r\n\0]")
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})


class Http1Pool:
    """Kept-alive HTTP/1.1 connections to one endpoint, for the POSTs ``HttpCalls`` makes.

    Args:
        client: The generation's httpx client: its headers and cookie jar.
        url: The endpoint.
        route: ``compat.httpx.plain_route`` of ``client`` for ``url``.
    """

    def __init__(self, client: httpx2.AsyncClient, url: str, route: PlainRoute, own_headers: bytes) -> None:
        target = httpx2.URL(url)
        self._client = client
        self._url = url
        self._host = target.host
        self._port = target.port or (443 if target.scheme == "https" else 80)
        self._ssl = route.ssl_context
        self._connect_sec = client.timeout.connect
        self._head_start = b"POST %s HTTP/1.1\r\nhost: %s\r\n" % (target.raw_path, target.netloc)
        self._own_headers = own_headers
        self._idle: list[_Connection] = []
        self._limiter = trio.CapacityLimiter(MAX_CONNECTIONS)
        self._closed = False
        self.opened = 0
        """Connections opened so far (tests read it)."""

    @classmethod
    def for_client(cls, client: httpx2.AsyncClient, url: str) -> Http1Pool | None:
        """A pool for ``client``'s POSTs to ``url``; None where httpx must send them (``plain_route``, an auth flow).

        None too when one of the client's own headers holds a line break or a NUL:
        httpx then refuses it itself.
        """
        route = plain_route(client, url)
        own = [(name, value) for name, value in client.headers.raw if name.lower() not in _DROPPED]
        own_headers = _raw_header_lines(own)
        if route is None or own_headers is None or client.auth is not None:
            return None
        return cls(client, url, route, own_headers)

    @asynccontextmanager
    async def post(self, body: bytes, headers: Mapping[str, str]) -> AsyncIterator[Answer | None]:
        """POST ``body`` with ``headers``; the answer, its head read; None: not sendable here (let httpx send it).

        A redirected answer (``Answer.redirected``) is not followed: httpx sends the request again.

        The connection goes back to the pool when the answer was read to its end
        within the block; otherwise (an early exit, a failure, a cancel) it is closed.
        """
        lines = _header_lines(list(headers.items()))
        if lines is None:
            yield None
            return
        cookies = self._cookie_line()
        head = b"".join((self._head_start, self._own_headers, lines, cookies,
                         b"content-length: %d\r\n\r\n" % len(body)))  # fmt: skip
        async with self._limiter:
            connection = self._take_idle() or await self._connect()
            answer: Answer | None = None
            try:
                try:
                    await connection.stream.send_all(head + body)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    raise httpx2.WriteError(str(exc) or type(exc).__name__) from exc
                answer = await Answer.read(connection)
                if answer.set_cookies:
                    self._keep_cookies(answer)
                yield answer
            finally:
                if answer is not None and answer.reusable and not self._closed and len(self._idle) < MAX_IDLE:
                    connection.idle_since = trio.current_time()
                    self._idle.append(connection)
                else:
                    connection.close()

    def close(self) -> None:
        """Close the idle connections, and each busy one when its answer ends (the generation is over)."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _take_idle(self) -> _Connection | None:
        now = trio.current_time()
        while self._idle:
            connection = self._idle.pop()  # the most recent: the likeliest to be warm and alive
            if now - connection.idle_since < KEEP_ALIVE_SEC and not connection.readable():
                return connection
            connection.close()  # too old, or the server closed it (or sent what nobody asked for)
        return None

    async def _connect(self) -> _Connection:
        if self._closed:  # the generation is over: nothing new is opened for it
            raise httpx2.ConnectError("the generation's connections are closed")
        try:
            with trio.fail_after(self._connect_sec if self._connect_sec is not None else float("inf")):
                tcp = await trio.open_tcp_stream(self._host, self._port)
                stream: trio.abc.Stream = tcp
                if self._ssl is not None:
                    tls = trio.SSLStream(tcp, self._ssl, server_hostname=self._host, https_compatible=True)
                    try:
                        await tls.do_handshake()
                    except BaseException:
                        tcp.socket.close()
                        raise
                    stream = tls
        except trio.TooSlowError as exc:
            raise httpx2.ConnectTimeout(f"connecting to {self._host}:{self._port} timed out") from exc
        except (OSError, trio.BrokenResourceError) as exc:
            raise httpx2.ConnectError(str(exc) or type(exc).__name__) from exc
        self.opened += 1
        return _Connection(stream, tcp.socket)

    def _cookie_line(self) -> bytes:
        """The ``cookie`` line httpx would send from the client's jar (none while it is empty)."""
        if not self._client.cookies:
            return b""
        request = httpx2.Request("POST", self._url)
        self._client.cookies.set_cookie_header(request)
        value = request.headers.get("cookie")
        return b"" if value is None or _UNSAFE.search(value) else b"cookie: %s\r\n" % value.encode()

    def _keep_cookies(self, answer: Answer) -> None:
        headers = [("set-cookie", value) for value in answer.set_cookies]
        response = httpx2.Response(answer.status_code, headers=headers, request=httpx2.Request("POST", self._url))
        self._client.cookies.extract_cookies(response)


def _raw_header_lines(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The client's own headers as httpx holds them (bytes, as it would send them); None: one holds a line break."""
    lines = []
    for name, value in headers:
        if _UNSAFE_BYTES.search(name) or _UNSAFE_BYTES.search(value) or not name or b":" in name:
            return None
        lines.append(b"%s: %s\r\n" % (name, value))
    return b"".join(lines)


def _header_lines(headers: list[tuple[str, str]]) -> bytes | None:
    """``name: value`` lines; None if one cannot be written as is (a line break, a NUL, not ASCII)."""
    lines = []
    for name, value in headers:
        if _UNSAFE.search(name) or _UNSAFE.search(value) or not name or ":" in name:
            return None
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode()


class _Connection:
    """One TCP (or TLS) connection and the bytes read off it that no answer has used yet."""

    __slots__ = ("buffer", "idle_since", "socket", "stream")

    def __init__(self, stream: trio.abc.Stream, socket: trio.socket.SocketType) -> None:
        self.stream = stream
        self.socket = socket
        self.buffer = bytearray()
        self.idle_since = 0.0

    async def fill(self, what: str) -> None:
        """Read more into ``buffer``; the end of the connection is ``RemoteProtocolError`` (``what`` was due)."""
        try:
            data = await self.stream.receive_some(RECEIVE_BYTES)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpx2.ReadError(str(exc) or type(exc).__name__) from exc
        if not data:
            raise httpx2.RemoteProtocolError(f"Server disconnected without sending {what}.")
        self.buffer += data

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

    def __init__(self, connection: _Connection, status: int, headers: dict[str, str], set_cookies: list[str]) -> None:
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
            self._chunked = codings[-1] == "chunked"
            self._keep_alive = self._keep_alive and self._chunked
        elif "content-length" in headers:
            self._left = _length(headers["content-length"])
            self.done = self.done or self._left == 0
        else:
            self._keep_alive = self.done  # framed by the connection's end (or no body at all)

    @classmethod
    async def read(cls, connection: _Connection) -> Answer:
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
        size_text = line.split(b";", 1)[0].strip()
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
