"""The assumptions ``supervisor.compat.otel`` makes about the ``mcp`` SDK's own spans, one test each.

Run against the SDK itself: a low-level ``Server`` and an ``mcp.Client`` over
memory streams, in this process, with the production span pipeline.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.server import Server, ServerRequestContext
from mcp.shared.memory import create_client_server_memory_streams
from opentelemetry.trace import SpanKind

from supervisor.compat.otel import SDK_SEND_PREFIX, SDK_TRACER_NAME
from supervisor.telemetry import sdk
from tests.ops.otel_support import Recorded


async def _list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[])


@asynccontextmanager
async def _client() -> AsyncIterator[Client]:
    server: Server[Any] = Server("s", on_list_tools=_list_tools)
    async with create_client_server_memory_streams() as (client_streams, server_streams), trio.open_nursery() as n:
        n.start_soon(server.run, *server_streams, server.create_initialization_options())
        async with Client(_streams(client_streams)) as client:
            yield client
        n.cancel_scope.cancel()


@asynccontextmanager
async def _streams(streams: Any) -> AsyncIterator[Any]:
    yield streams


async def test_the_sdk_names_its_outbound_request_spans_MCP_send_method_under_its_own_tracer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Our renaming off, to see the SDK's own name.
    monkeypatch.setattr(sdk, "_conventional", lambda name, attributes: (name, dict(attributes or {})))
    with Recorded.start() as recorded, trio.fail_after(10):
        async with _client() as client:
            await client.list_tools()
    sent = [s for s in recorded.spans() if s.kind is SpanKind.CLIENT and s.name == f"{SDK_SEND_PREFIX}tools/list"]
    assert sent, [(s.name, s.kind) for s in recorded.spans()]
    assert {s.instrumentation_scope.name for s in sent if s.instrumentation_scope} == {SDK_TRACER_NAME}


async def test_the_sdk_server_middleware_spans_are_server_spans_of_its_tracer_named_by_the_conventions() -> None:
    with Recorded.start() as recorded, trio.fail_after(10):
        async with _client() as client:
            await client.list_tools()
    (listed,) = recorded.named("tools/list", SpanKind.SERVER)
    assert listed.instrumentation_scope is not None and listed.instrumentation_scope.name == SDK_TRACER_NAME
    assert (listed.attributes or {})["mcp.method.name"] == "tools/list"
    renamed = recorded.named("tools/list", SpanKind.CLIENT)
    assert renamed and not [s for s in recorded.spans() if s.name.startswith(SDK_SEND_PREFIX)]
