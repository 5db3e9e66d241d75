"""One trace from the host to the upstream on the SDK and fast paths, in-process (DESIGN I18, issue 28).

A real ``Supervisor`` and ``Front`` run in this process over a real upstream
served in this process too (``otel_support.serve_traced_upstream``: a low-level
SDK ``Server`` over streamable HTTP, so the SDK's own middleware makes its
SERVER spans), and a real ``mcp.Client`` host sends ``traceparent``,
``tracestate`` and ``baggage`` in ``_meta``. Everything is exported through the
production pipeline into memory. The splice's spans are in
``test_telemetry_splice.py``; the same traces across real processes, exported
over OTLP, in ``tests/e2e/test_tracing.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import pytest
import trio
from mcp import Client, MCPError
from mcp.client.client import ConnectMode
from opentelemetry.trace import SpanKind

from supervisor.host.http.link import HttpHostLink
from supervisor.telemetry import conventions as C
from tests.ops.otel_support import (
    BAGGAGE,
    HOST_META,
    HOST_SPAN_ID,
    TRACE_ID,
    TRACESTATE,
    Recorded,
    Sidecar,
    TracedUpstream,
    as_traced_host,
    hex_span,
    hex_trace,
    in_memory_front,
    parent_of,
    serve_sidecar,
    serve_traced_upstream,
)
from tests.sidecar import http_supervisor_table, open_http_host, wait_until, write_settings

BOUND_SEC: Final = 20
ECHO: Final = "mcp__up__echo"
TOKEN: Final = "t0ken-for-tests"


@asynccontextmanager
async def traced_sidecar(
    tmp_path: Path, *, supervisor: dict[str, Any] | None = None, **table: Any
) -> AsyncIterator[tuple[Sidecar, TracedUpstream]]:
    async with serve_traced_upstream() as upstream:
        config = write_settings(
            tmp_path, {"up": {"url": upstream.url, **table}}, supervisor={"log_level": "warning", **(supervisor or {})}
        )
        async with serve_sidecar(config) as sidecar:
            yield sidecar, upstream


@asynccontextmanager
async def memory_host(sidecar: Sidecar, mode: ConnectMode) -> AsyncIterator[Client]:
    async with Client(in_memory_front(sidecar.front), mode=mode) as client:
        yield client


def _check_one_trace(recorded: Recorded, upstream: TracedUpstream, *, host_transport: str) -> None:
    """host → the Front's SERVER span → our CLIENT span → the upstream's SERVER span, as the conventions name them."""
    host = recorded.one(f"tools/call {ECHO}", SpanKind.CLIENT)
    server = recorded.one(f"tools/call {ECHO}", SpanKind.SERVER)
    client = recorded.one("tools/call echo", SpanKind.CLIENT)
    upstream_server = recorded.one("tools/call echo", SpanKind.SERVER)
    assert hex_trace(host) == hex_trace(server) == hex_trace(client) == hex_trace(upstream_server) == TRACE_ID
    assert parent_of(host) == HOST_SPAN_ID, "the host's own SDK client span, under the host's trace"
    assert parent_of(server) == hex_span(host), "the Front's SERVER span parents on what the host sent in _meta"
    assert parent_of(client) == hex_span(server)
    assert parent_of(upstream_server) == hex_span(client), "the upstream parents on our CLIENT span"
    assert not [s.name for s in recorded.spans() if s.name.startswith("MCP send")], "the SDK's span folds into ours"

    attributes = server.attributes or {}
    assert attributes[C.METHOD] == "tools/call"
    assert attributes[C.TOOL_NAME] == ECHO
    assert attributes[C.OPERATION] == "execute_tool"
    assert attributes[C.TRANSPORT] == host_transport
    assert attributes[C.SERVER] == "up"
    assert attributes[C.GENERATION] == 1
    assert attributes[C.OUTCOME] == "ok"
    assert C.REQUEST_ID in attributes and C.PROTOCOL_VERSION in attributes
    assert C.ERROR_TYPE not in attributes
    attributes = client.attributes or {}
    assert attributes[C.METHOD] == "tools/call"
    assert attributes[C.TOOL_NAME] == "echo"
    assert attributes[C.OPERATION] == "execute_tool"
    assert attributes[C.TRANSPORT] == "tcp"
    assert attributes[C.SERVER] == "up"
    assert attributes[C.GENERATION] == 1
    assert attributes[C.PROTOCOL_VERSION] == "2026-07-28"
    assert C.REQUEST_ID in attributes, "the SDK's request id, taken over from its folded span"

    (meta,) = upstream.metas
    assert meta["traceparent"] == f"00-{TRACE_ID}-{hex_span(client)}-01", "our CLIENT span's context goes upstream"
    assert meta["tracestate"] == TRACESTATE
    assert meta["baggage"] == BAGGAGE
    # ... and in the HTTP headers of the POST that carried it.
    assert any(h.get("traceparent") == meta["traceparent"] for h in upstream.headers)


async def test_I18_a_call_the_sdks_server_reads_carries_a_hosts_trace_to_the_upstream_in_one_trace(
    tmp_path: Path,
) -> None:
    with Recorded.start() as recorded, trio.fail_after(BOUND_SEC):
        async with traced_sidecar(tmp_path) as (sidecar, upstream), memory_host(sidecar, "auto") as host:
            with as_traced_host():
                result = await host.call_tool(ECHO, {"text": "hi"}, meta=HOST_META)
            assert not result.is_error
            generation = sidecar.supervisor.actors["up"].ready_upstream
            assert generation is not None and generation.http_calls is not None
            pool = generation.http_calls.pool
            assert pool is not None and pool.opened >= 1, "our own POST on our own connections, telemetry on too"
    _check_one_trace(recorded, upstream, host_transport="pipe")


async def test_I18_the_sdk_path_with_a_handshake_era_host_carries_its_trace_to_the_upstream(tmp_path: Path) -> None:
    with Recorded.start() as recorded, trio.fail_after(BOUND_SEC):
        async with traced_sidecar(tmp_path) as (sidecar, upstream), memory_host(sidecar, "legacy") as host:
            with as_traced_host():
                result = await host.call_tool(ECHO, {"text": "hi"}, meta=HOST_META)
            assert not result.is_error
    _check_one_trace(recorded, upstream, host_transport="pipe")


async def test_I18_the_http_fronts_own_answer_carries_a_hosts_trace_in_one_trace_with_our_tcp_server_span(
    tmp_path: Path,
) -> None:
    """Telemetry on is no reason to leave the front's own answer: the SERVER span is ours, the POST upstream ours."""
    with Recorded.start() as recorded, trio.fail_after(BOUND_SEC):
        async with serve_traced_upstream() as upstream:
            config = write_settings(
                tmp_path, {"up": {"url": upstream.url}}, supervisor={**http_supervisor_table(), "log_level": "warning"}
            )
            with pytest.MonkeyPatch.context() as env:
                env.setenv("MCP_SUPERVISOR_TOKEN", TOKEN)
                async with serve_sidecar(config) as sidecar:
                    link = HttpHostLink({"": sidecar.front}, sidecar.supervisor.settings.supervisor.front)
                    async with trio.open_nursery() as nursery:
                        await nursery.start(link.run)
                        (url,) = link.urls
                        async with open_http_host(url, TOKEN) as host:
                            with as_traced_host():
                                await host.session.call_tool(ECHO, {"text": "hi"}, meta=HOST_META)
                        assert link.fast_calls["/mcp"].taken["fast"] == 1, "answered by the front itself"
                        nursery.cancel_scope.cancel()
    _check_one_trace(recorded, upstream, host_transport="tcp")


