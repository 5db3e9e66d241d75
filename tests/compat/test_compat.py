"""One test per assumption about private or provisional API (``compat/sdk.py``, ``pydantic_settings.py``, ``httpx.py``).

When an upgrade of ``mcp``, pydantic-settings or httpx2 moves one of these, the test
that names it fails here, loudly, instead of a feature failing somewhere else.
"""

from __future__ import annotations

import ssl
from types import SimpleNamespace
from typing import Any, get_args

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.server import Server
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from opentelemetry import trace

from supervisor.calls.attribution import HostCall
from supervisor.compat import sdk as _compat
from supervisor.config.env import read_overrides
from supervisor.telemetry.spans import TELEMETRY, sdk_span_needed


class _Outbound:
    """The least an ``Outbound`` needs to be for a ``ServerSession`` to be built around it."""

    can_send_request = False


def test_connection_of_finds_the_connection_a_per_request_session_proxies() -> None:
    connection = Connection(_Outbound(), protocol_version="2025-11-25")  # type: ignore[arg-type]
    session = ServerSession(_Outbound(), connection)  # type: ignore[arg-type]
    assert _compat.connection_of(session) is connection


def test_create_mcp_http_client_gives_an_httpx2_client_with_a_long_read_timeout() -> None:
    client = _compat.create_mcp_http_client(headers={"X-Test": "1"})
    assert isinstance(client, httpx2.AsyncClient)
    assert client.headers["X-Test"] == "1"
    assert client.timeout.read is not None and client.timeout.read >= 60


def test_transport_streams_is_the_read_write_pair() -> None:
    assert len(get_args(_compat.TransportStreams)) == 2


async def test_server_middleware_is_a_list_run_innermost_last() -> None:
    server: Server[Any] = Server("t")
    seen: list[str] = []

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        seen.append(ctx.method)
        return await call_next(ctx)

    before = len(server.middleware)
    _compat.add_server_middleware(server, middleware)
    assert server.middleware[-1] is middleware
    assert len(server.middleware) == before + 1


@pytest.mark.parametrize(
    ("tracing_on", "meta", "through_sdk"),
    [
        (False, None, False),
        (False, {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}, False),
        (False, {"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01"}, True),
        (True, None, True),
    ],
    ids=["off-no-meta", "off-envelope-only", "off-traceparent", "on"],
)
async def test_the_sdks_tracing_middleware_is_first_and_gated_runs_only_where_it_does_something(
    monkeypatch: pytest.MonkeyPatch, tracing_on: bool, meta: dict[str, Any] | None, through_sdk: bool
) -> None:
    server: Server[Any] = Server("t")
    assert isinstance(server.middleware[0], OpenTelemetryMiddleware)  # the assumption: one per Server, first
    sdk_calls: list[str] = []
    sdk_call = OpenTelemetryMiddleware.__call__

    async def counted(self: OpenTelemetryMiddleware, ctx: Any, call_next: CallNext) -> HandlerResult:
        sdk_calls.append(ctx.method)
        return await sdk_call(self, ctx, call_next)

    monkeypatch.setattr(OpenTelemetryMiddleware, "__call__", counted)
    monkeypatch.setattr(TELEMETRY, "on", tracing_on)
    _compat.gate_sdk_tracing(server, sdk_span_needed)
    assert not any(isinstance(m, OpenTelemetryMiddleware) for m in server.middleware)
    current: list[str] = []

    async def handler(ctx: Any) -> HandlerResult:
        current.append(format(trace.get_current_span().get_span_context().trace_id, "032x"))
        return {}

    ctx = SimpleNamespace(method="tools/call", params={"name": "t"}, meta=meta, protocol_version="2026-07-28",
                          request_id=1)  # fmt: skip
    assert await server.middleware[0](ctx, handler) == {}  # type: ignore[arg-type]
    assert sdk_calls == (["tools/call"] if through_sdk else [])
    if meta and "traceparent" in meta:
        assert current == ["ab" * 16]  # the host's context is current on the SDK path: it goes upstream as it came


