"""A 1 MB message crosses the sidecar with as few copies of itself as can be (issue 11).

* ``LineBuffer``: a large whole-lines read (a view of the pump's reused
  buffer) is copied once without its final newline, so a read that is one line
  is copied once, into the line, where it was copied into a held chunk and then
  cut out of it again. Lines must come out as before: several per read, ``\\r\\n``,
  the cap, a read fed before every line was taken, the held length.

Copies are counted with ``tracemalloc`` (the peak of what one step allocates),
not timed.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import TypeVar

from supervisor._frames import CUT_FROM_COPY_BYTES, LineBuffer

MIB = 1024 * 1024
T = TypeVar("T")


def _peak_allocated(step: Callable[[], T]) -> tuple[T, int]:
    """What ``step`` returns and the most memory it held allocated at once."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        value = step()
        return value, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def _drain(buffer: LineBuffer) -> list[bytes]:
    lines = []
    while (line := buffer.next_line()) is not None:
        lines.append(line)
    return lines


def test_a_one_line_read_of_a_mib_is_copied_once_into_the_line_and_survives_the_buffers_reuse() -> None:
    storage = bytearray(b"x" * MIB + b"\n")
    buffer = LineBuffer()

    def feed_and_cut() -> list[bytes]:
        buffer.feed(memoryview(storage))
        return _drain(buffer)

    lines, peak = _peak_allocated(feed_and_cut)
    storage[:] = b"y" * len(storage)  # the pump's next read reuses its buffer
    assert lines == [b"x" * MIB]
    assert peak < 1.5 * MIB, f"{peak} bytes allocated at once: the line was copied twice"
    assert buffer.copied_bytes == 0
    assert len(buffer) == 0


def test_a_large_read_of_several_lines_gives_each_line_and_its_empty_and_crlf_lines() -> None:
    big = b"a" * CUT_FROM_COPY_BYTES
    storage = bytearray(b"one\r\n" + big + b"\n\n" + b"last\r\n")
    buffer = LineBuffer()
    buffer.feed(memoryview(storage))
    storage[:] = b"z" * len(storage)
    assert _drain(buffer) == [b"one", big, b"", b"last"]
    assert len(buffer) == 0
    assert buffer.scanned_bytes == len(storage)


def test_a_large_read_whose_last_line_is_empty_gives_that_empty_line() -> None:
    big = b"b" * CUT_FROM_COPY_BYTES
    buffer = LineBuffer()
    buffer.feed(memoryview(bytearray(big + b"\n\n")))
    assert _drain(buffer) == [big, b""]


def test_lines_left_in_a_large_read_keep_their_order_and_their_newline_when_more_is_fed() -> None:
    big = b"c" * CUT_FROM_COPY_BYTES
    buffer = LineBuffer()
    buffer.feed(memoryview(bytearray(b"first\n" + big + b"\n")))
    assert buffer.next_line() == b"first"
    assert len(buffer) == len(big) + 1, "the implied newline is held too"
    buffer.feed(memoryview(bytearray(b"next\n")))
    assert _drain(buffer) == [big, b"next"]
    assert len(buffer) == 0


def test_the_cap_trips_on_the_last_line_of_a_large_read_whose_newline_is_implied() -> None:
    buffer = LineBuffer(max_line_bytes=CUT_FROM_COPY_BYTES)
    buffer.feed(memoryview(bytearray(b"ok\n" + b"d" * (CUT_FROM_COPY_BYTES + 1) + b"\n")))
    assert buffer.next_line() == b"ok"
    assert buffer.next_line() is None
    assert buffer.overlong
    assert len(buffer) == 0
    buffer = LineBuffer(max_line_bytes=CUT_FROM_COPY_BYTES)
    buffer.feed(memoryview(bytearray(b"e" * CUT_FROM_COPY_BYTES + b"\n")))
    assert buffer.next_line() == b"e" * CUT_FROM_COPY_BYTES, "exactly at the cap passes"
    assert not buffer.overlong
