"""The table in ``host.pipeline.paths``: which ``tools/call`` takes the splice, the fast path or the SDK path.

``test_the_one_decision_…`` pins the decision itself (``plain_call`` and
``path_of``) for every era pair, front and transport; the tests after it hold
the stdio host wire's reader to it, one case per condition of the splice's
row, in-process (``HostSplice.on_line``; the HTTP front's own answer:
``test_http_fast_calls.py``). The end-to-end proofs that each path carries a
call like the others are in ``test_wire_splice.py`` and ``test_sdk_path_calls.py``.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from anyio.streams.memory import MemoryObjectSendStream
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from supervisor.catalog.registry import Registry
from supervisor.catalog.transforms import compile_transforms
from supervisor.config.transforms import ToolTransformSettings
from supervisor.host.pipeline.paths import path_of, plain_call
from supervisor.host.pipeline.stages import FrontKind
from supervisor.host.stdio.reader import HostSplice
from supervisor.upstream.splice import UpstreamSplice
from tests.fakes import SpliceFront, SpliceTracker

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
ENVELOPE: dict[str, Any] = {
    PROTOCOL_VERSION_META_KEY: MODERN,
    CLIENT_INFO_META_KEY: {"name": "host", "version": "1"},
    CLIENT_CAPABILITIES_META_KEY: {},
}
PLAIN: dict[str, Any] = {"name": "mcp__fx__echo", "arguments": {"text": "hi"}, "_meta": ENVELOPE}
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _tool(output_schema: dict[str, Any] | None = None) -> Any:
    return SimpleNamespace(
        raw_name="echo",
        owner="fx",
        source=SimpleNamespace(output_schema=output_schema),
        transforms_arguments=False,
        upstream_arguments=lambda arguments: arguments,
    )


BARE: dict[str, Any] = {"name": "mcp__fx__echo", "arguments": {"text": "hi"}}
"""A handshake-era host's plain call: no envelope."""


def _generation(*, stdio: bool = True, ready: bool = True, modern: bool = True) -> Any:
    """A ready generation (2026-era unless ``modern`` is False): over stdio with a splice, or not.

    The era decides the HTTP front's splice (``http answer``) and a handshake-era stdio host's fast path.
    """
    return SimpleNamespace(splice=SimpleNamespace(ready=ready, modern=modern) if stdio else None, modern=modern)


def _routed(generation: Any = None, output_schema: dict[str, Any] | None = None) -> Any:
    return (_tool(output_schema), SimpleNamespace(ready_upstream=generation))


