"""The fast path's own HTTP/1.1 client (``upstream.http1``) against a real socket that answers scripted bytes.

The server is a trio TCP listener on a loopback port the OS picks: each test
scripts what it writes back to each request (a head, a body framed one way or
another, garbage, an early close) and checks what ``HttpCalls.request`` makes
of it, and what the connections did. Against real streamable-HTTP servers: the
fidelity suites and ``tests/e2e/test_failures.py`` over HTTP upstreams.
"""

from __future__ import annotations

import gzip
import json
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED

from supervisor.auth.oauth import client_metadata
from supervisor.auth.token_store import FileTokenStorage, token_file
from supervisor.compat.oauth import SupervisorOAuthProvider
from supervisor.compat.sdk import create_http_client
from supervisor.config.servers import OAuthSettings
from supervisor.upstream import http_calls
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.http1 import KEEP_ALIVE_SEC, Http1Pool
from supervisor.upstream.http_calls import HttpCalls
from tests.sidecar import scaled

Script = Callable[[dict[str, Any], str], list[bytes]]
"""What the server writes back to one request (its body, its path): pieces written one by one."""
CLOSE = b"<close>"
"""A piece that makes the server close the connection."""


@dataclass
class _Server:
    script: Script
    url: str = ""
    connections: int = 0
    requests: list[tuple[bytes, dict[str, Any]]] = field(default_factory=list)
    """Each request's head and body, in order."""
    closed_by_peer: trio.Event = field(default_factory=trio.Event)
    closed: trio.Event = field(default_factory=trio.Event)
    """Set once the server closed a connection itself (``CLOSE``)."""

    async def serve(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        try:
            await self._serve(stream)
        except trio.BrokenResourceError:
            self.closed_by_peer.set()  # the client closed it while we wrote

    async def _serve(self, stream: trio.SocketStream) -> None:
        buffer = b""
        while True:
            while b"\r\n\r\n" not in buffer:
                data = await stream.receive_some(65536)
                if not data:
                    self.closed_by_peer.set()
                    return
                buffer += data
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            length = int((head.lower().split(b"content-length: ")[1:] or [b"0"])[0].split(b"\r\n")[0])
            while len(buffer) < length:
                buffer += await stream.receive_some(65536)
            body, buffer = (json.loads(buffer[:length]) if length else {}), buffer[length:]
            self.requests.append((head, body))
            path = head.split(b" ")[1].decode()
            for piece in self.script(body, path):
                if piece == CLOSE:
                    await stream.aclose()
                    self.closed.set()
                    return
                await stream.send_all(piece)


@asynccontextmanager
async def _serving(script: Script) -> AsyncIterator[_Server]:
    server = _Server(script)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, server.serve, 0)
        server.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"
        yield server
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def _calls(server: _Server) -> AsyncIterator[HttpCalls]:
    async with httpx2.AsyncClient(headers={"authorization": "Bearer t"}) as client:
        calls = HttpCalls("web", server.url, TransportHealth())
        calls.bind(client, ssl.create_default_context())
        assert calls.pool is not None  # a plain client: the POSTs go this way
        try:
            yield calls
        finally:
            calls.close()


async def _call(calls: HttpCalls, notices: list[Any] | None = None) -> dict[str, Any]:
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}

    async def notice(method: str, params: dict[str, Any]) -> None:
        assert notices is not None
        notices.append((method, params))

    arguments = {"name": "echo", "arguments": {"text": "hi"}}
    return await calls.request("tools/call", arguments, headers, None if notices is None else notice)


def _answer(body: dict[str, Any], result: Any = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result or {"content": []}}).encode()


def _json(extra: bytes = b"") -> Script:
    def script(body: dict[str, Any], path: str) -> list[bytes]:
        payload = _answer(body)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" % len(payload)
        return [head + extra + b"\r\n" + payload]

    return script


async def test_a_json_answer_crosses_and_its_connection_carries_the_next_call() -> None:
    async with _serving(_json()) as server, _calls(server) as calls:
        assert await _call(calls) == {"content": []}
        assert await _call(calls) == {"content": []}
        assert server.connections == 1 and calls.pool is not None and calls.pool.opened == 1
    head, body = server.requests[0]
    lines = head.decode().lower().split("\r\n")
    assert lines[0] == "post /mcp http/1.1"
    for line in ("authorization: bearer t", "mcp-method: tools/call", "mcp-name: echo",
                 "mcp-protocol-version: 2026-07-28", "accept: application/json, text/event-stream",
                 "content-type: application/json", f"host: {server.url.split('/')[2]}"):  # fmt: skip
        assert line in lines
    assert not any(line.startswith("accept-encoding") for line in lines)  # so the answer is not encoded
    assert body["params"] == {"name": "echo", "arguments": {"text": "hi"}}


