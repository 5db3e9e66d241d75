"""Large reads taken in two (``wire.pipes.PipeReader`` / ``SplitRead``, issue 11): a 1 MB line is the read's own bytes.

In a process whose heap keeps 1 MB buffers warm (``wire.heap.large_buffers_warm``,
the sidecar), once a read was large the next read asks the pipe how much it
holds and reads all of it but the last byte into a ``bytes`` of its own: when
that last byte is the line's newline, ``LineBuffer`` returns that very object as
the line, where it used to copy the line out of the reader's reused buffer.
Lines must come out exactly as before wherever the split falls; a process on
glibc's defaults never splits (its heads would be fresh pages on every read).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace

import pytest
import trio

from supervisor.wire import heap as _malloc
from supervisor.wire import pipes
from supervisor.wire.frames import LineBuffer
from supervisor.wire.pipes import PipeReader, SplitRead
from tests.sidecar import scaled

BOUND_SEC = scaled(5.0)
MIB = 1 << 20
BIG = 300_000
"""Above ``CUT_FROM_COPY_BYTES``: a large read."""


@asynccontextmanager
async def _pipe() -> AsyncIterator[tuple[PipeReader, int]]:
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, MIB)
    stream = trio.lowlevel.FdStream(read_fd)
    try:
        yield PipeReader(stream, MIB), write_fd
    finally:
        os.close(write_fd)
        await stream.aclose()


def _drain(lines: LineBuffer) -> list[bytes]:
    out = []
    while (line := lines.next_line()) is not None:
        out.append(line)
    return out


@pytest.fixture
def warm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipes, "large_buffers_warm", lambda: True)


@pytest.mark.usefixtures("warm")
async def test_a_large_line_read_after_a_large_read_is_the_reads_own_bytes_not_a_copy() -> None:
    async with _pipe() as (reader, write_fd):
        lines = LineBuffer()
        with trio.fail_after(BOUND_SEC):
            os.write(write_fd, b"a" * BIG + b"\n")
            lines.feed(await reader.receive())  # large: the next read may split
            assert _drain(lines) == [b"a" * BIG]
            os.write(write_fd, b"b" * BIG + b"\n")
            chunk = await reader.receive()
        assert isinstance(chunk, SplitRead)
        lines.feed(chunk)
        (line,) = _drain(lines)
        assert line is chunk.head, "the line was copied"
        assert line == b"b" * BIG
        assert lines.copied_bytes == 0
        assert len(lines) == 0


@pytest.mark.usefixtures("warm")
async def test_lines_come_out_whole_and_in_order_wherever_the_split_falls() -> None:
    async with _pipe() as (reader, write_fd):
        lines = LineBuffer()
        got: list[bytes] = []
        with trio.fail_after(BOUND_SEC):
            os.write(write_fd, b"a" * BIG + b"\n")
            lines.feed(await reader.receive())
            got += _drain(lines)
            # The split falls inside the unfinished last line: the head holds a whole line and part of one.
            os.write(write_fd, b"b" * BIG + b"\nc" + b"c" * BIG)
            chunk = await reader.receive()
            assert isinstance(chunk, SplitRead)
            lines.feed(chunk)
            got += _drain(lines)
            os.write(write_fd, b"\r\n" + b"d" * BIG + b"\n\n")
            chunk = await reader.receive()
            lines.feed(chunk)
            got += _drain(lines)
        assert got == [b"a" * BIG, b"b" * BIG, b"c" * (BIG + 1), b"d" * BIG, b""]
        assert len(lines) == 0


def test_what_follows_the_newline_after_the_head_comes_after_the_heads_lines() -> None:
    lines = LineBuffer()
    lines.feed(SplitRead(b"x\n" + b"b" * BIG, memoryview(b"\nrest\npart")))
    assert _drain(lines) == [b"x", b"b" * BIG, b"rest"]
    lines.feed(b"\n")
    assert _drain(lines) == [b"part"]
    assert len(lines) == 0


async def test_a_process_on_the_allocators_defaults_never_splits_a_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipes, "large_buffers_warm", lambda: False)
    async with _pipe() as (reader, write_fd):
        with trio.fail_after(BOUND_SEC):
            for _ in range(3):
                os.write(write_fd, b"a" * BIG + b"\n")
                chunk = await reader.receive()
                assert isinstance(chunk, memoryview)
                assert len(chunk) == BIG + 1


class _Mallopt:
    """glibc's ``mallopt`` as ``ctypes`` hands it over, answering ``answer`` (1: done, 0: refused)."""

    argtypes: object = None
    restype: object = None

    def __init__(self, answer: int) -> None:
        self.answer = answer

    def __call__(self, param: int, value: int) -> int:
        return self.answer


@pytest.mark.parametrize("answer", [1, 0])
def test_large_buffers_are_warm_only_once_the_thresholds_are_fixed(
    monkeypatch: pytest.MonkeyPatch, answer: int
) -> None:
    monkeypatch.setattr(_malloc, "_warm", False)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: SimpleNamespace(mallopt=_Mallopt(answer)))
    assert not _malloc.large_buffers_warm()
    assert _malloc.keep_large_buffers_warm() is bool(answer)
    assert _malloc.large_buffers_warm() is bool(answer)


@pytest.mark.usefixtures("warm")
async def test_a_split_read_takes_no_more_than_the_readers_max_bytes() -> None:
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, MIB)
    stream = trio.lowlevel.FdStream(read_fd)
    reader, lines, got = PipeReader(stream, 2 * BIG), LineBuffer(), []
    try:
        with trio.fail_after(BOUND_SEC):
            os.write(write_fd, b"a" * BIG + b"\n")
            lines.feed(await reader.receive())
            got += _drain(lines)
            os.write(write_fd, b"".join(bytes([98 + n]) * BIG + b"\n" for n in range(3)))  # more than max_bytes
            os.close(write_fd)
            while chunk := await reader.receive():
                assert len(chunk) <= 2 * BIG
                lines.feed(chunk)
                got += _drain(lines)
    finally:
        await stream.aclose()
    assert got == [bytes([97 + n]) * BIG for n in range(4)]
