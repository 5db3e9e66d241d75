"""The HTTP front's own request framing against h11's, on the same bytes (issue 47).

The front parses and frames HTTP/1.1 itself (``ops.http1_request``,
``ops.http1_exchange``), but for chunked request bodies (h11's): a front on h11 (its ``Connection`` for requests and
answers, on the same one-task-per-connection design) cost about 30% more
sidecar CPU per call on the ``httpfront`` pair (``python -m bench.profile_pair
httpfront``, three runs each, side by side: 326/331/398 us against
437/426/523 us); h11 for request heads alone would cost about half of that
extra (a micro-benchmark: 36-48 us a head, against 7-10 us here). So each
input here, valid, edge-case or hostile, goes whole through the front's
server over a socket pair, and through an ``h11.Connection``: both must see
the same requests (method, target, version, headers, body) in the same order,
and end the same way (the same refusal, or waiting for more). Where the front
is knowingly different, ``DIFFERENT`` says how and why; any other
disagreement fails. The app reads bodies as the SDK's transport does
(Starlette), and no input may end in a 500 or a traceback. Answers: the
front's framing of each kind of ASGI answer, read by an h11 client, must be
h11's own.
"""

from __future__ import annotations

import logging
import re
from typing import Final

import h11
import pytest
import trio
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from supervisor.ops.http1_exchange import MAX_HEAD_BYTES
from supervisor.ops.http1_server import _serve_connection
from tests.ops.test_http1_server import BOUND_SEC, until_closed

Seen = tuple[bytes, bytes, bytes, tuple[tuple[bytes, bytes], ...], bytes]
"""A request as a parser saw it: method, target, version, headers (lower-case names), body.

The headers leave out ``Content-Length`` and ``Transfer-Encoding``: h11 rewrites
them (``3, 3`` becomes ``3``, ``Chunked`` ``chunked``); their effect is compared
instead, in the body and where the next request starts.
"""
FRAMING: Final = (b"content-length", b"transfer-encoding")
Outcome = tuple[tuple[Seen, ...], int | None]
"""The requests seen, in order, and how it ended: the refusal's status, or None (waiting for more)."""

POST = b"POST /mcp HTTP/1.1\r\nHost: x\r\n"
CHUNKED = POST + b"Transfer-Encoding: chunked\r\n\r\n"
GET = b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n"

