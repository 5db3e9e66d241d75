"""The fast path's own answer parser (``upstream.http1_answer``) against h11, on the same bytes (issue 47).

The HTTP upstream client keeps its own parser of answers because h11 in its
place cost 37 us of CPU more per answer (46 against 8.5, in one process over
a 120-byte JSON answer) and 12-16% of the sidecar's CPU per call on the
``httpup`` pairs of ``bench p2``. This test holds it to h11 instead: each
answer below, valid, edge-case or hostile, cut into pieces, is read by our
``Answer`` and by an ``h11.Connection`` in the client role, and the two must
agree on the framing: refused by both, or the same status, headers, body and
whether the connection may carry the next request.

Fast lane: no socket; the bytes come from a stream that ends when they do.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import h11
import httpx2
import pytest
import trio

from supervisor.upstream.http1_answer import MAX_HEAD_BYTES, Answer, Connection
from tests.sidecar import scaled

Outcome = tuple[int, dict[str, str], bytes, bool] | str
"""(status, headers, body, reusable), or ``"refused"``."""

JSON: Final = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"

ANSWERS: Final[dict[str, bytes]] = {
    "content-length": JSON + b"content-length: 2\r\n\r\n{}",
    "chunked": JSON + b"transfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    "chunked-in-two": JSON + b"transfer-encoding: chunked\r\n\r\n1\r\n{\r\n1\r\n}\r\n0\r\n\r\n",
    "chunk-extension": JSON + b"transfer-encoding: chunked\r\n\r\n2;name=value\r\n{}\r\n0\r\n\r\n",
    "chunk-size-upper-hex": JSON + b"transfer-encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n",
    "chunk-trailers": JSON + b"transfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nx-trailer: yes\r\n\r\n",
    "until-the-end": JSON + b"\r\n{}",
    "http-1.0": b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
    "connection-close": JSON + b"connection: close\r\ncontent-length: 2\r\n\r\n{}",
    "interim-100": b"HTTP/1.1 100 Continue\r\n\r\n" + JSON + b"content-length: 2\r\n\r\n{}",
    "no-content": b"HTTP/1.1 204 No Content\r\n\r\n",
    "no-reason": b"HTTP/1.1 200\r\ncontent-length: 2\r\n\r\n{}",
    "same-length-twice": JSON + b"content-length: 2\r\ncontent-length: 2\r\n\r\n{}",
    "repeated-header": JSON + b"x-a: 1\r\nx-a: 2\r\ncontent-length: 0\r\n\r\n",
    "cookies": JSON + b"set-cookie: a=1\r\nset-cookie: b=2\r\ncontent-length: 0\r\n\r\n",
    "pipelined-extra": JSON + b"content-length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\n",
    # hostile
    "two-lengths": JSON + b"content-length: 1\r\ncontent-length: 2\r\n\r\n{}",
    "negative-length": JSON + b"content-length: -1\r\n\r\n",
    "plus-length": JSON + b"content-length: +2\r\n\r\n{}",
    "length-and-chunked": JSON + b"content-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    "chunked-not-last": JSON + b"transfer-encoding: chunked, gzip\r\n\r\n{}",
    "unknown-coding": JSON + b"transfer-encoding: gzip\r\n\r\n{}",
    **{
        f"chunk-size-{name}": JSON + b"transfer-encoding: chunked\r\n\r\n%s\r\n{}\r\n0\r\n\r\n" % size
        for name, size in (
            ("plus", b"+2"),
            ("0x", b"0x2"),
            ("minus", b"-2"),
            ("space", b" 2"),
            ("empty", b""),
            ("then-space", b"2 "),
        )
    },
    "chunk-longer-than-its-size": JSON + b"transfer-encoding: chunked\r\n\r\n1\r\n{}\r\n0\r\n\r\n",
    "truncated-body": JSON + b"content-length: 9\r\n\r\n{}",
    "truncated-head": b"HTTP/1.1 200 OK\r\ncontent-len",
    "nothing": b"",
    "not-http": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    "http-2": b"HTTP/2 200 OK\r\n\r\n",
    "status-letters": b"HTTP/1.1 2OO OK\r\n\r\n",
    "no-colon": JSON + b"no colon here\r\n\r\n",
    "space-before-colon": JSON + b"x-a : 1\r\ncontent-length: 0\r\n\r\n",
    "switching-protocols": b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\n\r\n",
    "endless-head": JSON + b"x: y\r\n" * (MAX_HEAD_BYTES // 6 + 10),
}
"""The answers both parsers read, by name."""

KNOWN: Final[dict[str, str]] = {}
"""Answers on which the two may differ, and why (none today)."""


class _Pieces(trio.abc.ReceiveStream):
    """The bytes of one answer, ``size`` at a time, then the end of the connection."""

    def __init__(self, data: bytes, size: int) -> None:
        self._pieces: Iterator[bytes] = iter([data[i : i + size] for i in range(0, len(data), size)])

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        return next(self._pieces, b"")

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class _NoSocket:
    def fileno(self) -> int:
        return -1


async def _ours(data: bytes, size: int) -> Outcome:
    connection = Connection(_Pieces(data, size), _NoSocket())  # type: ignore[arg-type]  # a stream, read by receive_some
    try:
        answer = await Answer.read(connection)
        body = await answer.aread()
    except httpx2.RemoteProtocolError:
        return "refused"
    return answer.status_code, dict(answer.headers, **_cookies(answer.set_cookies)), body, answer.reusable


async def _h11(data: bytes, size: int) -> Outcome:
    stream = _Pieces(data, size)
    parser = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
    parser.send(h11.Request(method=b"POST", target=b"/mcp", headers=[(b"host", b"a.test"), (b"content-length", b"2")]))
    parser.send(h11.Data(data=b"{}"))
    parser.send(h11.EndOfMessage())
    status, headers, cookies, body = 0, dict[str, str](), list[str](), b""
    try:
        while True:
            event = parser.next_event()
            if event is h11.NEED_DATA:
                parser.receive_data(await stream.receive_some())
            elif isinstance(event, h11.Response):
                status = event.status_code
                for name, value in event.headers:
                    key, text = name.decode("latin-1"), value.decode("latin-1")
                    if key == "set-cookie":
                        cookies.append(text)
                    else:
                        headers[key] = f"{headers[key]}, {text}" if key in headers else text
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                return "refused"
    except h11.RemoteProtocolError:
        return "refused"
    left, closed = parser.trailing_data
    reusable = parser.our_state is h11.DONE and parser.their_state is h11.DONE and not left and not closed
    return status, dict(headers, **_cookies(cookies)), body, reusable


def _cookies(values: list[str]) -> dict[str, str]:
    return {"set-cookie": " | ".join(values)} if values else {}


@pytest.mark.parametrize("size", [1, 7, 1 << 20], ids=["byte-by-byte", "7-byte-pieces", "whole"])
@pytest.mark.parametrize("name", list(ANSWERS))
async def test_the_fast_paths_answer_parser_frames_every_answer_as_h11_does(name: str, size: int) -> None:
    with trio.fail_after(scaled(30)):  # byte by byte, an endless head is thousands of reads on a busy box
        ours, theirs = await _ours(ANSWERS[name], size), await _h11(ANSWERS[name], size)
    if name in KNOWN:
        pytest.skip(KNOWN[name])
    assert ours == theirs