async def test_I18_off_no_span_is_made_and_the_hosts_trace_context_still_reaches_the_upstream(tmp_path: Path) -> None:
    with Recorded.start() as recorded:
        recorded.exporter.clear()
    with trio.fail_after(BOUND_SEC):
        async with traced_sidecar(tmp_path) as (sidecar, upstream), memory_host(sidecar, "auto") as host:
            await host.call_tool(ECHO, {"text": "hi"}, meta=HOST_META)
    assert recorded.spans() == [], "telemetry off: not one span, even with a provider installed"
    (meta,) = upstream.metas
    assert {key: meta.get(key) for key in HOST_META} == HOST_META, "the host's keys go upstream unchanged"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_I18_error_type_is_set_for_a_tool_error_a_json_rpc_error_a_timeout_and_an_unavailable_server(
    tmp_path: Path, mode: ConnectMode
) -> None:
    with Recorded.start() as recorded, trio.fail_after(BOUND_SEC):
        async with (
            traced_sidecar(tmp_path, tool_timeout_sec=0.5, reconnect={"initial_delay_ms": 50, "max_attempts": 3}) as (
                sidecar,
                upstream,
            ),
            memory_host(sidecar, mode) as host,
        ):
            assert (await host.call_tool("mcp__up__fail", {})).is_error
            with pytest.raises(MCPError):
                await host.call_tool("mcp__up__boom", {})
            assert (await host.call_tool("mcp__up__slow", {"seconds": 30})).is_error
            # The upstream goes away; once the actor knows, calls fail fast while it reconnects.
            upstream.stop()
            actor = sidecar.supervisor.actors["up"]
            while actor.status.state == "ready":  # the first calls find it gone ...
                assert (await host.call_tool(ECHO, {"text": "x"})).is_error
            assert (await host.call_tool(ECHO, {"text": "x"})).is_error  # ... then one fails fast: reconnecting
            await wait_until(lambda: bool(recorded.named("mcp_supervisor.reconnect")), what="the reconnect span")
    # The last span of each name (the echo calls: the one that failed fast).
    client = {
        s.name: s.attributes or {} for s in recorded.spans() if s.kind is SpanKind.CLIENT and "mcp__" not in s.name
    }
    server = {s.name: s.attributes or {} for s in recorded.spans() if s.kind is SpanKind.SERVER and "mcp__" in s.name}
    assert client["tools/call fail"][C.ERROR_TYPE] == "tool_error"
    assert server["tools/call mcp__up__fail"][C.ERROR_TYPE] == "tool_error"
    assert client["tools/call boom"][C.ERROR_TYPE] == "-32602"
    assert client["tools/call boom"][C.RPC_STATUS] == "-32602"
    assert server["tools/call mcp__up__boom"][C.ERROR_TYPE] == "-32602"
    assert client["tools/call slow"][C.ERROR_TYPE] == "timeout"
    assert server["tools/call mcp__up__slow"][C.OUTCOME] == "timeout"
    assert server["tools/call mcp__up__slow"][C.ERROR_TYPE] == "tool_error", "the host got an isError result"
    assert client["tools/call echo"][C.ERROR_TYPE] == "unavailable"
    assert server[f"tools/call {ECHO}"][C.OUTCOME] == "unavailable"
    (reconnect, *_) = recorded.named("mcp_supervisor.reconnect")
    attributes = reconnect.attributes or {}
    assert (attributes[C.SERVER], attributes[C.GENERATION], attributes[C.ERROR_TYPE]) == ("up", 2, "reconnect_failed")
