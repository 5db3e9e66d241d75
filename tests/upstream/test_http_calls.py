"""The fast path's own POST to a 2026-era streamable-HTTP upstream (``upstream.http_calls``), answer by answer.

The server is an httpx ``MockTransport`` behind the client seam: each test
answers the POST the way a streamable-HTTP server may (JSON, an event stream,
an error status, a broken stream) and checks what the call gets. The same
path against real servers: ``tests/e2e/test_failures.py`` and the fidelity
suites over HTTP upstreams.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import httpx2
import pytest
import trio
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR

from supervisor.errors import UpstreamNeedsLogin, UpstreamUnavailable
from supervisor.upstream.errors import ErrorTranslator
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.http_calls import ID_PREFIX, HttpCalls

URL = "http://web.test/mcp"
Handler = Callable[[httpx2.Request], Coroutine[None, None, httpx2.Response]]

# An answer read off an event stream closes the stream early: httpx's nested text iterators are then
# collected unfinished (as under the SDK's own transport: ``tests.fidelity_host.HTTP_CLIENT_LEAKS_ASYNCGENS``).
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _calls(handler: Handler) -> tuple[HttpCalls, httpx2.AsyncClient]:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler), headers={"authorization": "Bearer t"})
    calls = HttpCalls("web", URL, TransportHealth())
    calls.bind(client)
    return calls, client


async def _request(handler: Handler, notices: list[tuple[str, dict[str, Any]]] | None = None) -> dict[str, Any]:
    calls, client = _calls(handler)
    async with client:
        params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "p"}}
        headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}

        async def notice(method: str, notice_params: dict[str, Any]) -> None:
            assert notices is not None
            notices.append((method, notice_params))

        return await calls.request("tools/call", params, headers, None if notices is None else notice)


def _answer(request: httpx2.Request, **members: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": json.loads(request.content)["id"], **members}).encode()


def _sse(*events: bytes) -> bytes:
    return b"".join(b"event: message\ndata: " + event + b"\n\n" for event in events)


async def test_a_json_answer_is_the_result_and_the_post_carries_the_stamp_and_the_clients_own_headers() -> None:
    seen: list[httpx2.Request] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(
            200, headers={"content-type": "application/json"}, content=_answer(request, result={"content": []})
        )

    assert await _request(handler) == {"content": []}
    (request,) = seen
    body = json.loads(request.content)
    assert body["id"].startswith(ID_PREFIX) and body["method"] == "tools/call"
    assert body["params"] == {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "p"}}
    assert request.headers["mcp-method"] == "tools/call" and request.headers["mcp-name"] == "echo"
    assert request.headers["mcp-protocol-version"] == "2026-07-28"
    assert request.headers["authorization"] == "Bearer t"  # the generation's client: its auth, its headers
    assert request.headers["accept"] == "application/json, text/event-stream"


async def test_an_event_stream_gives_its_notices_in_order_then_the_result_and_skips_what_is_not_for_the_call() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        log = {"level": "info", "data": "one"}
        stream = (
            b"id: prime\ndata:\n\n"  # a priming event: an id to resume from, no message
            + _sse(
                json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": log}).encode(),
                json.dumps({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}}).encode(),
                json.dumps({"jsonrpc": "2.0", "id": "someone-else", "result": {}}).encode(),
                json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}).encode(),
                _answer(request, result={"content": [], "isError": True}),
            )
        )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=stream)

    notices: list[tuple[str, dict[str, Any]]] = []
    assert await _request(handler, notices) == {"content": [], "isError": True}
    assert notices == [
        ("notifications/message", {"level": "info", "data": "one"}),
        ("notifications/progress", {"progress": 1}),
    ]


def _status(status: int, content: bytes = b"", content_type: str = "application/json") -> Handler:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        body = content.replace(b"$ID", json.loads(request.content)["id"].encode())
        return httpx2.Response(status, headers={"content-type": content_type}, content=body)

    return handler


ERROR = b'{"jsonrpc":"2.0","id":"$ID","error":{"code":-32602,"message":"Unknown tool: echo","data":{"x":1}}}'


@pytest.mark.parametrize(
    ("handler", "code", "message"),
    [
        pytest.param(_status(200, ERROR), INVALID_PARAMS, "Unknown tool: echo", id="error-answer"),
        pytest.param(_status(400, ERROR), INVALID_PARAMS, "Unknown tool: echo", id="error-at-400"),
        pytest.param(_status(404, b"", "text/plain"), METHOD_NOT_FOUND, "Not Found", id="404"),
        pytest.param(
            _status(500, b"oops", "text/plain"), INTERNAL_ERROR, "Server returned an error response", id="500"
        ),
        pytest.param(_status(202), INVALID_REQUEST, "server answered a request with 202 Accepted", id="202"),
        pytest.param(
            _status(200, b"hello", "text/html"), INVALID_REQUEST, "Unexpected content type: text/html", id="html"
        ),
        pytest.param(_status(200, b'{"a":1}\n{"b":2}'), PARSE_ERROR, "Failed to parse JSON response", id="two-lines"),
        pytest.param(
            _status(200, b'{"jsonrpc":"2.0","id":"x","result":{}}'), PARSE_ERROR, "not the response", id="other-id"
        ),
        pytest.param(
            _status(200, _sse(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}'), "text/event-stream"),
            CONNECTION_CLOSED,
            "SSE stream ended without a response",
            id="stream-without-answer",
        ),
        pytest.param(
            _status(200, b"event: message\ndata: {not json\n\n", "text/event-stream"),
            PARSE_ERROR,
            "Failed to parse SSE message",
            id="stream-garbage",
        ),
    ],
)
async def test_each_way_a_server_can_fail_a_post_is_the_error_the_sdks_transport_would_report(
    handler: Handler, code: int, message: str
) -> None:
    with pytest.raises(MCPError) as caught:
        await _request(handler)
    assert caught.value.code == code
    assert message in caught.value.error.message
    if code == INVALID_PARAMS:
        assert caught.value.error.data == {"x": 1}


async def test_a_redirect_off_the_endpoints_origin_is_not_followed() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(307, headers={"location": "http://elsewhere.test/mcp"})

    with pytest.raises(MCPError) as caught:
        await _request(handler)
    assert caught.value.code == INVALID_REQUEST and "elsewhere.test" in caught.value.error.message


async def test_a_failed_connection_loses_the_generation_and_is_the_servers_unavailability() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    health = TransportHealth()
    with pytest.raises(UpstreamUnavailable) as caught, ErrorTranslator("web", "tools/call echo", health, True):
        await _request(handler)
    assert "server 'web': transport failed during tools/call echo" in str(caught.value)
    assert health.lost.is_set()


class _EndlessStream(httpx2.AsyncByteStream):
    """An event stream that sends one notice, then nothing, until it is closed."""

    def __init__(self) -> None:
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield _sse(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}')
        await trio.sleep_forever()

    async def aclose(self) -> None:
        self.closed = True


async def test_a_cancelled_call_closes_its_response_stream_the_2026_wires_cancellation() -> None:
    stream = _EndlessStream()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)

    async def cancel_at_first_notice(method: str, params: dict[str, Any]) -> None:
        scope.cancel()

    with trio.CancelScope() as scope:
        calls, client = _calls(handler)
        async with client:
            await calls.request("tools/call", {"name": "slow"}, {}, cancel_at_first_notice)
    assert scope.cancelled_caught
    assert stream.closed


class _RefusedRefresh(Exception):
    """What an OAuth flow raises inside httpx when the authorization server refuses a refresh."""


@pytest.mark.parametrize("login_required", [True, False])
async def test_a_failure_past_the_transport_ends_the_generation_and_says_whether_only_a_login_helps(
    login_required: bool,
) -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        raise _RefusedRefresh("the authorization server refused the token refresh (HTTP 400)")

    health = TransportHealth()
    calls = HttpCalls("remote", URL, health)
    calls.needs_login = lambda: (
        UpstreamNeedsLogin("remote", "run `mcp-supervisor login remote`") if login_required else None
    )
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        calls.bind(client)
        with pytest.raises(UpstreamUnavailable) as caught:
            await calls.request("tools/call", {"name": "echo"}, {})
    assert health.lost.is_set()
    if login_required:
        assert isinstance(caught.value, UpstreamNeedsLogin) and health.needs_login is caught.value
    else:
        assert health.needs_login is None
        assert "transport failed during tools/call: _RefusedRefresh: the authorization server refused" in str(
            caught.value
        )
