"""Line framing (DESIGN I15): ``LineBuffer`` splits lines linearly and enforces its cap while a line grows."""

from __future__ import annotations

from collections.abc import Iterable

from supervisor.wire.frames import LineBuffer

CHUNK = 64 * 1024
MIB = 1024 * 1024


def _drain(buffer: LineBuffer) -> list[bytes]:
    lines = []
    while (line := buffer.next_line()) is not None:
        lines.append(line)
    return lines


def _feed_all(buffer: LineBuffer, chunks: Iterable[bytes]) -> list[bytes]:
    lines = []
    for chunk in chunks:
        buffer.feed(chunk)
        lines.extend(_drain(buffer))
    return lines


def test_a_line_split_across_chunks_comes_out_whole_once_its_newline_arrives() -> None:
    buffer = LineBuffer()
    assert _feed_all(buffer, [b"ab", b"c"]) == []
    assert len(buffer) == 3
    assert _feed_all(buffer, [b"\nde", b"f", b"\n"]) == [b"abc", b"def"]
    assert len(buffer) == 0


def test_many_lines_in_one_chunk_come_out_in_order_and_the_unfinished_tail_waits() -> None:
    buffer = LineBuffer()
    lines = _feed_all(buffer, [b"".join(b"line %d\n" % n for n in range(1000)) + b"tail"])
    assert lines == [b"line %d" % n for n in range(1000)]
    assert len(buffer) == 4
    assert _feed_all(buffer, [b"\n"]) == [b"tail"]


def test_crlf_line_endings_lose_their_carriage_return_and_blank_lines_come_out_empty() -> None:
    buffer = LineBuffer()
    assert _feed_all(buffer, [b'{"a":1}\r', b'\n\r\n\n{"b":2}\n']) == [b'{"a":1}', b"", b"", b'{"b":2}']


def test_a_line_exactly_at_the_cap_passes_and_one_byte_more_trips_it() -> None:
    buffer = LineBuffer(max_line_bytes=10)
    assert _feed_all(buffer, [b"x" * 10, b"\n"]) == [b"x" * 10]
    assert not buffer.overlong
    assert _feed_all(buffer, [b"y" * 11 + b"\nz\n"]) == []
    assert buffer.overlong


def test_the_cap_applies_per_line_not_to_a_chunk_holding_several_lines_under_it() -> None:
    buffer = LineBuffer(max_line_bytes=10)
    assert _feed_all(buffer, [b"a" * 10 + b"\n" + b"b" * 10 + b"\n" + b"c" * 10]) == [b"a" * 10, b"b" * 10]
    assert not buffer.overlong
    assert len(buffer) == 10


def test_the_cap_trips_on_the_first_chunk_past_it_and_nothing_more_is_held() -> None:
    cap = MIB
    buffer = LineBuffer(max_line_bytes=cap)
    fed = 0
    while not buffer.overlong:
        assert fed <= cap, "the cap must trip before the line grows a chunk past it"
        buffer.feed(b"x" * CHUNK)
        fed += CHUNK
        assert buffer.next_line() is None
    assert fed == cap + CHUNK
    assert len(buffer) == 0
    buffer.feed(b"y" * CHUNK + b"\n")
    assert buffer.next_line() is None
    assert len(buffer) == 0


def test_a_16_mib_line_fed_in_64_kib_chunks_is_searched_once_not_once_per_chunk() -> None:
    buffer = LineBuffer()
    size = 16 * MIB
    block = b"x" * CHUNK
    lines = _feed_all(buffer, [*(block for _ in range(size // CHUNK)), b"\n"])
    assert lines == [block * (size // CHUNK)]
    # Every byte, newline included, examined exactly once: O(n), where rescanning is O(n^2 / chunk).
    assert buffer.scanned_bytes == size + 1


def test_lines_of_every_length_mixed_across_chunks_are_each_searched_once() -> None:
    payload = b"".join(b"y" * (n * 997 % 70_001) + b"\n" for n in range(300))
    buffer = LineBuffer()
    lines = _feed_all(buffer, [payload[i : i + CHUNK] for i in range(0, len(payload), CHUNK)])
    assert lines == payload.split(b"\n")[:-1]
    assert buffer.scanned_bytes == len(payload)


def test_whole_lines_fed_to_an_empty_buffer_are_cut_from_the_chunk_and_never_copied_into_the_buffer() -> None:
    buffer = LineBuffer()
    assert _feed_all(buffer, [b"a\nbb\r\n" + b"c" * MIB + b"\n"]) == [b"a", b"bb", b"c" * MIB]
    assert buffer.copied_bytes == 0
    assert len(buffer) == 0


def test_only_the_unfinished_tail_of_a_chunk_is_copied_into_the_buffer_and_searched_once() -> None:
    buffer = LineBuffer()
    assert _feed_all(buffer, [b"a\nbb", b"b\nc", b"c\n"]) == [b"a", b"bbb", b"cc"]
    assert buffer.copied_bytes == len(b"bb" + b"b\nc" + b"c\n"), "a chunk fed to a non-empty buffer is appended"
    assert buffer.scanned_bytes == len(b"a\nbbb\ncc\n")


def test_a_chunk_fed_before_every_line_was_taken_keeps_the_order() -> None:
    buffer = LineBuffer()
    buffer.feed(b"a\nb\n")
    assert buffer.next_line() == b"a"
    buffer.feed(b"c\n")
    assert _drain(buffer) == [b"b", b"c"]


def test_the_cap_trips_on_a_line_cut_from_a_chunk_as_on_a_buffered_one() -> None:
    buffer = LineBuffer(max_line_bytes=10)
    buffer.feed(b"x" * 10 + b"\n" + b"y" * 11 + b"\n" + b"z\n")
    assert buffer.next_line() == b"x" * 10
    assert buffer.next_line() is None
    assert buffer.overlong
    assert len(buffer) == 0