CASES: Final[dict[str, bytes]] = {
    # valid
    "content-length": POST + b"Content-Length: 3\r\n\r\nabc",
    "no body": GET,
    "HTTP/1.0 without Host": b"GET /mcp HTTP/1.0\r\n\r\n",
    "OPTIONS *": b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
    "a lower-case method": b"get /mcp HTTP/1.1\r\nHost: x\r\n\r\n",
    "a query": b"GET /mcp?a=1&b=%20 HTTP/1.1\r\nHost: x\r\n\r\n",
    "spaces and tabs around values": POST + b"X:  \t a b \t\r\nContent-Length: 1\r\n\r\nz",
    "obs-text and DEL in a value": POST + b"X: \xff\x80\x7f\r\nContent-Length: 0\r\n\r\n",
    "chunked": CHUNKED + b"2\r\nab\r\n1\r\nc\r\n0\r\n\r\n",
    "chunked, extensions and a trailer": CHUNKED + b'2;a=1\r\nab\r\n1;b="c;d"\r\nc\r\n0\r\nT: x\r\n\r\n',
    "chunked, spaces before the line end": CHUNKED + b"3 \t\r\nabc\r\n0\r\n\r\n",
    "chunked, upper-case hex": CHUNKED + b"A\r\n0123456789\r\n0\r\n\r\n",
    "Transfer-Encoding: Chunked": POST + b"Transfer-Encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    "equal Content-Length fields": POST + b"Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    "equal Content-Length values": POST + b"Content-Length: 3, 3\r\n\r\nabc",
    # pipelining: where one request ends is where the next starts
    "pipelined after a length": POST + b"Content-Length: 3\r\n\r\nabc" + GET,
    "pipelined after chunks": CHUNKED + b"3\r\nabc\r\n0\r\n\r\n" + GET,
    "pipelined after a trailer": CHUNKED + b"3\r\nabc\r\n0\r\nT: x\r\n\r\n" + GET,
    "pipelined, three": GET + GET + GET,
    "pipelined after HTTP/1.0": b"GET /mcp HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + GET,
    "pipelined after Connection: close": b"GET /mcp HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + GET,
    "pipelined, a body longer than its length": POST + b"Content-Length: 2\r\n\r\nabcGET / HTTP/1.1\r\n\r\n",
    "pipelined, then a partial head": GET + b"GET /mcp HTTP/1.1\r\nHo",
    # incomplete: both wait for more
    "a partial body": POST + b"Content-Length: 9\r\n\r\nabc",
    "a partial chunk": CHUNKED + b"9\r\nabc",
    "chunk lines ended by LF alone": CHUNKED + b"3\nabc\n0\n\n",
    # hostile: refused by both
    "conflicting Content-Length": POST + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    "conflicting Content-Length values": POST + b"Content-Length: 3, 4\r\n\r\nabcd",
    "Content-Length -3": POST + b"Content-Length: -3\r\n\r\n",
    "Content-Length +3": POST + b"Content-Length: +3\r\n\r\nabc",
    "Content-Length 0x3": POST + b"Content-Length: 0x3\r\n\r\nabc",
    "Content-Length empty": POST + b"Content-Length: \r\n\r\n",
    "Content-Length 3 3": POST + b"Content-Length: 3 3\r\n\r\nabc",
    "a transfer coding but chunked": POST + b"Transfer-Encoding: gzip, chunked\r\n\r\n",
    "chunked twice in one field": POST + b"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
    "two Transfer-Encoding fields": POST + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "Transfer-Encoding: xchunked": POST + b"Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
    "chunk size +ea": CHUNKED + b"+ea\r\n" + b"x" * 0xEA + b"\r\n0\r\n\r\n",
    "chunk size 0xea": CHUNKED + b"0xea\r\n" + b"x" * 0xEA + b"\r\n0\r\n\r\n",
    "chunk size -3": CHUNKED + b"-3\r\nabc\r\n0\r\n\r\n",
    "chunk size 1_0": CHUNKED + b"1_0\r\n" + b"x" * 16 + b"\r\n0\r\n\r\n",
    "chunk size after a space": CHUNKED + b" 3\r\nabc\r\n0\r\n\r\n",
    "chunk size, a space, an extension": CHUNKED + b"3 ;a=1\r\nabc\r\n0\r\n\r\n",
    "chunk size empty": CHUNKED + b"\r\nabc\r\n0\r\n\r\n",
    "chunk size of 21 digits": CHUNKED + b"f" * 21 + b"\r\nabc\r\n0\r\n\r\n",
    "a chunk longer than its size": CHUNKED + b"3\r\nabcd\r\n0\r\n\r\n",
    "a chunk without its CRLF": CHUNKED + b"3\r\nabc0\r\n\r\n",
    "a trailer that is not a field": CHUNKED + b"3\r\nabc\r\n0\r\nbad trailer\r\n\r\n",
    "a chunk line too long": CHUNKED + b"3;" + b"x" * MAX_HEAD_BYTES + b"\r\nabc\r\n0\r\n\r\n",
    "not a request line": b"GARBAGE\r\n\r\n",
    "two spaces in the request line": b"GET  /mcp HTTP/1.1\r\nHost: x\r\n\r\n",
    "no version": b"GET /mcp\r\nHost: x\r\n\r\n",
    "a target that is not ASCII": b"GET /\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n",
    "no Host in HTTP/1.1": b"GET /mcp HTTP/1.1\r\n\r\n",
    "two Host fields": b"GET /mcp HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
    "bare CR": b"GET /mcp HTTP/1.1\r\nHost: x\rX: y\r\n\r\n",
    "NUL in a value": b"GET /mcp HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n",
    "a space before the colon": b"GET /mcp HTTP/1.1\r\nHost : x\r\n\r\n",
    "a field line without a colon": b"GET /mcp HTTP/1.1\r\nHost: x\r\nHost\r\n\r\n",
    "an empty field name": b"GET /mcp HTTP/1.1\r\nHost: x\r\n: y\r\n\r\n",
    "obs-fold first": b"GET /mcp HTTP/1.1\r\n folded: x\r\nHost: x\r\n\r\n",
    "a head too large, no end in sight": b"GET /mcp HTTP/1.1\r\nHost: x\r\nX: " + b"y" * (MAX_HEAD_BYTES + 1),
    "pipelined, then hostile": GET + POST + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    # refused by one of them: DIFFERENT says why
    "LF alone in a head": b"GET /mcp HTTP/1.1\r\nHost: x\nX: y\r\n\r\n",
    "LF alone ends every line": b"GET /mcp HTTP/1.1\nHost: x\n\n",
    "obs-fold": b"GET /mcp HTTP/1.1\r\nHost: x\r\nX: a\r\n folded\r\n\r\n",
    "an expectation but 100-continue": b"GET /mcp HTTP/1.1\r\nHost: x\r\nExpect: the-unexpected\r\n\r\n",
    "an HTTP/2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "HTTP/1.2": b"GET /mcp HTTP/1.2\r\nHost: x\r\n\r\n",
    "an absolute-form target": b"GET http://x/mcp HTTP/1.1\r\nHost: x\r\n\r\n",
    "a target that is not a path": b"GET mcp HTTP/1.1\r\nHost: x\r\n\r\n",
    "Content-Length with Transfer-Encoding (CL.TE)": POST
    + b"Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
    "Transfer-Encoding with Content-Length (TE.CL)": POST
    + b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5c\r\nGPOST / HTTP/1.1\r\n\r\n0\r\n\r\n",
    "Transfer-Encoding in HTTP/1.0": b"POST /mcp HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "too many fields": b"GET /mcp HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 101 + b"\r\n",
    "a head too large, whole": b"GET /mcp HTTP/1.1\r\nHost: x\r\nX: " + b"y" * MAX_HEAD_BYTES + b"\r\n\r\n",
    "an empty line first": b"\r\n" + GET,
}

