"""``wire.pipes.DirectWrite`` and ``wire.pipes.PipeReader``: the pumps' batched writes and their reads.

A line is accepted into a batch only while its writer task is parked on an
empty queue; ``flush`` writes the batch in one syscall, hands what the pipe did
not take to the writer, and a writer woken meanwhile writes the batch before
what it was handed. Nothing is torn, reordered or lost.
"""

from __future__ import annotations

import fcntl
import os
import select
from pathlib import Path
from typing import Any

import anyio
import trio
import trio.testing

from supervisor.wire.pipes import MAX_DIRECT_BYTES, DirectWrite, PipeReader
from tests.pipes import host_wire_writer, nonblocking_pipe, read_available
from tests.sidecar import scaled


async def test_lines_are_batched_only_while_the_writer_is_parked_and_written_in_one_syscall() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](4)
    direct = DirectWrite()
    finished: list[str] = []
    with trio.fail_after(scaled(5)), nonblocking_pipe() as (read_fd, write_fd), send, receive:
        direct.bind(write_fd, send)
        assert not direct.try_write(b"no writer waiting\n")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive.receive)
            await trio.testing.wait_all_tasks_blocked()
            assert direct.try_write(b"first\n", lambda: finished.append("first"))
            assert direct.try_write(b"second\n", lambda: finished.append("second"))
            assert not direct.try_write(b"x" * MAX_DIRECT_BYTES), "large lines go through the writer"
            assert finished == [], "nothing is finished before it is written"
            direct.flush()
            assert finished == ["first", "second"]
            send.send_nowait(b"queued\n")  # handed to the parked writer: it is busy from now on
            assert not direct.try_write(b"would overtake\n")
        assert os.read(read_fd, 100) == b"first\nsecond\n"
        assert (direct.written, direct.writes) == (2, 1)


async def test_a_batch_larger_than_pipe_buf_into_a_nearly_full_pipe_arrives_whole_and_in_order() -> None:
    send, receive = anyio.create_memory_object_stream[Any](0)
    direct = DirectWrite()
    lines = [b"%05d:" % i + b"y" * 1000 + b"\n" for i in range(40)]  # 40 KB, ten times PIPE_BUF
    with trio.fail_after(scaled(10)), nonblocking_pipe() as (read_fd, write_fd), send, receive:
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1 << 16)
        filler = os.write(write_fd, b"f" * ((1 << 16) - 3 * select.PIPE_BUF))  # room for 3 pages only
        direct.bind(write_fd, send)
        got = bytearray()

        async def host() -> None:
            await trio.testing.wait_all_tasks_blocked()  # a slow reader: the writer has to wait for room
            while len(got) < filler + sum(map(len, lines)) + len(b"after\n"):
                await trio.lowlevel.wait_readable(read_fd)
                got.extend(os.read(read_fd, 1 << 16))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(host_wire_writer, receive, write_fd, direct)
            await trio.testing.wait_all_tasks_blocked()
            for line in lines:
                assert direct.try_write(line)
            direct.flush()  # the pipe takes part of the batch; the parked writer gets the rest
            assert not direct.try_write(b"after\n"), "the writer holds the rest: later lines queue behind it"
            nursery.start_soon(host)
            await send.send(b"after\n")
            send.close()
    assert bytes(got[filler:]) == b"".join(lines) + b"after\n"
    assert direct.writes == 1


async def test_a_writer_woken_before_the_flush_writes_the_batch_before_what_woke_it() -> None:
    send, receive = anyio.create_memory_object_stream[Any](4)
    direct = DirectWrite()
    with trio.fail_after(scaled(5)), nonblocking_pipe() as (read_fd, write_fd), send, receive:
        direct.bind(write_fd, send)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host_wire_writer, receive, write_fd, direct)
            await trio.testing.wait_all_tasks_blocked()
            assert direct.try_write(b"request\n")
            send.send_nowait(b"cancel of that request\n")  # e.g. a courtesy cancel queued mid-chunk
            direct.flush()  # the writer is no longer parked: it takes the batch itself
            await trio.testing.wait_all_tasks_blocked()
            send.close()
        assert read_available(read_fd) == b"request\ncancel of that request\n"
        assert direct.writes == 0


async def test_a_batch_left_when_the_stream_closes_is_still_written() -> None:
    send, receive = anyio.create_memory_object_stream[Any](0)
    direct = DirectWrite()
    with trio.fail_after(scaled(5)), nonblocking_pipe() as (read_fd, write_fd), receive:
        direct.bind(write_fd, send)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host_wire_writer, receive, write_fd, direct)
            await trio.testing.wait_all_tasks_blocked()
            assert direct.try_write(b"last answer\n")
            send.close()  # the writer ends before any pump flushed
        assert read_available(read_fd) == b"last answer\n"


async def test_a_line_that_is_not_a_pipe_is_never_written_directly(tmp_path: Path) -> None:
    send, receive = anyio.create_memory_object_stream[bytes](0)
    direct = DirectWrite()
    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    try:
        with trio.fail_after(scaled(5)), send, receive:
            direct.bind(fd, send)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(receive.receive)
                await trio.testing.wait_all_tasks_blocked()
                assert not direct.try_write(b"a file may take part of a line\n")
                send.send_nowait(b"end\n")
    finally:
        os.close(fd)


async def test_a_pipe_reader_parks_first_and_reads_each_chunk_with_one_read() -> None:
    read_fd, write_fd = os.pipe()
    stream = trio.lowlevel.FdStream(read_fd)
    reader = PipeReader(stream, 1 << 16)
    try:
        with trio.fail_after(scaled(5)):
            os.write(write_fd, b"ready\n")
            assert bytes(await reader.receive()) == b"ready\n"
            async with trio.open_nursery() as nursery:

                async def late_writer() -> None:
                    await trio.testing.wait_all_tasks_blocked()
                    os.write(write_fd, b"later\n")

                nursery.start_soon(late_writer)
                assert bytes(await reader.receive()) == b"later\n"
            os.close(write_fd)
            write_fd = -1
            assert bytes(await reader.receive()) == b"", "EOF"
    finally:
        if write_fd >= 0:
            os.close(write_fd)
        await stream.aclose()


async def test_a_pipe_reader_is_a_checkpoint_even_when_data_is_waiting() -> None:
    read_fd, write_fd = os.pipe()
    stream = trio.lowlevel.FdStream(read_fd)
    reader = PipeReader(stream, 1 << 16)
    try:
        os.write(write_fd, b"waiting\n")
        with trio.fail_after(scaled(5)), trio.CancelScope() as scope:
            scope.cancel()
            await reader.receive()  # a pump that never parks would starve every other task
        assert scope.cancelled_caught
    finally:
        os.close(write_fd)
        await stream.aclose()
