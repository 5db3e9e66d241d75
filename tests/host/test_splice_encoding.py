"""The wire splice encodes with ``pydantic_core.to_json``: the text must be what ``json.dumps`` wrote (issue 11).

``wire.codec.to_json`` is the splice's encoder for answers, request arguments and
tool names. Every value it gets comes from a JSON parse (or is our own stamp),
and the host must see the same JSON the ``json.dumps`` encoder wrote before:
the same bytes, except a float's exponent spelling (the same number), and the
values ``to_json`` refuses (a lone surrogate, deep nesting) encoded as before.
"""

from __future__ import annotations

import json
from typing import Any, cast

import anyio
import pydantic_core
import pytest

from supervisor.calls.splice import SplicedCall
from supervisor.upstream.splice import UpstreamSplice
from supervisor.wire.codec import frame, to_json
from supervisor.wire.large import encode_ascii


def _dumps(value: Any) -> bytes:
    """What the splice wrote before: ``json.dumps`` with its options."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


PARSED: tuple[bytes, ...] = (
    b'{"content":[{"type":"text","text":"x"}],"isError":false,"resultType":"complete"}',
    b'{"text":"caf\\u00e9 \xe2\x82\xac \xf0\x9f\x98\x80 \\u2028 \\u007f \\u0000 \\u001f \\/ \\" \\\\ \\b\\f\\n\\r\\t"}',
    b'{"n":[0,-1,9007199254740993,123456789012345678901234567890,-0.0,0.1,1.5,1e+16,1e300,2.5e-300]}',
    b'{"deep":[[[{"a":null,"b":true,"c":false,"d":{},"e":[]}]]],"":"empty key","k\\u00e9y":1}',
)


@pytest.mark.parametrize("text", PARSED)
def test_the_splice_writes_what_json_dumps_wrote_for_what_a_json_parse_yields(text: bytes) -> None:
    for value in (pydantic_core.from_json(text), json.loads(text)):
        assert to_json(value) == _dumps(value)
        assert frame(value) == _dumps(value) + b"\n"


def test_a_float_may_spell_its_exponent_differently_but_stays_the_same_number() -> None:
    values = [1e-05, 1e-07, 5e-324, 1.7976931348623157e308, 0.30000000000000004, 1e21]
    assert json.loads(to_json(values)) == values


def test_nan_and_infinity_are_written_as_json_dumps_writes_them() -> None:
    value = pydantic_core.from_json(b"[NaN,Infinity,-Infinity]", allow_inf_nan=True)
    assert to_json(value) == b"[NaN,Infinity,-Infinity]" == _dumps(value)


def test_a_lone_surrogate_is_written_escaped_as_it_arrived() -> None:
    # UTF-8 has no bytes for it: to_json refuses it, and the line is written as before.
    value = json.loads('{"text":"\\ud800 \\u00e9"}')
    assert to_json(value) == b'{"text":"\\ud800 \\u00e9"}'
    assert json.loads(to_json(value)) == value


def test_nesting_deeper_than_the_fast_encoder_takes_is_still_written() -> None:
    text = "[" * 400 + "]" * 400  # json.loads takes it; to_json stops at a depth limit
    value = json.loads(text)
    assert to_json(value) == text.encode()


def test_a_spliced_request_line_is_the_frame_of_its_message() -> None:
    # submit() assembles the line from pieces; it must be the message frame() writes.
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "x": {"name": "mcp", "v": [1, 2]}}
    splice = UpstreamSplice("srv", 60.0)
    send, receive = anyio.create_memory_object_stream[Any](4)
    splice.attach(send, None)
    splice.set_envelope(envelope)
    arguments: dict[str, Any] = {"text": "\u20ac \u2028", "n": [1, 2.5, None]}
    with send, receive:  # nothing here awaits: it cannot hang
        for raw_name, args in (("echo \u00e9", arguments), ("no-arguments", None)):
            call = SplicedCall(1, splice.new_id(), cast(Any, None), cast(Any, None), 0.0, 60.0, cast(Any, None))
            assert splice.submit(call, raw_name, args)
            params: dict[str, Any] = {"name": raw_name}
            if args is not None:
                params["arguments"] = args
            message = {"jsonrpc": "2.0", "id": call.upstream_id, "method": "tools/call", "params": params}
            expected = {**message, "params": {**params, "_meta": envelope}}
            line = receive.receive_nowait()
            assert line == frame(expected)


def test_each_request_line_declares_its_own_hosts_capabilities_whichever_came_last() -> None:
    # ``_tail_for`` compares with the last capabilities first: hosts taking turns must not get each other's.
    caps_key = "io.modelcontextprotocol/clientCapabilities"
    ours = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", caps_key: {"sampling": {}}}
    splice = UpstreamSplice("srv", 60.0)
    send, receive = anyio.create_memory_object_stream[Any](8)
    splice.attach(send, None)
    splice.set_envelope(ours)
    turns: list[dict[str, Any] | None] = [{"roots": {}}, {"roots": {}}, {}, {"roots": {}}, None, {"elicitation": {}}]
    with send, receive:
        for capabilities in turns:
            call = SplicedCall(1, splice.new_id(), cast(Any, None), cast(Any, None), 0.0, 60.0, cast(Any, None))
            assert splice.submit(call, "echo", {}, capabilities=None if capabilities is None else dict(capabilities))
            meta = json.loads(receive.receive_nowait())["params"]["_meta"]
            assert meta[caps_key] == (ours[caps_key] if capabilities is None else capabilities)


@pytest.mark.parametrize("era", ["2026", "handshake"])
@pytest.mark.parametrize(
    "extra",
    [
        {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "baggage": "user=al\u00efce"},
        {"io.modelcontextprotocol/logLevel": "info", "progressToken": "mcp-supervisor/s-1"},
        {"io.modelcontextprotocol/protocolVersion": "shadowed"},
    ],
    ids=["trace context", "log level and progress token", "a key of the envelope"],
)
@pytest.mark.parametrize("capabilities", [None, {"roots": {}}], ids=["ours", "the host's"])
def test_keys_beside_the_envelope_make_the_line_the_merged_meta_would(
    era: str, extra: dict[str, Any], capabilities: dict[str, Any] | None
) -> None:
    # ``_tail_with`` splices the extra keys into the kept envelope bytes: the line must be what encoding the merged
    # ``_meta`` whole (as submit did before) writes, byte for byte.
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "x": {"name": "mcp"}}
    splice = UpstreamSplice("srv", 60.0)
    send, receive = anyio.create_memory_object_stream[Any](4)
    splice.attach(send, None)
    if era == "2026":
        splice.set_envelope(envelope)
    else:
        splice.set_handshake()
    with send, receive:
        call = SplicedCall(1, splice.new_id(), cast(Any, None), cast(Any, None), 0.0, 60.0, cast(Any, None))
        assert splice.submit(call, "echo", {"a": 1}, meta_extra=dict(extra), capabilities=capabilities)
        line = receive.receive_nowait()
    merged = {**splice.envelope_for(capabilities), **extra}
    head = b'{"jsonrpc":"2.0","id":"' + call.upstream_id.encode() + b'","method":"tools/call","params":{"name":"echo"'
    assert line == head + b',"arguments":{"a":1},"_meta":' + encode_ascii(merged).encode() + b"}}\n"
    assert json.loads(line)["params"]["_meta"] == merged
