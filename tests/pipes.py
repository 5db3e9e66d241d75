"""Pipes for the framing tests (``test_direct_write``, ``test_large_copies``): both ends, a drain, a writer task."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import trio
from anyio.streams.memory import MemoryObjectReceiveStream

from supervisor.wire.pipes import DirectWrite
from supervisor.wire.stdio import _pump_stream_to_wire


@contextmanager
def nonblocking_pipe(size: int | None = None) -> Iterator[tuple[int, int]]:
    """``(read_fd, write_fd)``, both non-blocking; ``size``: the pipe's capacity (``F_SETPIPE_SZ``)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    os.set_blocking(read_fd, False)
    if size is not None:
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, size)
    try:
        yield read_fd, write_fd
    finally:
        os.close(read_fd)
        os.close(write_fd)


def read_available(fd: int) -> bytes:
    """Everything the non-blocking pipe ``fd`` holds now."""
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return b"".join(chunks)
        chunks.append(chunk)


async def host_wire_writer(source: MemoryObjectReceiveStream[Any], fd: int, direct: DirectWrite) -> None:
    """The host wire's writer task, writing to the pipe ``fd``."""
    wire = trio.lowlevel.FdStream(os.dup(fd))
    try:
        await _pump_stream_to_wire(source, wire, trio.Event(), direct)
    finally:
        await wire.aclose()
