"""Large lines on the wire splice (``wire.large``), in-process: the big member crosses unread, nothing else changes.

An ``UpstreamSplice`` writes into a memory stream and delivers to a recording
host; the lines are built here, so each test can put a fault exactly where it
wants one (inside the 200 kB string, in the envelope, in the shape).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest
import trio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp_types import SERVER_INFO_META_KEY

from supervisor.calls.splice import SplicedCall
from supervisor.host.pipeline.stages import shaped
from supervisor.upstream.splice import UpstreamSplice
from supervisor.wire.codec import BIG_LINE_BYTES, load
from supervisor.wire.json_spans import OpaqueObject

BOUND_SEC = 10
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
OURS = {"name": "mcp-supervisor", "version": "0"}
BIG = "x" * BIG_LINE_BYTES * 3
INVALID = "server 'fx': tools/call echo returned an invalid result"


class _Host:
    """What ``UpstreamSplice.deliver`` needs of ``HostSplice``, recording each answer."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.answers: list[dict[str, Any]] = []
        self.failures: list[tuple[str, str, str]] = []

    def restamp(self, result: dict[str, Any]) -> dict[str, Any]:
        return shaped(result, dict(OURS))

    async def answer(self, call: SplicedCall, outcome: str, message: dict[str, Any]) -> None:
        self.answers.append(message)

    def answer_now(self, call: SplicedCall, outcome: str, pieces: list[bytes | memoryview]) -> bool:
        return False  # a busy host wire: the joined line goes to answer_line

    async def answer_line(self, call: SplicedCall, outcome: str, line: bytes) -> None:
        self.lines.append(line)

    async def fail(self, call: SplicedCall, outcome: str, kind: str, text: str) -> None:
        self.failures.append((outcome, kind, text))


class _Actor:
    def heal_unknown_tool(self, name: str, error: Exception) -> None: ...


@dataclass
class _Rig:
    splice: UpstreamSplice
    call: SplicedCall
    host: _Host
    upstream: MemoryObjectReceiveStream[Any]
    """What the splice wrote to the upstream's stdin queue."""


@pytest.fixture
def rig() -> Iterator[_Rig]:
    """A splice with one call to ``echo`` in flight (host id 7), its request line already taken."""
    splice = UpstreamSplice("fx", 60.0)
    send, receive = anyio.create_memory_object_stream[Any](8)
    with send, receive:
        splice.attach(send, None)
        splice.set_envelope(ENVELOPE)
        host = _Host()
        tool = SimpleNamespace(raw_name="echo")
        call = SplicedCall(7, splice.new_id(), cast(Any, tool), cast(Any, _Actor()), 0.0, 60.0, cast(Any, host))
        assert splice.submit(call, "echo", {"text": "x"})
        receive.receive_nowait()
        yield _Rig(splice, call, host, receive)


