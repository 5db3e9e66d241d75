"""One trace across real processes: host → sidecar SERVER → sidecar CLIENT → the upstream's SERVER span (I18).

``python -m supervisor run`` with ``[supervisor.telemetry] enabled = true`` and
the fixture server (the SDK's low-level ``Server``, so its own middleware makes
its SERVER spans; ``FIXTURE_OTEL=1`` lets it export them) both export the
standard way (``OTEL_TRACES_EXPORTER=otlp``, ``http/protobuf``, a short
``OTEL_BSP_SCHEDULE_DELAY``) to a tiny OTLP/HTTP receiver this test runs on
port 0 (``otel_support.open_otlp_receiver``), which decodes what arrives. A
real ``mcp.Client`` host sends ``traceparent``, ``tracestate`` and ``baggage``
in ``_meta`` through each path: the SDK path (a handshake-era host), the HTTP
front's own answer and the splice (a 2026-era host over stdio). Which path
carried a call shows in its SERVER span's instrumentation scope: the fronts'
own answers and the splice make their own (``mcp-supervisor``), the SDK path
annotates the SDK middleware's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, cast

import mcp_types as types
import pytest
import trio
from mcp import MCPError
from mcp.client.client import ConnectMode

from supervisor.compat.otel import SDK_TRACER_NAME
from supervisor.telemetry import conventions as C
from tests.ops.otel_support import (
    CANARY,
    HOST_META,
    HOST_SPAN_ID,
    TRACE_ID,
    ExportedSpan,
    OtlpReceiver,
    open_otlp_receiver,
)
from tests.sidecar import (
    Host,
    fixture_server,
    http_supervisor_table,
    open_host,
    open_http_host,
    open_http_sidecar,
    scaled,
    write_settings,
)

pytestmark = pytest.mark.e2e

BOUND_SEC: Final = scaled(60)
SPANS_BOUND_SEC: Final = scaled(15)
ECHO: Final = "mcp__fx__echo"
ENV_SECRET: Final = f"{CANARY}-env-secret-value"


def _settings(
    tmp_path: Path, receiver: OtlpReceiver, supervisor: Mapping[str, Any] | None = None, **defaults: Any
) -> Path:
    fixture_env = {**receiver.env(), "FIXTURE_OTEL": "1", "OTEL_SERVICE_NAME": "fixture", "FX_API_KEY": ENV_SECRET}
    servers = {"fx": fixture_server("--name", "fx", env=fixture_env)}
    table = {"telemetry": {"enabled": True}, **(supervisor or {})}
    return write_settings(tmp_path, servers, supervisor=table, defaults=defaults or None)


@asynccontextmanager
async def _stdio_host(tmp_path: Path, mode: ConnectMode, **defaults: Any) -> AsyncIterator[tuple[Host, OtlpReceiver]]:
    async with open_otlp_receiver() as receiver:
        config = _settings(tmp_path, receiver, **defaults)
        async with open_host(config, mode, env=receiver.env()) as host:
            await host.wait_tools(lambda names: ECHO in names)  # routed: the splice may take the calls
            yield host, receiver


def _ours(receiver: OtlpReceiver, name: str, kind: str) -> list[ExportedSpan]:
    return [s for s in receiver.spans if s.service == "mcp-supervisor" and s.name == name and s.kind == kind]


async def _one_trace(receiver: OtlpReceiver, *, host_transport: str, scope: str) -> None:
    """host → sidecar SERVER → sidecar CLIENT → fixture SERVER, named and attributed per the conventions."""

    def complete() -> bool:
        # All three: the SERVER span ends last (it encloses the CLIENT span), so it may be exported in a later
        # batch than the others; on a loaded box it was not in yet when only the other two were waited for.
        fixture = [s for s in receiver.spans if s.service == "fixture" and s.name == "tools/call echo"]
        ours = _ours(receiver, "tools/call echo", "SPAN_KIND_CLIENT") and _ours(
            receiver, f"tools/call {ECHO}", "SPAN_KIND_SERVER"
        )
        return bool(fixture and ours)

    await receiver.wait_for(complete, what="the sidecar's and the fixture's spans", bound_sec=SPANS_BOUND_SEC)
    (server,) = _ours(receiver, f"tools/call {ECHO}", "SPAN_KIND_SERVER")
    (client,) = _ours(receiver, "tools/call echo", "SPAN_KIND_CLIENT")
    (upstream,) = [s for s in receiver.spans if s.service == "fixture" and s.name == "tools/call echo"]
    assert server.trace_id == client.trace_id == upstream.trace_id == TRACE_ID
    assert server.parent_id == HOST_SPAN_ID
    assert client.parent_id == server.span_id
    assert upstream.parent_id == client.span_id, "the upstream's SDK middleware parents on our CLIENT span"
    assert upstream.kind == "SPAN_KIND_SERVER"
    assert server.scope == scope
    assert not [s.name for s in receiver.spans if s.name.startswith("MCP send")]
    for span, tool, transport in ((server, ECHO, host_transport), (client, "echo", "pipe")):
        attributes = span.attributes
        assert attributes[C.METHOD] == "tools/call"
        assert attributes[C.TOOL_NAME] == tool
        assert attributes[C.OPERATION] == "execute_tool"
        assert attributes[C.TRANSPORT] == transport
        assert attributes[C.SERVER] == "fx"
        assert attributes[C.GENERATION] == 1
        assert C.REQUEST_ID in attributes and C.PROTOCOL_VERSION in attributes
        assert C.ERROR_TYPE not in attributes
    assert CANARY not in "".join(s.raw for s in receiver.spans if s.service == "mcp-supervisor")


SDK_PATH_META: Final = cast(types.RequestParamsMeta, {**HOST_META, "x-test/sdk-path": True})
"""A handshake-era host's ``_meta`` with a key of its own: only the SDK path takes it (``host.pipeline.paths``)."""


