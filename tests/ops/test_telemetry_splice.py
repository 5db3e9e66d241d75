"""The stdio wire splice's spans and trace context, in-process (DESIGN I18, issue 28).

The two halves of the splice run as in ``tests/host/test_tool_call_paths.py``:
``HostSplice.on_line`` takes a host's request line, the upstream half writes it
to a memory stream standing in for the upstream's stdin, and the test plays the
upstream's answer (``claim`` then ``deliver``), its silence (the deadline task)
or its death (``fail_all``). The spans go through the production pipeline into
memory (``otel_support.Recorded``). The same over real processes:
``tests/e2e/test_tracing.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Final, cast

import anyio
import pytest
import trio
import trio.testing
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp_types import CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from opentelemetry.trace import SpanKind

from supervisor.host.stdio.reader import HostSplice
from supervisor.telemetry import conventions as C
from supervisor.upstream.splice import UpstreamSplice
from tests.fakes import SpliceFront, SpliceTracker
from tests.ops.otel_support import (
    BAGGAGE,
    CANARY,
    HOST_SPAN_ID,
    TRACE_ID,
    TRACEPARENT,
    TRACESTATE,
    Recorded,
    everything_exported,
    hex_span,
    hex_trace,
    parent_of,
)

MODERN: Final = "2026-07-28"
ENVELOPE: Final[dict[str, Any]] = {PROTOCOL_VERSION_META_KEY: MODERN, CLIENT_INFO_META_KEY: {"name": "host"}}
UPSTREAM_ENVELOPE: Final[dict[str, Any]] = {PROTOCOL_VERSION_META_KEY: MODERN, CLIENT_INFO_META_KEY: {"name": "us"}}
TRACED: Final[dict[str, Any]] = {**ENVELOPE, "traceparent": TRACEPARENT, "tracestate": TRACESTATE, "baggage": BAGGAGE}
PUBLIC: Final = "mcp__fx__echo"


class _Front(SpliceFront):
    def __init__(self, routed: tuple[Any, Any]) -> None:
        super().__init__()
        self.routed = routed
        self.shutting_down = False
        self.server = SimpleNamespace(server_info_stamp={"name": "mcp-supervisor", "version": "0"})

    def route(self, public_name: str) -> tuple[Any, Any] | None:
        return self.routed if public_name == PUBLIC else None


@dataclass
class Wire:
    host: HostSplice
    upstream: UpstreamSplice
    upstream_reads: MemoryObjectReceiveStream[Any]
    host_reads: MemoryObjectReceiveStream[Any]
    front: _Front

    def call(self, meta: dict[str, Any], arguments: dict[str, Any] | None = None, host_id: int = 1) -> dict[str, Any]:
        """The host sends a tools/call; returns the request line the upstream got."""
        params = {"name": PUBLIC, "arguments": arguments or {"text": "hi"}, "_meta": meta}
        line = json.dumps({"jsonrpc": "2.0", "id": host_id, "method": "tools/call", "params": params}).encode()
        assert self.host.on_line(line), "the splice carries it"
        sent: dict[str, Any] = json.loads(self.upstream_reads.receive_nowait())
        return sent

    async def answer(self, sent: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        """The upstream answers ``sent`` with ``reply`` (a result or an error); returns what the host got."""
        line = json.dumps({"jsonrpc": "2.0", "id": sent["id"], **reply}).encode()
        claimed = self.upstream.claim(line)
        assert claimed is not None
        await self.upstream.deliver(*claimed)
        answer: dict[str, Any] = json.loads(self.host_reads.receive_nowait())
        return answer


@contextmanager
def wire() -> Iterator[Wire]:
    stdin, upstream_reads = anyio.create_memory_object_stream[Any](8)
    out, host_reads = anyio.create_memory_object_stream[Any](8)
    with stdin, upstream_reads, out, host_reads:
        upstream = UpstreamSplice("fx", 0.5)
        upstream.attach(stdin, None)
        upstream.set_envelope(UPSTREAM_ENVELOPE)
        tool = SimpleNamespace(
            key="mcp__fx__echo",
            raw_name="echo",
            owner="fx",
            source=SimpleNamespace(output_schema=None),
            transforms_arguments=False,
        )
        actor = SimpleNamespace(
            name="fx",
            status=SimpleNamespace(generation=3, protocol_version=MODERN),
            ready_upstream=SimpleNamespace(splice=upstream),
            heal_unknown_tool=lambda raw_name, error: None,
        )
        front = _Front((tool, actor))
        host = HostSplice(cast(Any, front), SpliceTracker())
        host.attach(out.clone())
        yield Wire(host, upstream, upstream_reads, host_reads, front)
        host.attach(None)


OK: Final = {"result": {"content": [{"type": "text", "text": "hi"}]}}


async def test_I18_off_a_traceparent_keeps_the_call_on_the_splice_and_goes_upstream_as_it_came() -> None:
    with trio.fail_after(5), wire() as w:
        sent = w.call(TRACED)
        meta = sent["params"]["_meta"]
        assert {key: meta[key] for key in ("traceparent", "tracestate", "baggage")} == {
            "traceparent": TRACEPARENT,
            "tracestate": TRACESTATE,
            "baggage": BAGGAGE,
        }
        assert meta[CLIENT_INFO_META_KEY] == {"name": "us"}, "our envelope, not the host's"
        assert w.call(ENVELOPE, host_id=2)["params"]["_meta"] == UPSTREAM_ENVELOPE, "no trace context: as before"
        assert (await w.answer(sent, OK))["result"]["content"][0]["text"] == "hi"
        assert w.host.taken == {"spliced": 2}


async def test_I18_a_spliced_call_is_a_server_span_on_the_hosts_trace_and_a_client_span_whose_context_goes_on() -> None:
    with Recorded.start() as recorded, trio.fail_after(5), wire() as w:
        sent = w.call(TRACED)
        await w.answer(sent, OK)
    server = recorded.one(f"tools/call {PUBLIC}", SpanKind.SERVER)
    client = recorded.one("tools/call echo", SpanKind.CLIENT)
    assert hex_trace(server) == hex_trace(client) == TRACE_ID
    assert parent_of(server) == HOST_SPAN_ID
    assert parent_of(client) == hex_span(server)
    meta = sent["params"]["_meta"]
    assert meta["traceparent"] == f"00-{TRACE_ID}-{hex_span(client)}-01"
    assert meta["tracestate"] == TRACESTATE
    assert meta["baggage"] == BAGGAGE
    assert meta[CLIENT_INFO_META_KEY] == {"name": "us"}
    attributes = server.attributes or {}
    assert attributes == {
        C.METHOD: "tools/call",
        C.OPERATION: "execute_tool",
        C.TOOL_NAME: PUBLIC,
        C.TRANSPORT: "pipe",
        C.SERVER: "fx",
        C.GENERATION: 3,
        C.REQUEST_ID: "1",
        C.PROTOCOL_VERSION: MODERN,
        C.OUTCOME: "ok",
    }
    attributes = client.attributes or {}
    assert attributes[C.TOOL_NAME] == "echo"
    assert attributes[C.REQUEST_ID] == sent["id"]
    assert (attributes[C.TRANSPORT], attributes[C.SERVER], attributes[C.GENERATION]) == ("pipe", "fx", 3)
    assert C.ERROR_TYPE not in attributes
    durations = recorded.histogram_points(C.SERVER_DURATION) + recorded.histogram_points(C.CLIENT_DURATION)
    assert {(p.attributes[C.METHOD], p.attributes[C.TOOL_NAME]) for p in durations} == {
        ("tools/call", PUBLIC),
        ("tools/call", "echo"),
    }


async def test_I18_a_spliced_call_without_trace_context_starts_a_trace_of_its_own() -> None:
    with Recorded.start() as recorded, trio.fail_after(5), wire() as w:
        sent = w.call(ENVELOPE)
        await w.answer(sent, OK)
    server = recorded.one(f"tools/call {PUBLIC}", SpanKind.SERVER)
    client = recorded.one("tools/call echo", SpanKind.CLIENT)
    assert server.parent is None and parent_of(client) == hex_span(server)
    assert sent["params"]["_meta"]["traceparent"].startswith(f"00-{hex_trace(client)}-{hex_span(client)}-")


@pytest.mark.parametrize(
    ("reply", "client_error", "server_error", "outcome"),
    [
        pytest.param({"result": {"content": [], "isError": True}}, "tool_error", "tool_error", "tool_error", id="tool"),
        pytest.param({"error": {"code": -32602, "message": "no"}}, "-32602", "-32602", "rpc_error", id="rpc"),
        pytest.param({"result": {"nope": 1}}, "unavailable", "tool_error", "unavailable", id="invalid"),
    ],
)
async def test_I18_a_spliced_calls_error_type_follows_the_upstreams_answer(
    reply: dict[str, Any], client_error: str, server_error: str, outcome: str
) -> None:
    with Recorded.start() as recorded, trio.fail_after(5), wire() as w:
        await w.answer(w.call(TRACED), reply)
    server = recorded.one(f"tools/call {PUBLIC}", SpanKind.SERVER).attributes or {}
    client = recorded.one("tools/call echo", SpanKind.CLIENT).attributes or {}
    assert (client[C.ERROR_TYPE], server[C.ERROR_TYPE], server[C.OUTCOME]) == (client_error, server_error, outcome)


async def test_I18_a_spliced_call_that_times_out_or_loses_its_upstream_has_an_error_type(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with Recorded.start() as recorded, wire() as w:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.upstream.serve_deadlines)
            w.call(TRACED, host_id=1)
            await trio.sleep(1)  # past tool_timeout_sec (0.5 s, virtual)
            w.call(TRACED, host_id=2)
            await w.upstream.fail_all("the pipe closed")
            nursery.cancel_scope.cancel()
    clients = [s.attributes or {} for s in recorded.named("tools/call echo", SpanKind.CLIENT)]
    servers = [s.attributes or {} for s in recorded.named(f"tools/call {PUBLIC}", SpanKind.SERVER)]
    assert sorted(str(c[C.ERROR_TYPE]) for c in clients) == ["timeout", "unavailable"]
    assert sorted(str(s[C.OUTCOME]) for s in servers) == ["timeout", "unavailable"]
    assert {s[C.ERROR_TYPE] for s in servers} == {"tool_error"}, "the host got an isError result each time"


async def test_I18_a_spliced_call_the_host_cancels_ends_both_spans_cancelled() -> None:
    with Recorded.start() as recorded, wire() as w:  # all synchronous, as on the host wire's reader: no await
        w.call(TRACED)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        assert w.host.on_line(json.dumps(cancel).encode())
    client = recorded.one("tools/call echo", SpanKind.CLIENT).attributes or {}
    server = recorded.one(f"tools/call {PUBLIC}", SpanKind.SERVER).attributes or {}
    assert client[C.ERROR_TYPE] == "cancelled"
    assert server[C.OUTCOME] == "cancelled" and C.ERROR_TYPE not in server


async def test_I18_no_argument_result_or_error_message_reaches_a_spliced_calls_spans_unless_captured() -> None:
    arguments = {"text": f"{CANARY}-argument"}
    with Recorded.start() as recorded, trio.fail_after(5), wire() as w:
        await w.answer(w.call(TRACED, arguments), {"result": {"content": [{"type": "text", "text": f"{CANARY}-r"}]}})
        await w.answer(w.call(TRACED, arguments, host_id=2), {"error": {"code": -32000, "message": f"{CANARY}-e"}})
    assert CANARY not in everything_exported(recorded.spans())
    with Recorded.start(capture_content=True) as recorded, trio.fail_after(5), wire() as w:
        await w.answer(w.call(TRACED, arguments), {"result": {"content": [{"type": "text", "text": f"{CANARY}-r"}]}})
    server = recorded.one(f"tools/call {PUBLIC}", SpanKind.SERVER).attributes or {}
    client = recorded.one("tools/call echo", SpanKind.CLIENT).attributes or {}
    assert json.loads(str(server[C.ARGUMENTS])) == arguments == json.loads(str(client[C.ARGUMENTS]))
    assert f"{CANARY}-r" in str(server[C.RESULT]) and f"{CANARY}-r" in str(client[C.RESULT])


async def test_a_call_the_splice_could_not_queue_after_all_exports_no_span() -> None:
    with Recorded.start() as recorded, wire() as w:  # synchronous: nothing here awaits
        w.upstream.attach(cast(Any, _Full()), None)
        params = {"name": PUBLIC, "arguments": {}, "_meta": TRACED}
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
        assert not w.host.on_line(line), "the SDK takes it (and makes its own SERVER span)"
    assert recorded.spans() == []
    assert recorded.histogram_points(C.SERVER_DURATION) == []


class _Full:
    """An upstream stdin queue that never takes a line now."""

    def send_nowait(self, item: Any) -> None:
        raise anyio.WouldBlock
