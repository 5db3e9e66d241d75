"""A request's head as the HTTP front's server reads it (RFC 9112): parsed, framed, or refused.

``parse_head`` turns the bytes before a head's empty line into a ``Request``
(what the ASGI scope says, and how its body is framed), or raises ``Refused``
with the status that says what is wrong; ``refusal`` is that answer's bytes.
What is refused is what request smuggling is made of (``ops.http1_server``
lists it). No I/O; the only state is the names already checked (bounded).
"""

from __future__ import annotations

import email.utils
import re
import time
from http import HTTPStatus
from typing import Final

MAX_HEADERS: Final = 100
"""Header fields a request may have (431 beyond)."""
MAX_NAMES_SEEN: Final = 256
"""Header names whose check and lower-casing ``parse_head`` keeps."""
_TOKEN: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NAMES_SEEN: dict[bytes, bytes] = {}
"""A header name as it came (a token, checked) -> lower-cased."""
PHRASES: Final = {status.value: status.phrase.encode() for status in HTTPStatus}
"""Each status code's reason phrase."""


class Refused(Exception):
    """A request this server answers itself with ``status`` and closes the connection."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


class Request:
    """A request's head, parsed: what the ASGI scope says, and how its body is framed."""

    __slots__ = ("chunked", "expect_continue", "head", "headers", "http10", "keep_alive", "length", "method", "target")

    def __init__(self, method: str, target: bytes, http10: bool, headers: list[tuple[bytes, bytes]]) -> None:
        self.head = b""
        """The head's bytes, kept for a chunked body's framing (``ops.http1_exchange``: h11's)."""
        self.method = method
        self.target = target
        self.http10 = http10
        self.headers = headers
        self.length = 0
        self.chunked = False
        self.keep_alive = not http10
        self.expect_continue = False


def parse_head(head: bytes) -> Request:
    """The request of ``head``, or ``Refused`` with the status that says what is wrong with it."""
    pairs = head.count(b"\r\n")  # every CR and every LF is one of a CRLF pair iff the counts agree
    if head.count(b"\r") != pairs or head.count(b"\n") != pairs or b"\0" in head:
        raise Refused(400, "Bare CR, LF or NUL in the request head")
    request_line, *lines = head.split(b"\r\n")
    parts = request_line.split(b" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]):
        raise Refused(400, "Not an HTTP request line")
    method, target, version = parts
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise Refused(505 if version.startswith(b"HTTP/") else 400, "Only HTTP/1.1 is served here")
    if not (target.startswith(b"/") or (target == b"*" and method == b"OPTIONS")) or not target.isascii():
        raise Refused(400, "Not a request target this server serves")
    if len(lines) > MAX_HEADERS:
        raise Refused(431, "Too many request header fields")
    headers = []
    names = _NAMES_SEEN
    for line in lines:
        name, colon, value = line.partition(b":")
        lowered = names.get(name) if colon else None
        if lowered is None:
            if not colon or not _TOKEN.fullmatch(name):
                raise Refused(400, "Not a header field line")
            if len(names) >= MAX_NAMES_SEEN:  # a host sends the same few names each time: bounded all the same
                names.clear()
            lowered = names[name] = name.lower()
        headers.append((lowered, value.strip(b" \t")))
    request = Request(method.decode("ascii"), target, version == b"HTTP/1.0", headers)
    _frame(request)
    if request.chunked:
        request.head = head
    return request


def _frame(request: Request) -> None:
    """Read the headers that frame the body and the connection into ``request``."""
    lengths: set[bytes] = set()
    codings: list[bytes] = []
    hosts = 0
    for name, value in request.headers:
        if name == b"content-length":
            lengths.update(v.strip() for v in value.split(b","))
        elif name == b"transfer-encoding":
            codings += [c.strip().lower() for c in value.split(b",") if c.strip()]
        elif name == b"connection":
            if b"close" in (t.strip().lower() for t in value.split(b",")):
                request.keep_alive = False
        elif name == b"host":
            hosts += 1
        elif name == b"expect":
            if value.lower() != b"100-continue":
                raise Refused(417, "Only 100-continue is expected here")
            request.expect_continue = not request.http10
    if hosts > 1 or not (hosts or request.http10):  # RFC 9112 3.2: a server MUST answer 400
        raise Refused(400, "Not one Host header field")
    if codings:
        if lengths or request.http10:
            raise Refused(400, "Transfer-Encoding with Content-Length, or in HTTP/1.0")
        if codings != [b"chunked"]:
            raise Refused(501, "Only the chunked transfer coding is served here")
        request.chunked = True
    elif lengths:
        (length,) = lengths if len(lengths) == 1 else (b"",)
        if not length.isdigit() or len(length) > 18:
            raise Refused(400, "Not one Content-Length")
        request.length = int(length)


def refusal(status: int, text: str) -> bytes:
    """A whole answer of this server's own (and the connection's end)."""
    body = text.encode()
    return (
        b"HTTP/1.1 %d %b\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
        b"connection: close\r\ndate: %b\r\n\r\n%b" % (status, PHRASES.get(status, b""), len(body), date_header(), body)
    )


class _DateHeader:
    """The ``Date`` header's value, formatted once a second (wall-clock time: it is what the header says)."""

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = b""

    def __call__(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second, self._text = now, email.utils.formatdate(now, usegmt=True).encode()
        return self._text


date_header: Final = _DateHeader()
