"""Pipes under the stdio pumps: writes that skip the writer task while it is idle, reads that linger and split.

``DirectWrite`` lets a task that is not the writer put lines straight on a
pipe while the writer task is parked with nothing queued, which saves the two
task switches of handing each over (the wire splice's answers and requests);
the lines a pump produces from one chunk it reads are written in one syscall,
and a large line goes out as its pieces in one ``writev``, never joined.

``PipeReader`` is the pumps' read: it parks first and reads once the pipe is
readable, one scheduler pass per chunk, into one reused buffer. Under load a
pump asks it to linger a moment before reading instead, so that one wake-up
takes several of its peer's writes. While large messages flow, it reads all
but the last byte the pipe holds into a ``bytes`` of its own (``SplitRead``),
so that a 1 MB line is that object, with no copy out of the reused buffer
(``frames.LineBuffer`` takes it as it is).

Nothing here awaits except ``PipeReader.receive`` and ``DirectWrite``'s owner's
writer, so under trio each other call is atomic; a reader belongs to the one
task that reads its pipe.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import mmap
import os
import select
import stat
import termios
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio
import trio

from supervisor.compat.anyio import receiver_waiting
from supervisor.wire.heap import large_buffers_warm

logger = logging.getLogger(__name__)

PIPE_BYTES: Final = 1 << 20
"""Capacity ``widen_pipe`` asks for (Linux ``F_SETPIPE_SZ``; the default 64 KiB splits a 1 MB message in 16)."""
MAX_DIRECT_BYTES: Final = 64 * 1024
"""Lines from this size on are not batched by ``try_write`` (the wire splice writes them with ``write_pieces``)."""
CUT_FROM_COPY_BYTES: Final = 64 * 1024
"""A whole-lines read from this size on is copied without its final newline (``LineBuffer``)."""


class DirectWrite:
    """Collect framed lines for a pipe while its writer task is idle, and write them in one syscall.

    ``bind`` names the pipe's fd and the memory stream its writer task drains.
    ``try_write`` accepts a line (True) only while that task is parked in
    ``receive`` (so nothing is queued and nothing is being written) and only a
    line shorter than ``MAX_DIRECT_BYTES``; otherwise it returns False and the
    caller queues the line as usual, behind whatever the writer holds.

    Accepted lines wait in a batch that precedes everything queued after them:
    ``flush`` (the pump's hook at the end of each chunk, and before it awaits)
    writes the batch with one ``os.write`` while the writer is still parked and
    hands what the pipe did not take to the writer, which is parked on an empty
    queue, so the hand-over cannot fail and nothing can be written in between.
    If the writer was woken meanwhile (something was queued behind the batch),
    ``take`` gives it the batch to write first; it also takes what is left when
    its stream closes. So a line is never torn, reordered or lost, and the
    ``then`` callbacks of ``try_write`` run once their line is written or
    handed over, in order.
    """

    def __init__(self) -> None:
        self._fd: int | None = None
        self._stream: Any = None
        self._batch: list[bytes] = []
        self._then: list[Callable[[], None]] = []
        self.written = 0
        """Lines accepted and flushed by ``flush`` (tests read it)."""
        self.writes = 0
        """``os.write`` calls made by ``flush`` (tests read it)."""

    def bind(self, fd: int, stream: Any) -> None:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):  # a file or a socket may take part of a line
            self._fd, self._stream = fd, stream

    def unbind(self) -> None:
        """Write nothing more directly; a batch still held is left for the writer's ``take``."""
        self._fd = self._stream = None

    @property
    def pending(self) -> bool:
        return bool(self._batch)

    def try_write(self, line: bytes, then: Callable[[], None] | None = None) -> bool:
        """Accept ``line`` into the batch (True), or refuse it (False: queue it instead)."""
        if self._fd is None or len(line) >= MAX_DIRECT_BYTES:
            return False
        if not receiver_waiting(self._stream):
            return False  # the writer is busy or was handed something: queue behind it
        self._batch.append(line)
        if then is not None:
            self._then.append(then)
        return True

    def flush(self) -> None:
        """Write the batch now if the writer is still parked; else leave it for the writer's ``take``."""
        if not self._batch or self._fd is None or not receiver_waiting(self._stream):
            return
        data = self._batch[0] if len(self._batch) == 1 else b"".join(self._batch)
        fd = self._fd
        written = self._write_now(lambda: os.write(fd, data))
        if written < len(data):
            self._hand_to_writer(data[written:])
        self.written += len(self._batch)
        self._done()

    def write_pieces(self, pieces: Sequence[bytes | memoryview]) -> bool:
        """Write one framed line given as ``pieces`` now, in one ``writev``, if the writer is parked (True).

        A large line (``wire_large``: its big member a view of the line read) is
        then never joined into one more copy, nor handed to the writer task. The
        batch goes first (``flush``); what the pipe does not take is joined and
        handed to the writer, still parked on an empty queue, as ``flush`` does.
        False (nothing written): not bound, or the writer is busy (``flush`` may
        just have handed it the batch's rest): queue the joined line behind it.
        """
        self.flush()
        if self._fd is None or not receiver_waiting(self._stream):
            return False
        fd = self._fd
        written = self._write_now(lambda: os.writev(fd, pieces))
        rest: list[bytes | memoryview] = []
        for piece in pieces:
            if written >= len(piece):
                written -= len(piece)
            else:
                rest.append(piece[written:] if written else piece)
                written = 0
        if rest:
            self._hand_to_writer(b"".join(rest))
        self.written += 1
        return True

    def _write_now(self, write: Callable[[], int]) -> int:
        """One write to the pipe: the bytes it took (0 if full or broken: the writer writes them, or reports)."""
        try:
            written = write()
        except OSError:  # full (EAGAIN) or broken: the writer writes it, or meets the error and reports it
            return 0
        self.writes += 1
        return written

    def _hand_to_writer(self, rest: bytes) -> None:
        """What the pipe did not take, to the writer parked on an empty queue: it takes it at once, first."""
        try:
            self._stream.send_nowait(rest)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            # Only when the writer is being cancelled or the wire closed: it would never write it.
            logger.debug("%d bytes for a closing pipe dropped", len(rest))

    def take(self) -> bytes:
        """The batch, for the writer task to write before anything it was handed (``b""`` if none)."""
        if not self._batch:
            return b""
        data = b"".join(self._batch)
        self._done()
        return data

    def _done(self) -> None:
        self._batch.clear()
        then, self._then = self._then, []
        for callback in then:
            callback()


@dataclass(frozen=True, slots=True)
class SplitRead:
    """One read taken in two (``PipeReader``, large messages): ``head``, then ``tail``, in the stream's order.

    ``head`` is a ``bytes`` of its own, read straight from the pipe; ``tail`` (the
    last byte the pipe held when asked, and whatever arrived since) is a view of
    the reader's reused buffer, valid until its next read. When ``tail`` starts
    with a newline, ``head``'s last line ends there and ``LineBuffer`` hands
    ``head``'s bytes out as that line without copying them.
    """

    head: bytes
    tail: memoryview

    def __len__(self) -> int:
        return len(self.head) + len(self.tail)

    def __bytes__(self) -> bytes:
        return self.head + bytes(self.tail)


Chunk = bytes | bytearray | memoryview | SplitRead
"""What a pump reads and feeds to its ``LineBuffer``."""


def _bytes_held(fd: int) -> int:
    """How many bytes the pipe ``fd`` holds now (``FIONREAD``); 0 if the ioctl fails."""
    try:
        return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")
    except OSError:
        return 0


class PipeReader:
    """A pump's reads from one pipe: one scheduler pass per chunk, and no allocation per read.

    ``FdStream.receive_some`` yields once at its start, then reads, and parks only
    after a read found nothing: a pump that calls it right after handling a chunk
    pays a scheduler pass, a failed ``read`` and the park's pass per chunk, and
    every ``read`` allocates a ``max_bytes`` buffer (1 MiB here: an ``mmap``, a
    ``mremap`` and a ``munmap`` per read once glibc serves it from fresh pages).
    A pump has just yielded by parking, so ``receive`` parks first
    (``wait_readable``, which is also its checkpoint), then reads into one
    anonymous mapping reused for every read (pages are only touched by the bytes
    read). Any other stream: its own ``receive_some``.

    A descriptor epoll refuses (a regular file or ``/dev/null`` as stdin, as in
    ``mcp-supervisor run < requests.jsonl``) is never parked on: its reads never
    block, so ``receive`` reads at once after a checkpoint, and the end of the
    file is the end of the stream, as the SDK's own stdio servers read it.

    A large message would be copied once more out of that buffer (into the line
    ``LineBuffer`` cuts). So after a read of ``CUT_FROM_COPY_BYTES`` or more, the
    next read first asks the pipe how much it holds, and if that is large too,
    reads all of it but the last byte into a ``bytes`` of its own and the rest
    into the buffer (``SplitRead``): a 1 MB line arrives as that ``bytes``, which
    ``LineBuffer`` returns as the line (its newline is the last byte). Measured
    (a 1 MiB pipe, 1 MB lines, write + read + line): 252 -> 176 us. Small
    traffic never asks (one ``ioctl`` per read would cost it ~0.5 us). Only in
    a process whose heap keeps 1 MB buffers warm (``_malloc.large_buffers_warm``:
    the sidecar); elsewhere each head would be fresh pages.
    """

    def __init__(self, stream: trio.abc.ReceiveStream, max_bytes: int) -> None:
        self._stream = stream
        self._max_bytes = max_bytes
        self._buffer: mmap.mmap | None = None
        self._lingered_in_vain = False
        """The last lingering read found nothing: the next read parks at once (a quiet peer costs no more wake-ups)."""
        self._large = False
        """The last read was large: the next one asks how much the pipe holds first (it may be split)."""
        self._pollable = True
        """Whether epoll takes the descriptor (False: a file or ``/dev/null``, read without parking)."""
        if isinstance(stream, trio.lowlevel.FdStream):
            self._buffer = mmap.mmap(-1, max_bytes)
            self._view = memoryview(self._buffer)
            self._pollable = pollable(stream.fileno())

    async def receive(self, linger_sec: float = 0.0) -> Chunk:
        """The next chunk (empty at EOF): a view into the reused buffer (or a ``SplitRead``), valid until the next call.

        Args:
            linger_sec: If above 0, sleep this long first (the checkpoint), then
                take whatever arrived meanwhile without parking; park only if
                nothing did. A pump whose peer writes one message at a time
                takes several of them in one wake-up this way (the pumps ask for
                it only under load: ``calls.splice.LINGER_FROM_CALLS``). After a
                linger that found nothing the next read parks at once, so a
                peer that is slow to write costs at most every other read a
                wasted wait.

        Raises:
            trio.ClosedResourceError: The stream was closed (by us).
            trio.BrokenResourceError: The read failed.
        """
        if self._buffer is None:
            return await self._stream.receive_some(self._max_bytes)
        fd = self._fileno()
        if not self._pollable:
            await trio.lowlevel.checkpoint()
            return self._read_file(self._fileno())
        if linger_sec > 0 and not self._lingered_in_vain:
            await trio.sleep(linger_sec)
            fd = self._fileno()
            chunk = self._read_nowait(fd)
            self._lingered_in_vain = chunk is None
            if chunk is not None:
                return chunk
        else:
            self._lingered_in_vain = False
        while True:
            await trio.lowlevel.wait_readable(fd)
            chunk = self._read_nowait(fd)
            if chunk is not None:
                return chunk

    def _fileno(self) -> int:
        assert isinstance(self._stream, trio.lowlevel.FdStream)
        fd = self._stream.fileno()
        if fd < 0:  # closed, maybe while we slept: the number may name another file by now
            raise trio.ClosedResourceError("file was already closed")
        return fd

    def _read_file(self, fd: int) -> memoryview:
        """One read of a descriptor that never blocks (a file, ``/dev/null``): empty at its end."""
        assert self._buffer is not None
        try:
            count = os.readv(fd, (self._buffer,))
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("file was already closed") from None
            raise trio.BrokenResourceError from exc
        return self._view[:count]

    def _read_nowait(self, fd: int) -> memoryview | SplitRead | None:
        """One read (a ``SplitRead`` while large messages flow): the chunk, or None if there was nothing to read."""
        assert self._buffer is not None
        try:
            # Bounded like a plain read: a regular file's FIONREAD is all that is left of it.
            held = min(_bytes_held(fd), self._max_bytes) if self._large and large_buffers_warm() else 0
            if held >= CUT_FROM_COPY_BYTES:
                head = os.read(fd, held - 1)  # held bytes are there: no wait, and one byte is left for the tail
                try:
                    count = os.readv(fd, (self._view[: self._max_bytes - len(head)],))  # a chunk stays in max_bytes
                except BlockingIOError:
                    count = 0  # cannot happen with one reader; the head alone is the chunk all the same
                return SplitRead(head, self._view[:count])
            count = os.readv(fd, (self._buffer,))
        except BlockingIOError:
            return None  # nothing yet (or a spurious report): park
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("file was already closed") from None
            raise trio.BrokenResourceError from exc
        self._large = count >= CUT_FROM_COPY_BYTES
        return self._view[:count]


def pollable(fd: int) -> bool:
    """Whether epoll takes ``fd`` (pipes, sockets, terminals do; regular files and ``/dev/null`` do not)."""
    if not hasattr(select, "epoll"):
        return not stat.S_ISREG(os.fstat(fd).st_mode)
    with select.epoll() as probe:
        try:
            probe.register(fd, select.EPOLLIN)
        except PermissionError:
            return False
    return True


def widen_pipe(pipe: object) -> None:
    """Ask for a ``PIPE_BYTES`` pipe, so a large message crosses in fewer fill-and-drain rounds."""
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setpipe is None or not isinstance(pipe, trio.lowlevel.FdStream):
        return
    with contextlib.suppress(OSError):  # above /proc/sys/fs/pipe-max-size for an unprivileged user: keep 64 KiB
        fcntl.fcntl(pipe.fileno(), setpipe, PIPE_BYTES)