DIFFERENT: Final[dict[str, tuple[int | None, int | None, str]]] = {
    # case: how the front ends (its refusal, None: served or waiting), how h11 does, and why that is lawful
    "LF alone in a head": (400, None, "RFC 9112 2.2: a recipient MAY take a lone LF as a line end; the front does not"),
    "LF alone ends every line": (
        None,
        None,
        "as above: the front waits for CRLF CRLF (408 after HEAD_SEC), h11 serves",
    ),
    "obs-fold": (400, None, "RFC 9112 5.2: a server rejects obs-fold with 400 or unfolds it (h11)"),
    "an expectation but 100-continue": (417, None, "RFC 9110 10.1.1: a server MAY answer an unknown one 417"),
    "an HTTP/2 preface": (505, 400, "only HTTP/1.0 and 1.1 are served (h11 serves PRI *, then refuses SM)"),
    "HTTP/1.2": (505, None, "as above"),
    "an absolute-form target": (400, None, "only origin-form targets are served (a host sends no other)"),
    "a target that is not a path": (400, None, "as above"),
    "Content-Length with Transfer-Encoding (CL.TE)": (400, None, "RFC 9112 6.1: MAY reject (h11 frames by the coding)"),
    "Transfer-Encoding with Content-Length (TE.CL)": (400, None, "as above (h11 waits for the 0x5c bytes)"),
    "Transfer-Encoding in HTTP/1.0": (400, None, "RFC 9112 6.1: MUST treat the framing as faulty (h11 frames it)"),
    "too many fields": (431, None, "the front's MAX_HEADERS (hypercorn's limit); h11 has none"),
    "a head too large, whole": (431, None, "the front's MAX_HEAD_BYTES; h11 bounds only a head still coming"),
    "an empty line first": (None, 400, "RFC 9112 2.2: a server SHOULD ignore an empty line before a request"),
}


