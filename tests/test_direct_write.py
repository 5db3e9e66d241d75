"""``_frames.DirectWrite``: a short line goes straight to the pipe only while its writer task is parked."""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import trio
import trio.testing

from supervisor._frames import DirectWrite


@contextmanager
def _pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        yield read_fd, write_fd
    finally:
        os.close(read_fd)
        os.close(write_fd)


async def test_a_line_is_written_directly_only_while_the_writer_is_parked_on_an_empty_queue() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](4)
    direct = DirectWrite()
    with trio.fail_after(5), _pipe() as (read_fd, write_fd), send, receive:
        direct.bind(write_fd, send)
        assert not direct.try_write(b"no writer waiting\n")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive.receive)
            await trio.testing.wait_all_tasks_blocked()
            assert direct.try_write(b"first\n")
            assert not direct.try_write(b"x" * (select.PIPE_BUF + 1)), "longer than PIPE_BUF: not atomic"
            send.send_nowait(b"queued\n")  # handed to the parked writer: it is busy from now on
            assert not direct.try_write(b"would overtake\n")
        assert os.read(read_fd, 100) == b"first\n"
        assert direct.written == 1


async def test_a_line_that_is_not_a_pipe_is_never_written_directly(tmp_path: Path) -> None:
    send, receive = anyio.create_memory_object_stream[bytes](0)
    direct = DirectWrite()
    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    try:
        with trio.fail_after(5), send, receive:
            direct.bind(fd, send)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(receive.receive)
                await trio.testing.wait_all_tasks_blocked()
                assert not direct.try_write(b"a file may take part of a line\n")
                send.send_nowait(b"end\n")
    finally:
        os.close(fd)