async def test_I18_the_sdk_path_carries_a_handshake_era_hosts_trace_to_a_real_upstream(tmp_path: Path) -> None:
    with trio.fail_after(BOUND_SEC):
        async with _stdio_host(tmp_path, "legacy") as (host, receiver):
            # A key of the host's own in _meta keeps the call on the SDK path (a plain one would cross the splice).
            await host.session.call_tool(ECHO, {"text": f"{CANARY}-argument"}, meta=SDK_PATH_META)
            await _one_trace(receiver, host_transport="pipe", scope=SDK_TRACER_NAME)


async def test_I18_the_splice_carries_a_2026_era_stdio_hosts_trace_to_a_real_upstream(tmp_path: Path) -> None:
    with trio.fail_after(BOUND_SEC):
        async with _stdio_host(tmp_path, "auto") as (host, receiver):
            assert host.modern
            await host.session.call_tool(ECHO, {"text": f"{CANARY}-argument"}, meta=HOST_META)
            await _one_trace(receiver, host_transport="pipe", scope="mcp-supervisor")


async def test_I18_the_http_fronts_own_answer_carries_an_http_hosts_trace_to_a_real_upstream_and_meters_both_sides(
    tmp_path: Path,
) -> None:
    with trio.fail_after(BOUND_SEC):
        async with open_otlp_receiver() as receiver:
            config = _settings(tmp_path, receiver, supervisor=http_supervisor_table())
            async with (
                open_http_sidecar(config, env=receiver.env()) as sidecar,
                open_http_host(sidecar.url, sidecar.token) as host,
            ):
                assert host.modern
                await host.wait_tools(lambda names: ECHO in names)  # routed: the front's own answer takes it
                await host.session.call_tool(ECHO, {"text": f"{CANARY}-argument"}, meta=HOST_META)
                await _one_trace(receiver, host_transport="tcp", scope="mcp-supervisor")
                await receiver.wait_for(
                    lambda: {C.SERVER_DURATION, C.CLIENT_DURATION} <= receiver.metric_names,
                    what="the duration histograms",
                    bound_sec=SPANS_BOUND_SEC,
                )
    labels = [labels for name, labels in receiver.metric_points if name == C.CLIENT_DURATION]
    assert any(point.get(C.TOOL_NAME) == "echo" and point.get(C.SERVER) == "fx" for point in labels)


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["splice", "sdk"])
async def test_I18_a_timeout_an_error_answer_and_a_lost_upstream_each_have_an_error_type(
    tmp_path: Path, mode: ConnectMode
) -> None:
    # The handshake-era host's calls carry a key of their own in _meta: the SDK path (else they cross the splice too).
    meta = HOST_META if mode == "auto" else SDK_PATH_META
    with trio.fail_after(BOUND_SEC):
        async with _stdio_host(tmp_path, mode, tool_timeout_sec=scaled(1)) as (host, receiver):
            slow = await host.session.call_tool("mcp__fx__slow", {"seconds": 30}, meta=meta)
            assert slow.is_error
            with pytest.raises(MCPError):
                await host.session.call_tool("mcp__fx__invalid_params", {}, meta=meta)
            assert (await host.session.call_tool("mcp__fx__crash", {}, meta=meta)).is_error

            def ended(tool: str) -> bool:
                client = _ours(receiver, f"tools/call {tool}", "SPAN_KIND_CLIENT")
                return bool(client and _ours(receiver, f"tools/call mcp__fx__{tool}", "SPAN_KIND_SERVER"))

            await receiver.wait_for(
                lambda: all(ended(tool) for tool in ("slow", "invalid_params", "crash")),
                what="the three CLIENT spans and their SERVER spans",
                bound_sec=SPANS_BOUND_SEC,
            )
    errors = {
        name: _ours(receiver, f"tools/call {name}", "SPAN_KIND_CLIENT")[0].attributes[C.ERROR_TYPE]
        for name in ("slow", "invalid_params", "crash")
    }
    assert errors == {"slow": "timeout", "invalid_params": "-32602", "crash": "unavailable"}
    servers = {name: _ours(receiver, f"tools/call mcp__fx__{name}", "SPAN_KIND_SERVER")[0] for name in errors}
    assert {name: span.attributes[C.OUTCOME] for name, span in servers.items()} == {
        "slow": "timeout",
        "invalid_params": "rpc_error",
        "crash": "unavailable",
    }
    assert {span.scope for span in servers.values()} == {"mcp-supervisor" if mode == "auto" else SDK_TRACER_NAME}
