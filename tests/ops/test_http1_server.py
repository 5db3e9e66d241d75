"""The HTTP front's server (``ops.http1_server``) on raw sockets, its answers read by h11 (nobody here wrote it).

In-process and fast: each test serves a small ASGI app on loopback port 0 and
talks to it over a real TCP connection, bounded by ``trio.fail_after``; the
timeouts run on the virtual clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h11
import pytest
import trio
import trio.testing
from starlette.types import Message, Receive, Scope, Send

from supervisor.ops import http1_server
from supervisor.ops.http1_server import HEAD_SEC, IDLE_SEC, MAX_DRAIN_BYTES, serve_http1
from tests.sidecar import scaled

BOUND_SEC = scaled(10)
HOST = b"Host: 127.0.0.1\r\n"


class Served:
    """An app served on a loopback port; ``connect`` opens a connection to it (closed when serving ends)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._streams: list[trio.SocketStream] = []

    async def connect(self) -> trio.SocketStream:
        stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        self._streams.append(stream)
        return stream

    async def aclose(self) -> None:
        for stream in self._streams:
            await stream.aclose()


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[Served]:
    """``app`` served on a loopback port."""
    async with trio.open_nursery() as nursery:
        (url,) = await nursery.start(
            lambda task_status: serve_http1(
                app, host="127.0.0.1", port=0, settings_key="supervisor.front", task_status=task_status
            )
        )
        served = Served(int(url.rsplit(":", 1)[1]))
        try:
            yield served
        finally:
            await served.aclose()
            nursery.cancel_scope.cancel()


async def read_answers(stream: trio.SocketStream, count: int) -> list[tuple[h11.Response, bytes]]:
    """``count`` whole answers off ``stream``, parsed by h11, each with its body."""
    parser = h11.Connection(h11.CLIENT)
    answers: list[tuple[h11.Response, bytes]] = []
    for _ in range(count):
        response, body = await _next_answer(parser, stream)
        answers.append((response, body))
        parser.start_next_cycle()
    return answers


async def _next_answer(parser: h11.Connection, stream: trio.SocketStream) -> tuple[h11.Response, bytes]:
    # h11 reads an answer to a request it saw sent: the one the test sent itself, as far as framing goes.
    parser.send(h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "0")]))
    parser.send(h11.EndOfMessage())
    response: h11.Response | None = None
    body = b""
    while True:
        event = parser.next_event()
        if event is h11.NEED_DATA:
            parser.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert response is not None
            return response, body


async def until_closed(stream: trio.SocketStream) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while data := await stream.receive_some(65536):
        received += data
    return received


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers with what it was sent: the method, path, query and the body read whole."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    text = b"%s %s?%s %s" % (scope["method"].encode(), scope["path"].encode(), scope["query_string"], body)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(text))]})
    await send({"type": "http.response.body", "body": text})


def recording_echo() -> tuple[list[Scope], Any]:
    """``echo``, and the scopes it was called with."""
    scopes: list[Scope] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        scopes.append(scope)
        await echo(scope, receive, send)

    return scopes, app


def post(path: bytes, body: bytes, *headers: bytes) -> bytes:
    return b"POST %s HTTP/1.1\r\n%scontent-length: %d\r\n%s\r\n%s" % (path, HOST, len(body), b"".join(headers), body)


async def test_pipelined_requests_on_one_kept_alive_connection_are_answered_in_order() -> None:
    with trio.fail_after(BOUND_SEC):
        async with serving(echo) as served:
            stream = await served.connect()
            await stream.send_all(post(b"/mcp?a=1", b"one") + post(b"/mcp/%7Ev", b"two"))
            (first, one), (second, two) = await read_answers(stream, 2)
            assert (first.status_code, one) == (200, b"POST /mcp?a=1 one")
            assert (second.status_code, two) == (200, b"POST /mcp/~v? two")  # the path decoded
            # Still open: a third request on the same connection.
            await stream.send_all(post(b"/mcp", b"three"))
            ((third, three),) = await read_answers(stream, 1)
            assert three == b"POST /mcp? three"
            assert (b"connection", b"close") not in third.headers