DECISIONS = [
    # (host era, front, params, routed, path)
    ("2026", "stdio", PLAIN, _routed(_generation()), "splice"),
    ("handshake", "stdio", BARE, _routed(_generation()), "splice"),
    ("2026", "stdio", {**PLAIN, "_meta": {**ENVELOPE, "traceparent": TRACEPARENT}}, _routed(_generation()), "splice"),
    ("handshake", "stdio", {**BARE, "_meta": {"traceparent": TRACEPARENT}}, _routed(_generation()), "splice"),
    ("2026", "http", PLAIN, _routed(_generation()), "splice"),
    ("2026", "http", PLAIN, _routed(_generation(modern=False)), "fast"),
    ("2026", "http", PLAIN, _routed(_generation(stdio=False)), "fast"),
    ("2026", "http", PLAIN, _routed(_generation(ready=False)), "fast"),
    ("2026", "http", {**PLAIN, "_meta": {**ENVELOPE, "traceparent": TRACEPARENT}}, _routed(_generation()),
     "fast"),
    ("2026", "http", {**PLAIN, "_meta": {**ENVELOPE, "io.modelcontextprotocol/logLevel": "info"}},
     _routed(_generation()), "fast"),
    ("2026", "stdio", PLAIN, _routed(_generation(stdio=False)), "fast"),
    ("2026", "stdio", PLAIN, _routed(_generation(ready=False)), "fast"),
    ("2026", "stdio", {**PLAIN, "_meta": {**ENVELOPE, "io.modelcontextprotocol/logLevel": "info"}},
     _routed(_generation()), "fast"),
    ("handshake", "http", BARE, _routed(_generation(modern=False)), "splice"),
    ("handshake", "http", BARE, _routed(_generation()), "splice"),
    ("handshake", "http", BARE, _routed(_generation(stdio=False)), "fast"),
    ("handshake", "http", BARE, _routed(_generation(ready=False)), "fast"),
    ("handshake", "http", BARE, _routed(_generation(stdio=False, modern=False)), "sdk"),
    ("handshake", "http", {**BARE, "_meta": {"io.modelcontextprotocol/logLevel": "info"}},
     _routed(_generation(stdio=False)), "sdk"),
    ("handshake", "http", BARE, _routed(_generation(modern=False, ready=False)), "sdk"),
    ("handshake", "http", {**BARE, "_meta": {"traceparent": TRACEPARENT}},
     _routed(_generation(modern=False)), "splice"),
    ("handshake", "http", {**BARE, "_meta": {"traceparent": TRACEPARENT}}, _routed(_generation()), "splice"),
    ("handshake", "http", {**BARE, "_meta": {"progressToken": 1}}, _routed(_generation(modern=False)), "splice"),
    ("handshake", "http", {**BARE, "_meta": {"x-own": 1}}, _routed(_generation(modern=False)), "sdk"),
    ("handshake", "stdio", BARE, _routed(_generation(stdio=False)), "fast"),
    ("handshake", "stdio", {**BARE, "_meta": {"traceparent": TRACEPARENT}}, _routed(_generation(stdio=False)), "fast"),
    ("handshake", "stdio", BARE, _routed(_generation(ready=False)), "fast"),
    ("handshake", "stdio", BARE, _routed(_generation(stdio=False, modern=False)), "sdk"),
    ("handshake", "stdio", BARE, _routed(_generation(ready=False, modern=False)), "sdk"),
    ("handshake", "stdio", {**BARE, "_meta": {"io.modelcontextprotocol/logLevel": "info"}},
     _routed(_generation(stdio=False)), "sdk"),
    ("handshake", "stdio", {**BARE, "_meta": {"io.modelcontextprotocol/logLevel": "info"}},
     _routed(_generation()), "sdk"),
    ("handshake", "stdio", {**BARE, "_meta": ENVELOPE}, _routed(_generation()), "sdk"),
    ("2026", "stdio", {"name": "mcp__fx__echo"}, _routed(_generation()), "fast"),
    ("2026", "stdio", {**PLAIN, "_meta": {**ENVELOPE, PROTOCOL_VERSION_META_KEY: HANDSHAKE}},
     _routed(_generation()), "fast"),
    ("2026", "stdio", {**PLAIN, "_meta": {**ENVELOPE, "progressToken": 1}}, _routed(_generation()), "splice"),
    ("2026", "stdio", {**PLAIN, "_meta": {**ENVELOPE, "progressToken": 1}}, _routed(_generation(stdio=False)), "fast"),
    ("handshake", "stdio", {**BARE, "_meta": {"progressToken": 1}}, _routed(_generation()), "splice"),
    ("handshake", "stdio", {**BARE, "_meta": {"progressToken": 1}}, _routed(_generation(stdio=False)), "fast"),
    ("handshake", "stdio", {**BARE, "_meta": {"progressToken": 1}}, _routed(_generation(modern=False)), "splice"),
    ("handshake", "stdio", {**BARE, "_meta": {"x-own": 1}}, _routed(_generation(modern=False)), "sdk"),
    ("2026", "stdio", {**PLAIN, "requestState": "s"}, _routed(_generation()), "fast"),
    ("2026", "stdio", {**PLAIN, "requestState": 7}, _routed(_generation()), "sdk"),
    ("2026", "stdio", {**PLAIN, "inputResponses": {"k": 1}}, _routed(_generation()), "sdk"),
    ("handshake", "stdio", {**BARE, "requestState": "s"}, _routed(_generation()), "sdk"),
    ("2026", "stdio", {**PLAIN, "arguments": [1]}, _routed(_generation()), "sdk"),
    ("2026", "stdio", {**PLAIN, "name": 7}, _routed(_generation()), "sdk"),
    ("2026", "stdio", PLAIN, None, "sdk"),
    ("2026", "stdio", PLAIN, _routed(None), "sdk"),
    ("2026", "stdio", PLAIN, _routed(_generation(), output_schema={"type": "object"}), "fast"),  # checked in a stage
    ("handshake", "stdio", BARE, _routed(_generation(), output_schema={"type": "object"}), "fast"),
]  # fmt: skip


@pytest.mark.parametrize(("era", "front", "params", "routed", "path"), DECISIONS)
def test_the_one_decision_names_the_path_of_every_call_for_every_era_pair_front_and_transport(
    era: str, front: FrontKind, params: dict[str, Any], routed: Any, path: str
) -> None:
    handshake = era == "handshake"
    plain = plain_call(params, handshake_host=handshake)
    assert path_of(plain, routed, front=front, handshake_host=handshake) == path
    if plain is not None:
        assert plain.name == params["name"] and plain.arguments == params.get("arguments")
        carrier = {k: v for k, v in (params.get("_meta") or {}).items() if k == "traceparent"}
        assert plain.carrier == (carrier or None) or not plain.spliceable


class _Front(SpliceFront):
    """``SpliceFront`` plus routing and the shutdown flag: what ``HostSplice._take_call`` reads."""

    def __init__(self, routed: tuple[Any, Any] | None, *, shutting_down: bool = False) -> None:
        super().__init__()
        self.routed = routed
        self.shutting_down = shutting_down

    def route(self, public_name: str) -> tuple[Any, Any] | None:
        return self.routed if public_name == PLAIN["name"] else None