def _answer(call: SplicedCall, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": call.upstream_id, "result": result}, separators=(",", ":")).encode()


async def test_a_large_answer_crosses_with_its_big_member_unread_and_only_the_envelope_edited(rig: _Rig) -> None:
    splice, call, host = rig.splice, rig.call, rig.host
    decoy = '"_meta":{"' + SERVER_INFO_META_KEY + '":{"name":"upstream"}},"resultType":"x", \\" é \U0001f600 '
    content = [{"type": "text", "text": decoy + BIG}]
    meta = {SERVER_INFO_META_KEY: {"name": "fx", "version": "1"}, "keep": [1, "2"]}
    line = _answer(call, {"content": content, "isError": False, "_meta": meta})
    with trio.fail_after(BOUND_SEC):
        claimed = splice.claim(line)
        assert claimed is not None and claimed[2] is not None, "claimed with the spans of its result"
        await splice.deliver(*claimed)
    [answer] = host.lines
    content_bytes = json.dumps(content, separators=(",", ":")).encode()
    assert content_bytes in answer, "the big member's bytes are forwarded as they came"
    assert json.loads(answer) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"content": content, "isError": False, "_meta": {**meta, SERVER_INFO_META_KEY: OURS},
                   "resultType": "complete"},
    }  # fmt: skip
    assert answer.endswith(b"}\n") and answer.count(b"\n") == 1


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(lambda line: line[:-40], id="truncated"),
        pytest.param(lambda line: line.replace(b"xxxx", b"x\\qx", 1), id="bad escape"),
        pytest.param(lambda line: line.replace(b"xxxx", b"x\xffxx", 1), id="invalid UTF-8"),
        pytest.param(lambda line: line.replace(b"xxxx", b"x\xed\xa0\x80", 1), id="encoded surrogate"),
        pytest.param(lambda line: line.replace(b"xxxx", b"x\x01xx", 1), id="raw control byte"),
        pytest.param(lambda line: line.replace(b"xxxx", b'x"xx', 1), id="quote inside the string"),
        pytest.param(lambda line: line.replace(b"}]", b"]", 1), id="unbalanced nesting"),
        pytest.param(lambda line: line + b" {}", id="trailing data"),
        pytest.param(lambda line: line.replace(b'"isError"', b"isError", 1), id="unquoted key"),
    ],
)
async def test_a_large_answer_that_is_not_json_is_left_to_the_sdk_as_a_small_one_is(rig: _Rig, fault: Any) -> None:
    splice, call, host = rig.splice, rig.call, rig.host
    good = _answer(call, {"content": [{"type": "text", "text": BIG}], "isError": False})
    bad = fault(good)
    assert splice.claim(bad) is None, "not claimed: the SDK's pump sees a garbage line, as for a small one"
    small = _answer(call, {"content": [{"type": "text", "text": "xxxxxx"}], "isError": False})
    assert len(small) < BIG_LINE_BYTES and splice.claim(fault(small)) is None
    assert not host.lines and not host.failures


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(BIG, id="result is a string"),
        pytest.param({"content": BIG}, id="content is a string"),
        pytest.param({"content": {"text": BIG}}, id="content is an object"),
        pytest.param({"content": [{"type": "text", "text": BIG}], "isError": "yes"}, id="isError not a boolean"),
        pytest.param({"structuredContent": {"text": BIG}}, id="no content"),
    ],
)
async def test_a_large_answer_of_the_wrong_shape_fails_with_the_protocol_error_text(rig: _Rig, result: Any) -> None:
    splice, call, host = rig.splice, rig.call, rig.host
    with trio.fail_after(BOUND_SEC):
        claimed = splice.claim(_answer(call, result))
        assert claimed is not None
        await splice.deliver(*claimed)
    assert host.failures == [("unavailable", "UpstreamProtocolError", INVALID)]
    assert not host.lines and not host.answers


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"content":[{"type":"text","text":"%s"}],"structuredContent":{"n":NaN}}', id="NaN"),
        pytest.param('{"content":[{"type":"text","text":"%s"}],"isError":true,"isError":false}', id="duplicate key"),
        pytest.param('{"content":[{"type":"text",\t"text":"%s"}]}', id="tab between tokens"),
        pytest.param('{"content":[{"type":"text","text":"%s"}],"n":[' + "1," * 3000 + "1]}", id="many tokens"),
    ],
)
async def test_a_large_answer_the_scan_leaves_undecided_is_decoded_whole_and_answered_like_a_small_one(
    rig: _Rig, text: str
) -> None:
    splice, call, host = rig.splice, rig.call, rig.host
    line = ('{"jsonrpc":"2.0","id":"%s","result":%s}' % (call.upstream_id, text % BIG)).encode()  # noqa: UP031
    with trio.fail_after(BOUND_SEC):
        claimed = splice.claim(line)
        assert claimed is not None and claimed[2] is None, "claimed, decoded whole: no spans"
        await splice.deliver(*claimed)
    expected = json.loads(line)["result"]
    [answer] = host.answers
    assert answer["id"] == 7 and answer["result"] == shaped(expected, dict(OURS))


async def test_a_large_request_goes_upstream_with_the_hosts_argument_bytes_our_id_and_our_envelope(rig: _Rig) -> None:
    splice, call = rig.splice, rig.call
    arguments = {"text": 'a "quoted" \\ é ' + BIG, "n": [1, 2.5, None]}
    host_meta = {**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": "h", "version": "1"}}
    params = {"name": "mcp__fx__echo", "arguments": arguments, "_meta": host_meta}
    line = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}, ensure_ascii=False)
    message, spans = load(line.encode(), "params")
    assert spans is not None and type(message["params"]["arguments"]) is OpaqueObject
    assert message["params"]["name"] == "mcp__fx__echo" and message["params"]["_meta"] == host_meta
    _, start, end = spans.inner["arguments"]
    assert splice.submit(call, "echo", message["params"]["arguments"], spans.text[start:end])
    sent = rig.upstream.receive_nowait()
    assert json.dumps(arguments, ensure_ascii=False).encode() in sent
    assert json.loads(sent) == {
        "jsonrpc": "2.0",
        "id": call.upstream_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": arguments, "_meta": ENVELOPE},
    }


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(lambda line: line[:-3], id="truncated"),
        pytest.param(lambda line: line.replace(b"xxxx", b"x\\", 1), id="bad escape"),
        pytest.param(lambda line: line.replace(b"xxxx", b"x\xc3", 1), id="invalid UTF-8"),
        pytest.param(lambda line: line.replace(b"xxxx", b"x\n", 1), id="raw newline"),
        pytest.param(lambda line: line.replace(b"xxxx", b"x\xed\xb0\x80", 1), id="encoded surrogate"),
        pytest.param(lambda line: b"[" * 200_000 + line + b"]" * 200_000, id="nested too deep for json.loads"),
    ],
)
def test_a_large_host_request_that_is_not_json_is_a_value_error_as_a_small_one_is(fault: Any) -> None:
    params = {"name": "mcp__fx__echo", "arguments": {"text": BIG}, "_meta": ENVELOPE}
    line = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}).encode()
    with pytest.raises(ValueError):
        load(fault(line), "params")
    small = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"arguments": {"t": "xxxx"}}})
    with pytest.raises(ValueError):
        load(fault(small.encode()), "params")
