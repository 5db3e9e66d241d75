"""Newline-delimited JSON-RPC framing shared by the stdio pumps (host wire, upstream children, test hosts).

``LineBuffer`` is the read side: every reader of a newline-delimited stream
feeds its chunks into one and takes complete lines out. Its work is linear in
the bytes fed however long a line grows, and an optional cap is enforced while
a line grows, not after it is complete (DESIGN I15): a 16 MiB line fed in 64 KiB
chunks is searched once, not 256 times over.

``encode_batch`` turns one message plus everything already queued behind it
into one buffer, so a burst of answers costs one ``write`` instead of one per
message. A ``bytes`` item is a line framed already (the wire splice's). It
never waits: it only takes what ``receive_nowait`` hands over.

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
so that a 1 MB line is that object, with no copy out of the reused buffer.

Nothing here awaits, so under trio each call is atomic; a ``LineBuffer`` belongs
to the one task that reads its stream.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import mmap
import os
import stat
import termios
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import anyio
import trio
from mcp.shared.message import SessionMessage

from supervisor.wire.heap import large_buffers_warm

logger = logging.getLogger(__name__)

PIPE_BYTES: Final = 1 << 20
"""Capacity ``widen_pipe`` asks for (Linux ``F_SETPIPE_SZ``; the default 64 KiB splits a 1 MB message in 16)."""
MAX_BATCH_MESSAGES: Final = 256
"""Bound on one batch, so a flood of small messages still yields to the writer."""
MAX_DIRECT_BYTES: Final = 64 * 1024
"""Lines from this size on are not batched by ``try_write`` (the wire splice writes them with ``write_pieces``)."""
CUT_FROM_COPY_BYTES: Final = 64 * 1024
"""A whole-lines read from this size on is copied without its final newline (``LineBuffer``)."""


class _NowaitSource(Protocol):
    def receive_nowait(self) -> SessionMessage | bytes: ...


def encode_frame(message: SessionMessage | bytes) -> bytes:
    """One message as one JSON line (``bytes``: a line already framed, by ``wire_splice``)."""
    if isinstance(message, bytes):
        return message
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


def encode_batch(first: SessionMessage | bytes, source: _NowaitSource) -> bytes:
    """``first`` and every message already waiting in ``source`` (up to a bound), framed."""
    frames = [encode_frame(first)]
    while len(frames) < MAX_BATCH_MESSAGES:
        try:
            frames.append(encode_frame(source.receive_nowait()))
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            break
    return b"".join(frames)


def _receiver_waiting(stream: Any) -> bool:
    """Whether a task is parked in ``receive`` on the anyio memory stream ``stream`` (its writer is idle).

    ``statistics().tasks_waiting_receive`` says the same but builds a statistics
    object per question, ~0.7 us, asked four times per spliced call; this reads
    the count it is made of (anyio's private ``_state.waiting_receivers``; the
    assumption has its own test in ``tests/test_frames_hot.py``).
    """
    return bool(stream._state.waiting_receivers)


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
        if not _receiver_waiting(self._stream):
            return False  # the writer is busy or was handed something: queue behind it
        self._batch.append(line)
        if then is not None:
            self._then.append(then)
        return True

    def flush(self) -> None:
        """Write the batch now if the writer is still parked; else leave it for the writer's ``take``."""
        if not self._batch or self._fd is None or not _receiver_waiting(self._stream):
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
        if self._fd is None or not _receiver_waiting(self._stream):
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
        if isinstance(stream, trio.lowlevel.FdStream):
            self._buffer = mmap.mmap(-1, max_bytes)
            self._view = memoryview(self._buffer)

    async def receive(self, linger_sec: float = 0.0) -> Chunk:
        """The next chunk (empty at EOF): a view into the reused buffer (or a ``SplitRead``), valid until the next call.

        Args:
            linger_sec: If above 0, sleep this long first (the checkpoint), then
                take whatever arrived meanwhile without parking; park only if
                nothing did. A pump whose peer writes one message at a time
                takes several of them in one wake-up this way (the pumps ask for
                it only under load: ``wire_splice.LINGER_FROM_CALLS``). After a
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


def widen_pipe(pipe: object) -> None:
    """Ask for a ``PIPE_BYTES`` pipe, so a large message crosses in fewer fill-and-drain rounds."""
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setpipe is None or not isinstance(pipe, trio.lowlevel.FdStream):
        return
    with contextlib.suppress(OSError):  # above /proc/sys/fs/pipe-max-size for an unprivileged user: keep 64 KiB
        fcntl.fcntl(pipe.fileno(), setpipe, PIPE_BYTES)


class LineBuffer:
    """Split a byte stream into ``\\n``-terminated lines in time linear in the bytes fed.

    A ``bytearray`` plus two offsets, after h11's ``_receivebuffer.py``: ``feed``
    appends in place (amortised O(chunk)), ``next_line`` searches only bytes it
    has not searched before and copies out only the line it returns, and
    consumed lines are dropped once per ``feed`` (dropping a prefix of a
    ``bytearray`` moves its start, not its bytes). A trailing ``\\r`` is removed
    from each line, so ``\\r\\n`` works too.

    ``max_line_bytes`` (None: no cap) bounds the bytes before a line's ``\\n``
    and is enforced while a line grows: once the unfinished line holds more
    than the cap, ``overlong`` is set, the buffer discards everything it holds
    and every later ``feed``, and ``next_line`` returns None forever. So at
    most the cap plus one chunk is ever held.

    ``scanned_bytes`` counts the bytes every search examined, so a test can
    prove the framing linear without timing it.

    A ``bytes`` chunk fed while nothing is held is kept as it is, and its lines
    are cut straight out of it: a 1 MB line that arrives in one read is copied
    once (into the line), not twice (into the buffer, then out). Only an
    unfinished line left at its end moves into the ``bytearray``.
    A chunk of any other type (a pump's view of its read buffer) that ends a
    line and is fed to an empty buffer is copied into ``bytes`` once and held
    the same way: it leaves nothing behind in the ``bytearray``, and cutting
    lines out of ``bytes`` costs less than out of a ``bytearray`` (0.4 against
    0.9 us per small line). ``copied_bytes`` counts what was appended to the
    ``bytearray``. Such a chunk of ``CUT_FROM_COPY_BYTES`` or more (a large
    message's read) is copied without its final newline, which stays implied:
    when the chunk is one line, that copy is the line itself, so a 1 MB line
    read into the pump's buffer is copied once, not twice (issue 11).
    A ``SplitRead`` whose tail starts with a newline, fed to an empty buffer, is
    held the same way with no copy at all: its head is the bytes without that
    newline (what follows it in the tail is buffered).
    """

    def __init__(self, max_line_bytes: int | None = None) -> None:
        self._data = bytearray()
        self._line_start = 0
        """Where the next line begins in ``_data``; bytes before it are consumed."""
        self._searched_to = 0
        """Bytes of ``_data`` before this offset are known to hold no newline after ``_line_start``."""
        self._max_line_bytes = max_line_bytes
        self._held = b""
        """A chunk fed while nothing was held, kept as is; lines are cut out of it from ``_held_start``."""
        self._held_start = 0
        self._held_ends_line = False
        """The held chunk's final newline was left off its copy: its last line ends at its end."""
        self.overlong = False
        self.scanned_bytes = 0
        self.copied_bytes = 0

    def __len__(self) -> int:
        """Bytes held and not yet returned as a line."""
        held = len(self._held) - self._held_start + self._held_ends_line if self._held else 0
        return len(self._data) - self._line_start + held

    def feed(self, chunk: Chunk) -> None:
        """Append ``chunk``; call ``next_line`` until it returns None before feeding again."""
        if self.overlong:
            return
        if self._line_start:
            del self._data[: self._line_start]
            self._searched_to -= self._line_start
            self._line_start = 0
        if self._held:  # lines were left in it (``next_line`` was not called until None): buffer them
            self._append(memoryview(self._held)[self._held_start :])
            if self._held_ends_line:
                self._append(b"\n")
            self._release_held()
        if isinstance(chunk, SplitRead):
            self._feed_split(chunk)
            return
        if not self._data:
            if type(chunk) is bytes:
                self._held = chunk
                return
            if chunk and chunk[-1] == 0x0A:  # whole lines (a pump's read): one copy, then cut as from bytes
                if len(chunk) < CUT_FROM_COPY_BYTES:
                    self._held = bytes(chunk)
                else:  # the newline stays implied: a chunk that is one line is copied once, into the line
                    with memoryview(chunk) as view:
                        self._held = bytes(view[:-1])
                    self._held_ends_line = True
                return
        self._append(chunk)

    def _feed_split(self, chunk: SplitRead) -> None:
        """``feed`` of a ``SplitRead``: its head held as it is when a newline right after it ends its last line."""
        head, tail = chunk.head, chunk.tail
        if head and len(tail) and tail[0] == 0x0A and not self._data:  # (``feed`` emptied the held chunk)
            self._held, self._held_ends_line = head, True  # the head's last line is the head's own bytes
            if len(tail) > 1:
                self._append(tail[1:])  # after the held lines (``next_line`` takes those first)
            return
        self.feed(head)  # held, or appended; the tail then moves it into the buffer as any later feed does
        if tail:
            self.feed(tail)

    def _release_held(self) -> None:
        self._held, self._held_start, self._held_ends_line = b"", 0, False

    def _append(self, chunk: bytes | bytearray | memoryview) -> None:
        self._data += chunk
        self.copied_bytes += len(chunk)

    def next_line(self) -> bytes | None:
        """The next complete line without its ``\\n`` (or ``\\r\\n``), or None until more is fed."""
        if self.overlong:
            return None
        if self._held:
            return self._next_held_line()
        end = self._data.find(b"\n", self._searched_to)
        self.scanned_bytes += (len(self._data) if end < 0 else end + 1) - self._searched_to
        if end < 0:
            self._searched_to = len(self._data)
            self._check_cap(len(self._data))
            return None
        if self._check_cap(end):
            return None
        stop = end - 1 if end > self._line_start and self._data[end - 1] == 0x0D else end
        with memoryview(self._data) as view:
            line = bytes(view[self._line_start : stop])
        self._line_start = self._searched_to = end + 1
        return line

    def _next_held_line(self) -> bytes | None:
        """``next_line`` from the held chunk; its unfinished tail, searched already, moves into the buffer."""
        held, start = self._held, self._held_start
        end = held.find(b"\n", start)
        last = end < 0 and self._held_ends_line
        if last:
            end = len(held)  # the chunk's own newline, left off the copy
        self.scanned_bytes += (len(held) if end < 0 else end + 1) - start
        if end < 0:
            self._release_held()
            self._append(memoryview(held)[start:])  # the buffer was empty: the tail is all it holds
            self._searched_to = len(self._data)
            self._check_cap(len(self._data))
            return None
        if self._max_line_bytes is not None and end - start > self._max_line_bytes:
            self._release_held()
            self._check_cap(end - start)  # over the cap: gives up on the stream
            return None
        if last:
            self._release_held()  # nothing follows its last line
        else:
            self._held_start = end + 1
        stop = end - 1 if end > start and held[end - 1] == 0x0D else end
        return held[start:stop]  # the whole copy (a one-line chunk) is returned as it is, not copied again

    def _check_cap(self, line_end: int) -> bool:
        """Whether the line from ``_line_start`` to ``line_end`` passes the cap; if so, give up on the stream."""
        if self._max_line_bytes is None or line_end - self._line_start <= self._max_line_bytes:
            return False
        self.overlong = True
        self._data = bytearray()
        self._line_start = self._searched_to = 0
        return True