def _upstream_splice(stdin: MemoryObjectSendStream[Any], *, ready: bool) -> UpstreamSplice:
    splice = UpstreamSplice("fx", 60.0)
    if ready:
        splice.attach(stdin, None)
        splice.set_envelope({PROTOCOL_VERSION_META_KEY: MODERN})
    return splice


def _line(params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()


SPLICE_CASES = [
    pytest.param(PLAIN, {}, True, id="splice: a plain 2026 call to a ready stdio generation"),
    pytest.param(
        {**PLAIN, "_meta": {**ENVELOPE, "traceparent": TRACEPARENT, "tracestate": "a=b", "baggage": "k=v"}},
        {},
        True,
        id="splice: trace context in _meta (traceparent, tracestate, baggage)",
    ),
    pytest.param({**PLAIN, "_meta": {**ENVELOPE, "progressToken": 1}}, {}, True, id="splice: a progress token"),
    pytest.param(
        {**PLAIN, "_meta": {**ENVELOPE, "io.modelcontextprotocol/logLevel": "debug"}}, {}, False, id="not: a log level"
    ),
    pytest.param(
        {**PLAIN, "_meta": {**ENVELOPE, PROTOCOL_VERSION_META_KEY: HANDSHAKE}}, {}, False, id="not: a handshake version"
    ),
    pytest.param({**PLAIN, "requestState": "s"}, {}, False, id="not: an input round's retry"),
    pytest.param({**PLAIN, "name": "mcp__fx__other"}, {}, False, id="not: a name not routed now"),
    pytest.param(PLAIN, {"output_schema": {"type": "object"}}, False, id="not: a tool with an outputSchema"),
    pytest.param(PLAIN, {"ready_upstream": None}, False, id="not: a generation that is not ready"),
    pytest.param(PLAIN, {"splice": None}, False, id="not: a generation without a splice (HTTP)"),
    pytest.param(PLAIN, {"ready": False}, False, id="not: a splice not ready yet"),
    pytest.param(PLAIN, {"shutting_down": True}, False, id="not: shutting down"),
]


@pytest.mark.parametrize(("params", "change", "spliced"), SPLICE_CASES)
async def test_the_splice_takes_exactly_the_calls_its_row_names(
    params: dict[str, Any], change: dict[str, Any], spliced: bool
) -> None:
    # ``on_line`` is synchronous, as on the host wire's reader task: nothing here awaits, so nothing can hang.
    stdin, upstream_reads = anyio.create_memory_object_stream[Any](8)
    out, host_reads = anyio.create_memory_object_stream[Any](8)
    with stdin, upstream_reads, out, host_reads:
        upstream = _upstream_splice(stdin, ready=change.get("ready", True))
        generation = SimpleNamespace(splice=change.get("splice", upstream))
        actor = SimpleNamespace(ready_upstream=change.get("ready_upstream", generation))
        front = _Front((_tool(change.get("output_schema")), actor), shutting_down=change.get("shutting_down", False))
        host = HostSplice(cast(Any, front), SpliceTracker())
        host.attach(out.clone())
        assert host.on_line(_line(params)) is spliced
        assert host.taken == {"spliced" if spliced else "sdk": 1}
        if spliced:  # the request went to the upstream's stdin, with our id and the raw name
            sent = json.loads(upstream_reads.receive_nowait())
            assert sent["id"].startswith("mcp-supervisor/splice/")
            assert sent["params"]["name"] == "echo"
        host.attach(None)


async def test_I16_the_splice_sends_a_transformed_tools_arguments_as_the_upstream_takes_them() -> None:
    registry = Registry()
    transform = ToolTransformSettings.model_validate(
        {"arguments": {"text": {"rename": "words"}, "loud": {"hide": True, "default": True}}}
    )
    registry.swap(
        "fx",
        [types.Tool(name="echo", input_schema={"type": "object", "properties": {"text": {}, "loud": {}}})],
        transforms=compile_transforms({"echo": transform}),
    )
    (tool,) = registry.tool_entries()
    stdin, upstream_reads = anyio.create_memory_object_stream[Any](8)
    out, host_reads = anyio.create_memory_object_stream[Any](8)
    with stdin, upstream_reads, out, host_reads:
        upstream = _upstream_splice(stdin, ready=True)
        actor = SimpleNamespace(ready_upstream=SimpleNamespace(splice=upstream))
        host = HostSplice(cast(Any, _Front((tool, actor))), SpliceTracker())
        host.attach(out.clone())
        assert host.on_line(_line({**PLAIN, "arguments": {"words": "hi", "loud": False}}))
        sent = json.loads(upstream_reads.receive_nowait())
        assert sent["params"]["arguments"] == {"text": "hi", "loud": True}, "renamed back, the hidden one injected"
        host.attach(None)