async def test_the_input_required_driver_dispatches_each_request_and_retries_with_the_answers() -> None:
    asked: list[str] = []

    async def dispatch(key: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        asked.append(key)
        return types.ListRootsResult(roots=[])

    async def retry(responses: types.InputResponses | None, state: str | None) -> Any:
        assert state == "s1"
        assert responses is not None and set(responses) == {"a"}
        return types.CallToolResult(content=[])

    first = types.InputRequiredResult(input_requests={"a": types.ListRootsRequest()}, request_state="s1")
    with trio.fail_after(5):
        result = await _compat.run_input_required_driver(
            first, dispatch=dispatch, retry=retry, max_rounds=_compat.DEFAULT_INPUT_REQUIRED_MAX_ROUNDS
        )
    assert isinstance(result, types.CallToolResult)
    assert asked == ["a"]


def test_the_sdk_hands_request_meta_over_with_snake_case_keys() -> None:
    """``HostCall.wants_progress`` reads ``progress_token``: the runner validates ``_meta`` before handlers."""
    meta = types.RequestParams.model_validate({"_meta": {"progressToken": 7}}, by_name=False).meta
    assert meta is not None
    session: Any = None
    ctx: ServerRequestContext[Any] = ServerRequestContext(
        session=session, lifespan_context={}, protocol_version="2025-11-25", method="tools/call", meta=meta
    )
    call = HostCall(ctx, "srv")
    assert call.wants_progress


def test_pydantic_settings_env_source_reads_the_injected_mapping_through_load_env_vars() -> None:
    overrides = read_overrides({"MCP_SUPERVISOR_SUPERVISOR__LOG_LEVEL": "debug", "UNRELATED": "x"})
    assert overrides == {"supervisor": {"log_level": "debug"}}


async def test_request_envelope_and_send_raw_request_use_the_sessions_own_stamp_and_dispatcher() -> None:
    with trio.fail_after(10):
        async with Client(Server("t")) as client:
            envelope = _compat.request_envelope(client.session, "tools/call")
            assert envelope[types.PROTOCOL_VERSION_META_KEY] == client.protocol_version == "2026-07-28"
            assert envelope[types.CLIENT_INFO_META_KEY]["name"] == "mcp"
            assert types.CLIENT_CAPABILITIES_META_KEY in envelope
            discovered = await _compat.send_raw_request(client.session, "server/discover", {})
            assert discovered["supportedVersions"] == ["2026-07-28"], "the raw result dict, not a model"
            assert discovered["_meta"][types.SERVER_INFO_META_KEY]["name"] == "t"


async def test_stamp_request_writes_the_envelope_in_place_and_returns_the_routing_headers() -> None:
    with trio.fail_after(10):
        async with Client(Server("t")) as client:
            params: dict[str, Any] = {"name": "echo", "arguments": {}}
            headers = _compat.stamp_request(client.session, "tools/call", params)
            assert params["_meta"][types.PROTOCOL_VERSION_META_KEY] == "2026-07-28"
            assert headers["mcp-method"] == "tools/call" and headers["mcp-name"] == "echo"
            assert headers["mcp-protocol-version"] == "2026-07-28"


async def test_stream_within_origin_follows_a_same_origin_redirect_and_hands_back_any_other() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/mcp":
            return httpx2.Response(307, headers={"location": "/mcp/"})
        if request.url.path == "/mcp/":
            return httpx2.Response(307, headers={"location": "http://elsewhere.test/mcp"})
        return httpx2.Response(200)

    url = "http://web.test/mcp"
    async with (
        httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client,
        _compat.stream_within_origin(client, "POST", url, content=b"{}") as response,
    ):
        assert response.request.url.path == "/mcp/", "the same-origin redirect was followed"
        assert response.status_code == 307 and response.next_request is not None
    assert _compat.MAX_SSE_EVENT_SIZE == 1024 * 1024


# ``create_http_client``: the SDK factory's client, with the TLS context given.


async def test_create_http_client_is_the_sdk_factorys_client_with_the_tls_context_given() -> None:
    tls = ssl.create_default_context()
    async with (
        _compat.create_http_client({"x-note": "1"}, None, tls) as ours,
        _compat.create_mcp_http_client(headers={"x-note": "1"}) as sdks,
    ):
        assert ours.timeout == sdks.timeout and ours.headers == sdks.headers
        assert ours.follow_redirects == sdks.follow_redirects and ours.trust_env == sdks.trust_env
        # The one private read: httpx keeps the context it was given on its pool (our own connections share it).
        assert ours._transport._pool._ssl_context is tls  # type: ignore[attr-defined]