async def test_a_chunked_body_reaches_the_app_whole_and_a_streamed_answer_shows_its_head_before_its_body() -> None:
    release = trio.Event()
    seen: list[bytes] = []

    async def streaming(scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        seen.append(message["body"])
        while message.get("more_body"):
            message = await receive()
            seen.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await release.wait()
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"data: 2\n\n", "more_body": False})

    with trio.fail_after(BOUND_SEC):
        async with serving(streaming) as served:
            stream = await served.connect()
            chunked = b"4;ext=1\r\nwiki\r\n6\r\npedia \r\n0\r\ntrailer: x\r\n\r\n"
            await stream.send_all(b"POST /mcp HTTP/1.1\r\n" + HOST + b"transfer-encoding: chunked\r\n\r\n" + chunked)
            head = await stream.receive_some(65536)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"transfer-encoding: chunked\r\n" in head
            assert head.endswith(b"\r\n\r\n")  # the head alone: nothing of the body was sent yet
            release.set()
            parser = h11.Connection(h11.CLIENT)
            parser.receive_data(head)
            _, body = await _next_answer(parser, stream)
            assert body == b"data: 1\n\ndata: 2\n\n"
    assert b"".join(seen) == b"wikipedia "


async def test_the_client_hanging_up_is_http_disconnect_for_an_app_waiting_on_receive() -> None:
    received: list[Message] = []
    waiting, ended = trio.Event(), trio.Event()

    async def watching(scope: Scope, receive: Receive, send: Send) -> None:
        received.append(await receive())
        waiting.set()
        received.append(await receive())  # the body was read: this waits for the end of the connection
        ended.set()

    with trio.fail_after(BOUND_SEC):
        async with serving(watching) as served:
            stream = await served.connect()
            await stream.send_all(post(b"/mcp", b"{}"))
            await waiting.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert len(received) == 1
            await stream.aclose()
            await ended.wait()
    assert received == [{"type": "http.request", "body": b"{}", "more_body": False}, {"type": "http.disconnect"}]


async def test_receive_once_the_answer_is_complete_is_disconnect_and_a_request_without_a_body_is_one_message() -> None:
    received: list[Message] = []

    async def answering_then_reading(scope: Scope, receive: Receive, send: Send) -> None:
        received.append(await receive())
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        received.append(await receive())

    with trio.fail_after(BOUND_SEC):
        async with serving(answering_then_reading) as served:
            stream = await served.connect()
            await stream.send_all(b"GET /mcp HTTP/1.1\r\n" + HOST + b"\r\n")
            ((answer, body),) = await read_answers(stream, 1)
    assert (answer.status_code, body) == (204, b"")
    assert received == [{"type": "http.request", "body": b"", "more_body": False}, {"type": "http.disconnect"}]


