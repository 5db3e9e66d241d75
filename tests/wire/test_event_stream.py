"""The event-stream decoder of the fast path's own HTTP client (``wire.event_stream``), chunk by chunk."""

from __future__ import annotations

import pytest

from supervisor.wire.event_stream import Event, EventStreamDecoder, EventTooLarge

STREAM = (
    b"\xef\xbb\xbf: a comment\r\n"
    b"id: prime\r\ndata:\r\n\r\n"  # a priming event: an id and an empty data line
    b'event: message\rdata: {"a":\r\ndata:1}\r\r'
    b"retry: 10\nunknown: x\ndata:no space\n\n"
    b"event: other\ndata: two\n\n"
    b"data: unfinished\n"  # no blank line: never dispatched
)
EVENTS = [Event("message", ""), Event("message", '{"a":\n1}'), Event("message", "no space"), Event("other", "two")]


def _decode(chunks: list[bytes]) -> list[Event]:
    decoder = EventStreamDecoder(1024)
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def test_a_stream_fed_whole_gives_each_event_by_the_standards_rules() -> None:
    # The priming event's data line makes it an event with empty data: the caller skips those.
    assert _decode([STREAM]) == EVENTS


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_a_stream_cut_anywhere_gives_the_same_events(cut: int) -> None:
    assert _decode([STREAM[:cut], STREAM[cut:]]) == EVENTS


def test_a_stream_fed_byte_by_byte_gives_the_same_events() -> None:
    assert _decode([STREAM[i : i + 1] for i in range(len(STREAM))]) == EVENTS


def test_an_event_without_data_is_not_dispatched() -> None:
    assert _decode([b"id: 1\n\nevent: x\n\n"]) == []


def test_bad_utf_8_is_replaced_not_refused() -> None:
    assert _decode([b"data: \xff\n\n"]) == [Event("message", "\ufffd")]


@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(b"data: " + b"x" * 2000 + b"\n\n", id="one-line"),
        pytest.param(b"data: " + b"x" * 600 + b"\ndata: " + b"y" * 600 + b"\n", id="two-lines"),
        pytest.param(b"data: " + b"x" * 2000, id="a-line-without-an-end"),
    ],
)
def test_an_event_beyond_the_bound_is_refused_before_it_is_held(stream: bytes) -> None:
    with pytest.raises(EventTooLarge):
        _decode([stream])
