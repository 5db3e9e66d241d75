"""The fast path's own HTTP/1.1 client: keep-alive POSTs to one streamable-HTTP upstream (issue 29).

httpx spends about 1.1-1.4 ms of CPU on each POST of a ``tools/call`` here
(its request and response models, httpcore's pool and h11's state machine),
four times what writing the request and reading its answer off a kept-alive
socket costs (``python -m bench.http_client``). ``Http1Pool`` does only the
latter, and only where httpx would have done nothing more (``for_client``):
for a client the generation built itself (``compat.sdk.create_http_client``:
no transport, mount or HTTP/2 of its own, and the TLS context it gave httpx,
so trust is the same object), with no auth flow, no event hook and no proxy in
the environment, to an ``http`` or ``https`` URL without credentials. A server
with OAuth, behind a proxy, or anything else is posted to by httpx as before
(``upstream.http_calls``). Every fact it reads of the client is public API.

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

The answer's parser is our own, held to h11's framing by a differential test
(``tests/upstream/test_http1_differential.py``: valid, edge-case, hostile and
pipelined answers, cut anywhere, must be refused by both or framed alike). It
stays ours because h11 in its place cost 37 us of CPU more per answer (46
against 8.5) and 12-16% of the sidecar's CPU per call on the ``httpup``
pairs of ``bench p2`` (issue 47's budget is 10%).

Failures are httpx's exceptions, so that ``upstream.errors.ErrorTranslator``
reads them as it reads httpx's own: ``httpx2.ConnectError`` /
``ConnectTimeout`` (connecting, TLS), ``WriteError``, ``ReadError``,
``RemoteProtocolError`` (a head or framing that is not HTTP/1.1, an end
before the answer did).

One connection and the answers read off it are ``upstream.http1_answer``'s.

Concurrency: ``post`` runs in the caller's task; a connection belongs to one
call from ``post`` until it is back in the idle list (synchronous code) or
closed. At most ``MAX_CONNECTIONS`` are open at once, as httpx allows. A
cancelled call closes its connection: the 2026 wire's cancellation.
"""

from __future__ import annotations

import re
import ssl
import urllib.request
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Final

import httpx2
import trio

from supervisor.upstream.http1_answer import Answer, Connection
from supervisor.wire.locks import QuickLimiter

MAX_CONNECTIONS: Final = 100
"""Connections open at once (httpx's default limit); a call beyond them waits for one."""
MAX_IDLE: Final = 64
"""Idle connections kept for reuse; more are closed when their answer ends."""
KEEP_ALIVE_SEC: Final = 4.0
"""How long an idle connection is reused (servers close theirs after 5 s and more: hypercorn, uvicorn, Node)."""
_DROPPED: Final = frozenset({b"accept", b"accept-encoding", b"connection", b"content-length", b"content-type", b"host"})
"""Client headers the request sets itself (or leaves out: ``accept-encoding``)."""
_UNSAFE: Final = re.compile(r"[\r\n\0]|[^\x00-\x7f]")
"""What a request's own header may not hold here (httpx refuses a str that is not ASCII itself)."""
_UNSAFE_BYTES: Final = re.compile(rb"[\r\n\0]")


class Http1Pool:
    """Kept-alive HTTP/1.1 connections to one endpoint, for the POSTs ``HttpCalls`` makes.

    Args:
        client: The generation's httpx client: its headers and cookie jar.
        url: The endpoint.
        tls: The TLS context of an ``https`` URL (the client's own), else None.
    """

    def __init__(self, client: httpx2.AsyncClient, url: str, tls: ssl.SSLContext | None, own_headers: bytes) -> None:
        target = httpx2.URL(url)
        self._client = client
        self._url = url
        self._host = target.host
        self._port = target.port or (443 if target.scheme == "https" else 80)
        self._ssl = tls
        self._connect_sec = client.timeout.connect
        self._head_start = b"POST %s HTTP/1.1\r\nhost: %s\r\n" % (target.raw_path, target.netloc)
        self._own_headers = own_headers
        self._idle: list[Connection] = []
        self._limiter = QuickLimiter(MAX_CONNECTIONS)
        self._closed = False
        self.opened = 0
        """Connections opened so far (tests read it)."""

    @property
    def tls(self) -> ssl.SSLContext | None:
        """The TLS context of an ``https`` endpoint (the client's own); None for ``http``."""
        return self._ssl

    @classmethod
    def for_client(cls, client: httpx2.AsyncClient, url: str, tls: ssl.SSLContext) -> Http1Pool | None:
        """A pool for ``client``'s POSTs to ``url``; None where httpx must send them.

        ``client`` is one the generation built (``compat.sdk.create_http_client``),
        with ``tls`` as its TLS context. httpx must send the POSTs of an auth flow,
        of a client with an event hook, through a proxy from the environment (any
        set: its ``NO_PROXY`` rules stay httpx's), to a URL that is not ``http``
        or ``https`` or holds credentials (httpx's basic auth), and with a header
        of the client's own that holds a line break or a NUL (httpx refuses it).
        """
        target = httpx2.URL(url)
        if target.scheme not in ("http", "https") or target.userinfo:
            return None
        if client.auth is not None or any(client.event_hooks.get(kind) for kind in ("request", "response")):
            return None
        if client.trust_env and _environment_proxy():
            return None
        own = [(name, value) for name, value in client.headers.raw if name.lower() not in _DROPPED]
        own_headers = _raw_header_lines(own)
        if own_headers is None:
            return None
        return cls(client, url, tls if target.scheme == "https" else None, own_headers)

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
                await connection.send(head + body)
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

    def _take_idle(self) -> Connection | None:
        now = trio.current_time()
        while self._idle:
            connection = self._idle.pop()  # the most recent: the likeliest to be warm and alive
            if now - connection.idle_since < KEEP_ALIVE_SEC and not connection.readable():
                return connection
            connection.close()  # too old, or the server closed it (or sent what nobody asked for)
        return None

    async def _connect(self) -> Connection:
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
        return Connection(stream, tcp.socket)

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


def _environment_proxy() -> bool:
    """Whether the environment names a proxy httpx may send through (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
    read as httpx reads them: ``urllib.request.getproxies``)."""
    proxies = urllib.request.getproxies()
    return any(proxies.get(scheme) for scheme in ("http", "https", "all"))


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