async def test_a_request_and_an_answer_larger_than_a_sockets_buffers_cross_whole_on_one_connection() -> None:
    # The plain socket is written and read directly: a write the socket takes in part, and an answer
    # read in many reads (each that fills the buffer followed by one at once), lose and reorder nothing.
    big = "".join(chr(ord("a") + i % 26) for i in range(3 * 1024 * 1024))

    def echoing(body: dict[str, Any], path: str) -> list[bytes]:
        payload = _answer(body, {"content": [{"type": "text", "text": body["params"]["arguments"]["text"]}]})
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(payload)
        return [head + payload]

    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
    with trio.fail_after(scaled(30)):
        async with _serving(echoing) as server, _calls(server) as calls:
            for _ in range(2):
                result = await calls.request("tools/call", {"name": "echo", "arguments": {"text": big}}, headers)
                assert result["content"][0]["text"] == big
            assert server.connections == 1


def _chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\ntrailer: x\r\n\r\n"


async def test_an_event_stream_in_chunks_cut_anywhere_gives_its_notices_in_order_then_the_result() -> None:
    def script(body: dict[str, Any], path: str) -> list[bytes]:
        log = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "one"}}).encode()
        events = b"id: 1\r\ndata:\r\n\r\ndata: " + log + b"\r\n\r\nevent: message\rdata: " + _answer(body) + b"\r\r"
        stream = _chunked(events[:7], events[7:40], events[40:])
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        whole = head + stream
        return [whole[i : i + 5] for i in range(0, len(whole), 5)]  # written in 5-byte pieces

    notices: list[Any] = []
    async with _serving(script) as server, _calls(server) as calls:
        assert await _call(calls, notices) == {"content": []}
        assert await _call(calls) == {"content": []}
        # The answer ends the call before the stream's end was read: closed, as httpx closes it.
        assert server.connections == 2
    assert notices == [("notifications/message", {"data": "one"})]


def _framed(head: bytes, body_of: Callable[[bytes], bytes] = lambda payload: payload) -> Script:
    def script(body: dict[str, Any], path: str) -> list[bytes]:
        payload = body_of(_answer(body))
        return [head.replace(b"$LEN", b"%d" % len(payload)) + b"\r\n\r\n" + payload, CLOSE]

    return script


