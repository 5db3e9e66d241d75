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

The pipes these lines travel on (direct writes, lingering and split reads)
are ``wire.pipes``.

Nothing here awaits, so under trio each call is atomic; a ``LineBuffer`` belongs
to the one task that reads its stream.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, Protocol

import anyio

from supervisor.wire.pipes import CUT_FROM_COPY_BYTES, Chunk, SplitRead

if TYPE_CHECKING:  # the prelude reads lines with ``LineBuffer`` before the SDK is imported (``host.stdio.prelude``)
    from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

MAX_BATCH_MESSAGES: Final = 256
"""Bound on one batch, so a flood of small messages still yields to the writer."""


class _NowaitSource(Protocol):
    def receive_nowait(self) -> SessionMessage | bytes: ...


def encode_frame(message: SessionMessage | bytes) -> bytes:
    """One message as one JSON line (``bytes``: a line already framed, by ``host.stdio.reader``)."""
    if isinstance(message, bytes):
        return message
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


def encode_batch(
    first: SessionMessage | bytes, source: _NowaitSource, taken: list[SessionMessage | bytes] | None = None
) -> bytes:
    """``first`` and every message already waiting in ``source`` (up to a bound), framed.

    ``taken``, if given, gets every message framed, in order (the writer settles the answers among them).
    """
    frames = [encode_frame(first)]
    if taken is not None:
        taken.append(first)
    while len(frames) < MAX_BATCH_MESSAGES:
        try:
            message = source.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            break
        frames.append(encode_frame(message))
        if taken is not None:
            taken.append(message)
    return b"".join(frames)


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
