"""The call path's cheaper steps keep what the dearer ones did (issue 11).

* ``wire.codec.load_small`` parses with ``pydantic_core.from_json`` first: it
  must return the values, and refuse the lines, of ``json.loads(line.decode())``.
* ``LineBuffer`` holds a whole-lines view as ``bytes``: the lines must come out
  right however the viewed buffer is reused afterwards.
* ``UpstreamSplice`` drops answered calls from the head of its deadline queue
  when they are answered, not when the oldest one's deadline comes.
"""

from __future__ import annotations

import json
from typing import Any, cast

import anyio
import pytest

from supervisor.calls.splice import SplicedCall
from supervisor.host.stdio.reader import HostSplice
from supervisor.upstream.splice import UpstreamSplice
from supervisor.wire.codec import load_small
from supervisor.wire.frames import LineBuffer


def _outcome(parse: Any, line: bytes) -> tuple[str, Any]:
    try:
        return "value", parse(line)
    except ValueError:
        return "refused", None


LINES = [
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"text":"x"}}}',
    b'{"a":"\\ud800"}',  # an escaped lone surrogate: valid JSON text, which from_json refuses
    b'{"a":"\\u00e9\\ud83d\\ude00","b":[1.5,-0.0,1e400,123456789012345678901234567890]}',
    b"[" * 300 + b"]" * 300,  # deeper than from_json goes, within json.loads' reach
    b"[" * 5000 + b"]" * 5000,  # beyond both
    b'{"a":"\xff"}',  # not UTF-8
    '{"a":"\udc80"}'.encode("utf-8", "surrogatepass"),  # an encoded lone surrogate
    b'{"a":1,}',
    b"{} x",
    b"\xef\xbb\xbf{}",
    b'{"a":NaN,"b":-Infinity,"a":2}',
]


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_a_small_line_parses_to_what_the_strict_json_decoder_gives_and_is_refused_when_it_refuses(
    line: bytes,
) -> None:
    def strict(text: bytes) -> Any:
        try:
            return json.loads(text.decode())
        except RecursionError as exc:
            raise ValueError("too deep") from exc

    def ours(text: bytes) -> Any:
        try:
            return load_small(text)
        except RecursionError as exc:
            raise ValueError("too deep") from exc

    kind, value = _outcome(ours, line)
    expected_kind, expected = _outcome(strict, line)
    assert kind == expected_kind
    assert repr(value) == repr(expected)  # repr: nan != nan, and -0.0 == 0.0


def test_whole_lines_read_into_a_reused_buffer_come_out_right_after_the_buffer_is_overwritten() -> None:
    buffer = LineBuffer()
    storage = bytearray(b"first\nsecond\n")
    buffer.feed(memoryview(storage))
    storage[:] = b"XXXXX\nXXXXXX\n"  # the pump's next read reuses the mapping before the lines are cut
    assert buffer.next_line() == b"first"
    assert buffer.next_line() == b"second"
    assert buffer.next_line() is None
    assert buffer.copied_bytes == 0, "whole lines are held as one bytes copy, not appended to the bytearray"


def test_a_view_ending_inside_a_line_is_buffered_and_completed_by_the_next_read() -> None:
    buffer = LineBuffer()
    storage = bytearray(b"one\ntw")
    buffer.feed(memoryview(storage))
    assert buffer.next_line() == b"one"
    assert buffer.next_line() is None
    storage[:] = b"o\n"
    buffer.feed(memoryview(storage))
    assert buffer.next_line() == b"two"
    assert buffer.next_line() is None


def test_calls_answered_in_order_leave_the_deadline_queue_at_once_not_at_their_deadline() -> None:
    splice = UpstreamSplice("fx", 60.0)
    send, receive = anyio.create_memory_object_stream[Any](8)
    host = HostSplice(cast(Any, None), cast(Any, None))
    with send, receive:  # nothing here awaits: no bound needed
        splice.attach(send, None)
        splice.set_envelope({})
        calls = [SplicedCall(n, splice.new_id(), cast(Any, None), cast(Any, None), 0.0, 60.0, host) for n in range(3)]
        for call in calls:
            assert splice.submit(call, "echo", {"text": "x"})
        answer = '{"jsonrpc":"2.0","id":"%s","result":{"content":[]}}'
        assert splice.claim((answer % calls[1].upstream_id).encode()) is not None
        assert len(splice._order) == 3, "the oldest is still in flight: it keeps its place, and those behind it"
        assert splice.claim((answer % calls[0].upstream_id).encode()) is not None
        assert list(splice._order) == [calls[2]]
        assert splice.claim((answer % calls[2].upstream_id).encode()) is not None
        assert not splice._order