@pytest.mark.parametrize(
    "script",
    [
        pytest.param(_framed(b"HTTP/1.1 200 OK\r\ncontent-type: application/json"), id="until-the-end"),
        pytest.param(_framed(b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\ncontent-length: $LEN"), id="1.0"),
        pytest.param(
            _framed(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: $LEN"),
            id="connection-close",
        ),
        pytest.param(
            _framed(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\nconnection: close",
                gzip.compress,
            ),
            id="gzip-until-the-end",
        ),
        pytest.param(
            _framed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: application/json"), id="interim-100"
        ),
    ],
)
async def test_an_answer_framed_by_the_connections_end_crosses_and_its_connection_is_not_reused(script: Script) -> None:
    async with _serving(script) as server, _calls(server) as calls:
        assert await _call(calls) == {"content": []}
        assert calls.pool is not None and not calls.pool._idle  # closed at once, not left to the readable check
        assert await _call(calls) == {"content": []}
        assert server.connections == 2


async def test_an_idle_connection_the_server_closed_or_kept_too_long_is_not_reused(
    mock_clock: trio.testing.MockClock,
) -> None:
    def script(body: dict[str, Any], path: str) -> list[bytes]:
        # The first connection is closed after its answer, without a word of it in the head.
        return [*_json()(body, path), *([CLOSE] if len(server.requests) == 1 else [])]

    async with _serving(script) as server, _calls(server) as calls:
        assert await _call(calls) == {"content": []}
        await server.closed.wait()
        assert await _call(calls) == {"content": []}  # on a new connection: the idle one turned readable
        assert server.connections == 2
        mock_clock.jump(KEEP_ALIVE_SEC)
        assert await _call(calls) == {"content": []}  # idle too long: not reused either
        assert server.connections == 3


async def test_a_closed_pool_opens_nothing_more() -> None:
    async with _serving(_json()) as server, _calls(server) as calls:
        assert await _call(calls) == {"content": []}
        calls.close()  # the generation ended
        with pytest.raises(httpx2.ConnectError, match="closed"):
            await _call(calls)
        assert server.connections == 1


async def test_a_chunked_answer_read_to_its_end_keeps_its_connection() -> None:
    def script(body: dict[str, Any], path: str) -> list[bytes]:
        payload = _answer(body)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        return [head + _chunked(payload[:10], payload[10:])]

    async with _serving(script) as server, _calls(server) as calls:
        for _ in range(3):
            assert await _call(calls) == {"content": []}
        assert server.connections == 1


def _raw(*pieces: bytes) -> Script:
    return lambda body, path: [*(piece.replace(b"$ANSWER", _answer(body)) for piece in pieces), CLOSE]


@pytest.mark.parametrize(
    ("script", "error"),
    [
        pytest.param(_raw(b"HTTP/2 200 OK\r\n\r\n"), "not an HTTP/1.1 status line", id="status-line"),
        pytest.param(_raw(b"HTTP/1.1 2OO OK\r\n\r\n"), "not an HTTP/1.1 status line", id="status-code"),
        pytest.param(_raw(b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"), "not a header line", id="header-line"),
        pytest.param(
            _raw(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n"), "two different", id="lengths"
        ),
        pytest.param(_raw(b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n"), "Content-Length", id="length"),
        pytest.param(
            _raw(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 900\r\n\r\n$ANSWER"),
            "without sending the rest of the body",
            id="truncated",
        ),
        pytest.param(
            _raw(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"),
            "a chunk size that is not one",
            id="chunk-size",
        ),
        *(
            pytest.param(
                _raw(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n%s\r\n"
                    % size
                ),
                "a chunk size that is not one",
                id=f"chunk-size-{size.decode()}",
            )
            for size in (b"+ea", b"0xea", b"-1")
        ),
        pytest.param(
            _raw(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: br\r\n\r\n"),
            "Content-Encoding",
            id="encoding",
        ),
        pytest.param(_raw(b"HTTP/1.1 200 OK\r\n" + b"x: y\r\n" * 20000), "beyond 64 KiB", id="endless-head"),
        pytest.param(_raw(b""), "without sending a response", id="no-answer"),
        pytest.param(_raw(b"HTTP/1.1 101 Switching Protocols\r\n\r\n"), "a protocol switch", id="101"),
    ],
)
async def test_an_answer_that_is_not_http_1_1_is_a_protocol_failure_of_the_transport(
    script: Script, error: str
) -> None:
    async with _serving(script) as server, _calls(server) as calls:
        with pytest.raises(httpx2.RemoteProtocolError, match=error):
            await _call(calls)


async def test_a_redirect_is_sent_again_by_httpx_under_the_sdks_rule_and_a_failed_status_is_its_error() -> None:
    def script(body: dict[str, Any], path: str) -> list[bytes]:
        if path == "/mcp":
            return [b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /moved\r\ncontent-length: 0\r\n\r\n"]
        error = json.dumps({"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32602, "message": "no"}}).encode()
        return [
            b"HTTP/1.1 400 Bad\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(error) + error
        ]

    async with _serving(script) as server, _calls(server) as calls:
        with pytest.raises(MCPError, match="no") as caught:
            await _call(calls)
    assert caught.value.code == -32602
    # Sent again by httpx (which meets the redirect itself, and follows it within the origin) ...
    assert [head.split(b" ")[1] for head, _ in server.requests] == [b"/mcp", b"/mcp", b"/moved"]
    assert len({body["id"] for _, body in server.requests}) == 1  # ... the same request each time
    assert calls.pool is None  # and this endpoint's next POSTs too


async def test_a_cancelled_call_closes_its_connection_the_2026_wires_cancellation() -> None:
    def script(body: dict[str, Any], path: str) -> list[bytes]:
        progress = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n'
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        return [head + b"%x\r\n%s\r\n" % (len(progress), progress)]  # and then nothing, until the client goes

    async with _serving(script) as server, _calls(server) as calls:
        with trio.CancelScope() as scope:
            await _call(calls, _CancelOnNotice(scope))
        assert scope.cancelled_caught
        with trio.fail_after(5):
            await server.closed_by_peer.wait()
        assert calls.pool is not None and not calls.pool._idle


class _CancelOnNotice(list[Any]):
    def __init__(self, scope: trio.CancelScope) -> None:
        super().__init__()
        self._scope = scope

    def append(self, item: Any) -> None:
        super().append(item)
        self._scope.cancel()


async def test_a_cookie_the_server_sets_goes_to_the_clients_jar_and_back_on_the_next_post() -> None:
    def script(body: dict[str, Any], path: str) -> list[bytes]:
        return _json(b"set-cookie: affinity=node-2; Path=/\r\n")(body, path)

    async with _serving(script) as server, _calls(server) as calls:
        await _call(calls)
        await _call(calls)
    first, second = (head.decode().lower() for head, _ in server.requests)
    assert "cookie:" not in first and "cookie: affinity=node-2" in second


async def test_an_event_stream_with_an_event_beyond_the_bound_fails_as_the_sdks_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_calls, "MAX_SSE_EVENT_SIZE", 100)

    def script(body: dict[str, Any], path: str) -> list[bytes]:
        stream = b"data: " + b"x" * 200 + b"\n\n"
        return [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(stream)
                + stream]  # fmt: skip

    async with _serving(script) as server, _calls(server) as calls:
        with pytest.raises(MCPError, match="SSE stream failed") as caught:
            await _call(calls)
    assert caught.value.code == CONNECTION_CLOSED


async def test_a_client_with_an_auth_flow_or_a_header_httpx_refuses_gets_no_pool(tmp_path: Path) -> None:
    tls = ssl.create_default_context()
    async with httpx2.AsyncClient(auth=("user", "secret")) as client:
        assert Http1Pool.for_client(client, "http://a.test/mcp", tls) is None  # an auth flow: httpx runs it
    async with httpx2.AsyncClient(auth=_provider(tmp_path, "http://a.test/mcp")) as client:
        assert Http1Pool.for_client(client, "http://a.test/mcp", tls) is None  # OAuth too (side by side since round 15)
    async with httpx2.AsyncClient(headers={"x-note": "a\r\nx-injected: 1"}) as client:
        assert Http1Pool.for_client(client, "http://a.test/mcp", tls) is None  # httpx (h11) refuses it when it sends


async def test_own_connections_stand_in_only_where_httpx_would_add_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    tls = ssl.create_default_context()
    async with create_http_client({"authorization": "Bearer t"}, None, tls) as client:
        plain = Http1Pool.for_client(client, "http://a.test/mcp", tls)
        assert plain is not None and plain.tls is None
        secure = Http1Pool.for_client(client, "https://a.test/mcp", tls)
        assert secure is not None and secure.tls is tls, "the client's own TLS context: the same trust"
        assert Http1Pool.for_client(client, "ws://a.test/mcp", tls) is None
        assert Http1Pool.for_client(client, "http://user:secret@a.test/mcp", tls) is None  # httpx's basic auth
        client.event_hooks = {"request": [lambda request: None]}
        assert Http1Pool.for_client(client, "http://a.test/mcp", tls) is None, "a hook sees every request"
    for name in ("HTTPS_PROXY", "all_proxy"):  # a proxy from the environment is httpx's, for every URL
        with monkeypatch.context() as env:
            env.setenv(name, "http://proxy.test:3128")
            async with create_http_client(None, None, tls) as client:
                assert Http1Pool.for_client(client, "https://a.test/mcp", tls) is None
                assert Http1Pool.for_client(client, "http://a.test/mcp", tls) is None
    async with create_http_client(None, None, tls) as client:
        calls = HttpCalls("web", "http://a.test/mcp", TransportHealth())
        calls.bind(client)
        assert calls.pool is None, "a client built elsewhere (no TLS context of ours) sends every POST itself"


def _provider(tmp_path: Path, url: str) -> SupervisorOAuthProvider:
    oauth = OAuthSettings(token_store=str(tmp_path / "store"))
    storage = FileTokenStorage(token_file(oauth, "web"), "web", url)
    return SupervisorOAuthProvider(url, client_metadata(oauth, None), storage, headless=True)