async def test_the_scope_says_what_the_request_said() -> None:
    scopes, recording = recording_echo()
    with trio.fail_after(BOUND_SEC):
        async with serving(recording) as served:
            stream = await served.connect()
            headers = (b"X-Thing:  value \r\n", b"MCP-Method: tools/call\r\n")
            await stream.send_all(post(b"/mcp/a%20b?x=%20", b"", *headers))
            await read_answers(stream, 1)
    (scope,) = scopes
    assert scope["type"] == "http" and scope["http_version"] == "1.1" and scope["scheme"] == "http"
    assert (scope["method"], scope["path"], scope["raw_path"], scope["query_string"]) == (
        "POST",
        "/mcp/a b",
        b"/mcp/a%20b",
        b"x=%20",
    )
    assert (b"x-thing", b"value") in scope["headers"] and (b"mcp-method", b"tools/call") in scope["headers"]
    assert scope["client"][0] == "127.0.0.1" and scope["server"] == ("127.0.0.1", served.port)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),  # an HTTP/2 preface
        (b"GET /mcp HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", 400),  # a bare LF
        (b"GET /mcp HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n", 400),
        (b"GET /mcp HTTP/1.1\r\nHost: x\r\nX: a\r\n folded\r\n\r\n", 400),
        (b"GET /mcp HTTP/1.1\r\nHost : x\r\n\r\n", 400),  # a space before the colon
        (b"GET /mcp HTTP/1.1\r\nHost: x\r\nHost\r\n\r\n", 400),  # no colon, though the name was just seen
        (b"GET /mcp HTTP/1.1\r\nHost: x\rX: y\r\n\r\n", 400),  # a bare CR
        (b"GET mcp HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
        (b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: -3\r\n\r\n", 400),
        (b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"POST /mcp HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST /mcp HTTP/1.1\r\nHost: x\r\nExpect: the-unexpected\r\n\r\n", 417),
        (b"GET /mcp HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 101 + b"\r\n", 431),
        (b"GET /mcp HTTP/1.1\r\nHost: x\r\nX: " + b"y" * http1_server.MAX_HEAD_BYTES + b"\r\n\r\n", 431),
        (b"GET /mcp HTTP/1.1\r\nHost: x\r\nX: " + b"y" * (http1_server.MAX_HEAD_BYTES + 1), 431),  # no end in sight
    ],
    ids=lambda value: value if isinstance(value, int) else value[:32].decode("latin-1"),
)
async def test_a_head_that_is_not_http_1_1_or_smuggles_is_refused_and_the_connection_closed_before_the_app_runs(
    request_bytes: bytes, status: int
) -> None:
    called, app = recording_echo()
    with trio.fail_after(BOUND_SEC):
        async with serving(app) as served:
            stream = await served.connect()
            await stream.send_all(request_bytes)
            answer = await until_closed(stream)
    assert answer.startswith(b"HTTP/1.1 %d " % status), answer[:80]
    assert b"\r\nconnection: close\r\n" in answer
    assert called == []


async def test_a_head_that_stops_coming_is_408_after_head_sec_and_an_idle_connection_closes_after_idle_sec(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(BOUND_SEC * 10):
        async with serving(echo) as served:
            slow = await served.connect()
            started = trio.current_time()
            await slow.send_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")  # and nothing more
            answer = await until_closed(slow)
            assert answer.startswith(b"HTTP/1.1 408 ")
            assert trio.current_time() - started == pytest.approx(HEAD_SEC, abs=0.01)

            idle = await served.connect()
            await idle.send_all(post(b"/mcp", b"x"))
            await read_answers(idle, 1)
            answered = trio.current_time()
            assert await until_closed(idle) == b""  # closed without a word
            assert trio.current_time() - answered == pytest.approx(IDLE_SEC, abs=0.01)


async def test_an_app_that_fails_before_answering_gets_500_and_the_connection_closes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("broken on purpose")

    with trio.fail_after(BOUND_SEC):
        async with serving(failing) as served:
            stream = await served.connect()
            await stream.send_all(post(b"/mcp", b"{}"))
            answer = await until_closed(stream)
    assert answer.startswith(b"HTTP/1.1 500 ")
    assert any("broken on purpose" in (r.exc_text or "") for r in caplog.records)


async def test_expect_100_continue_is_answered_when_the_app_reads_the_body() -> None:
    with trio.fail_after(BOUND_SEC):
        async with serving(echo) as served:
            stream = await served.connect()
            await stream.send_all(post(b"/mcp", b"", b"expect: 100-continue\r\n").replace(b": 0", b": 2"))
            assert await stream.receive_some(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
            await stream.send_all(b"ok")
            ((answer, body),) = await read_answers(stream, 1)
    assert (answer.status_code, body) == (200, b"POST /mcp? ok")


@pytest.mark.parametrize(("size", "reused"), [(100, True), (MAX_DRAIN_BYTES + 1, False)])
async def test_a_body_the_app_did_not_read_is_read_off_so_the_connection_serves_on_unless_it_is_large(
    size: int, reused: bool
) -> None:
    async def refusing(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    with trio.fail_after(BOUND_SEC):
        async with serving(refusing) as served:
            stream = await served.connect()
            await stream.send_all(post(b"/mcp", b"x" * size))
            ((answer, _),) = await read_answers(stream, 1)
            assert answer.status_code == 413
            if reused:
                await stream.send_all(post(b"/mcp", b""))
                ((again, _),) = await read_answers(stream, 1)
                assert again.status_code == 413
            else:
                with pytest.raises(trio.BrokenResourceError):
                    await stream.send_all(b"x" * (1 << 20))  # closed by the server: the write fails
                    await until_closed(stream)


async def test_an_http_1_0_request_gets_an_answer_that_ends_with_the_connection() -> None:
    async def streamed(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"one ", "more_body": True})
        await send({"type": "http.response.body", "body": b"two"})

    with trio.fail_after(BOUND_SEC):
        async with serving(streamed) as served:
            stream = await served.connect()
            await stream.send_all(b"GET /mcp HTTP/1.0\r\nHost: x\r\n\r\n")
            answer = await until_closed(stream)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"connection: close" in head and b"transfer-encoding" not in head
    assert body == b"one two"


async def test_an_answer_shorter_than_its_content_length_ends_its_connection_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def short(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"10")]})
        await send({"type": "http.response.body", "body": b"12345"})

    with trio.fail_after(BOUND_SEC * 10):
        async with serving(short) as served:
            stream = await served.connect()
            started = trio.current_time()
            await stream.send_all(post(b"/mcp", b""))
            answer = await until_closed(stream)
            assert trio.current_time() - started < IDLE_SEC  # closed now, not once idle
    assert answer.endswith(b"\r\n\r\n12345") and b"connection: close" not in answer