async def through_the_front(data: bytes) -> Outcome:
    """What the front's server saw of ``data``, sent whole on a socket pair (then the write side shut).

    The app reads the body as the SDK's transport does (Starlette's ``Request.body()``, which raises
    ``ClientDisconnect`` when the server says the client left) and answers 200.
    """
    seen: list[Seen] = []

    async def recording(scope: Scope, receive: Receive, send: Send) -> None:
        body = await Request(scope, receive).body()
        target = scope["raw_path"] + (b"?" + scope["query_string"] if scope["query_string"] else b"")
        headers = tuple((name, value) for name, value in scope["headers"] if name not in FRAMING)
        seen.append((scope["method"].encode(), target, scope["http_version"].encode(), headers, body))
        await Response(status_code=200)(scope, receive, send)

    ours, theirs = trio.socket.socketpair()
    async with trio.SocketStream(theirs) as client, trio.open_nursery() as nursery:
        nursery.start_soon(_serve_connection, recording, trio.SocketStream(ours))
        await client.send_all(data)
        await client.send_eof()
        answers = await until_closed(client)
    statuses = [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", answers) if not code.startswith(b"1")]
    assert statuses[: len(seen)] == [200] * len(seen) and len(statuses) <= len(seen) + 1, answers
    return tuple(seen), statuses[len(seen)] if len(statuses) > len(seen) else None


def through_h11(data: bytes) -> Outcome:
    """What an ``h11.Connection`` saw of ``data``, each request answered 200 as the front's recorder does."""
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
    connection.receive_data(data)
    seen: list[Seen] = []
    request: h11.Request | None = None
    body = b""
    try:
        while True:
            event = connection.next_event()
            if isinstance(event, h11.Request):
                request, body = event, b""
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                headers = tuple((name, value) for name, value in request.headers if name not in FRAMING)
                seen.append((request.method, request.target, request.http_version, headers, body))
                connection.send(h11.Response(status_code=200, headers=[(b"content-length", b"0")]))
                connection.send(h11.EndOfMessage())
                if connection.our_state is not h11.DONE or connection.their_state is not h11.DONE:
                    return tuple(seen), None  # the connection ends here (HTTP/1.0, Connection: close)
                connection.start_next_cycle()
            else:
                return tuple(seen), None  # NEED_DATA: waiting for more
    except h11.RemoteProtocolError as refused:
        return tuple(seen), refused.error_status_hint


@pytest.mark.parametrize("case", list(CASES))
async def test_the_front_frames_each_request_as_h11_does_or_differs_only_as_documented_and_never_fails(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with trio.fail_after(BOUND_SEC):
        front = await through_the_front(CASES[case])
    reference = through_h11(CASES[case])
    if case not in DIFFERENT:
        assert front == reference
    else:
        front_end, h11_end, _why = DIFFERENT[case]
        assert (front[1], reference[1]) == (front_end, h11_end) and front != reference
    # Never a 500 (``through_the_front`` takes none for a refusal), never a traceback or a warning in the log.
    assert front[1] != 500
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info] == []


def test_every_documented_difference_names_a_case() -> None:
    assert set(DIFFERENT) <= set(CASES)


REQUESTS: Final = {
    "HTTP/1.1": b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.0": b"POST /mcp HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
    "HEAD": b"HEAD /mcp HTTP/1.1\r\nHost: x\r\n\r\n",
    "Connection: close": b"POST /mcp HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
}
ANSWERS: Final[dict[str, tuple[int, list[tuple[bytes, bytes]], list[bytes]]]] = {
    # answer: the status, the app's headers, and its body messages (the last has more_body false)
    "a length": (200, [(b"content-type", b"application/json"), (b"content-length", b"2")], [b"{}"]),
    "a length, two messages": (200, [(b"content-length", b"5")], [b"ab", b"cde"]),
    "no length, one message": (200, [(b"content-type", b"text/plain")], [b"hello"]),
    "an event stream": (200, [(b"content-type", b"text/event-stream")], [b"data: 1\n\n", b"", b"data: 2\n\n", b""]),
    "no content": (204, [], [b""]),
    "the app's Connection: close": (200, [(b"connection", b"close"), (b"content-length", b"1")], [b"x"]),
    "an error": (404, [(b"content-length", b"9")], [b"not found"]),
}
Answer = tuple[int, list[tuple[bytes, bytes]], bytes, bool]
"""An answer as h11 reads it: status, headers (lower-case names, sorted), body, and whether the connection goes on.

The headers leave out ``date``, and in a HEAD answer ``transfer-encoding``
(h11 names the ``chunked`` a GET would get; RFC 9110 9.3.2 lets a server leave
it out).
"""


def read_answer(request: bytes, answer: bytes) -> Answer:
    """``answer`` (bytes off the wire) read by an h11 client that sent ``request``."""
    client = h11.Connection(h11.CLIENT)
    server = h11.Connection(h11.SERVER)
    server.receive_data(request)
    sent = server.next_event()
    assert isinstance(sent, h11.Request)
    # An h11 client speaks HTTP/1.1 only: a 1.0 request is sent as 1.1 with Connection: close (and a Host).
    extra = [(b"host", b"x"), (b"connection", b"close")] if sent.http_version == b"1.0" else []
    client.send(h11.Request(method=sent.method, target=sent.target, headers=[*extra, *sent.headers]))
    client.send(h11.EndOfMessage())
    client.receive_data(answer)
    client.receive_data(b"")  # the end of the connection: an answer framed by it ends there
    response, body = client.next_event(), b""
    assert isinstance(response, h11.Response)
    while not isinstance(event := client.next_event(), h11.EndOfMessage):
        assert isinstance(event, h11.Data)
        body += event.data
    left_out = (b"date", b"transfer-encoding") if sent.method == b"HEAD" else (b"date",)
    headers = sorted((name, value) for name, value in response.headers if name not in left_out)
    return response.status_code, headers, body, client.their_state is h11.DONE


async def framed_by_the_front(
    request: bytes, status: int, headers: list[tuple[bytes, bytes]], bodies: list[bytes]
) -> bytes:
    async def answering(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        await send({"type": "http.response.start", "status": status, "headers": headers})
        for index, body in enumerate(bodies):
            await send({"type": "http.response.body", "body": body, "more_body": index < len(bodies) - 1})

    ours, theirs = trio.socket.socketpair()
    async with trio.SocketStream(theirs) as client, trio.open_nursery() as nursery:
        nursery.start_soon(_serve_connection, answering, trio.SocketStream(ours))
        await client.send_all(request)
        await client.send_eof()
        return await until_closed(client)


def framed_by_h11(request: bytes, status: int, headers: list[tuple[bytes, bytes]], bodies: list[bytes]) -> bytes:
    server = h11.Connection(h11.SERVER)
    server.receive_data(request)
    sent = server.next_event()
    assert isinstance(sent, h11.Request)
    out = server.send(h11.Response(status_code=status, headers=headers)) or b""
    bodiless = status == 204 or sent.method == b"HEAD"  # what a server must not send, h11 refuses to frame
    for body in bodies:
        out += b"" if bodiless or not body else server.send(h11.Data(data=body)) or b""
    return out + (server.send(h11.EndOfMessage()) or b"")


@pytest.mark.parametrize("answer", list(ANSWERS))
@pytest.mark.parametrize("request_kind", list(REQUESTS))
async def test_the_front_frames_each_answer_as_h11_does(request_kind: str, answer: str) -> None:
    request, (status, headers, bodies) = REQUESTS[request_kind], ANSWERS[answer]
    with trio.fail_after(BOUND_SEC):
        front = await framed_by_the_front(request, status, headers, bodies)
    reference = framed_by_h11(request, status, headers, bodies)
    assert read_answer(request, front) == read_answer(request, reference)
