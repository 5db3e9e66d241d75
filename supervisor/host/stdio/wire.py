"""The stdio host wire as the splice writes to it: at once while its writer is idle, else behind what is queued.

``HostWire`` holds the two ways onto the host's stdout that the splice
(``host.stdio.reader``) and the fast calls it hands over (``host.stdio.tasks``)
write by: ``direct``, a write straight onto the pipe when the wire's writer task
has nothing queued (batched per chunk, flushed by whoever filled the batch),
and ``out``, the writer's queue (a clone the wire owns and closes), which keeps
every line behind what was sent before it. A line is never reordered behind
a later one: ``direct`` takes a line only while nothing waits in the queue.

Concurrency: the methods that do not await are atomic under trio. ``write_owed``
writes an answer the host is owed even from a task being cancelled (an upstream
pump, the transport's watcher, at a stop): shielded and bounded by
``ANSWER_WRITE_GRACE_SEC``, and not at all once a host left one answer waiting
that long (``_stuck``), so a stop never hangs on a host that stopped reading.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio
import trio

from supervisor.wire.pipes import DirectWrite

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

    from supervisor.wire import large as wire_large

logger = logging.getLogger(__name__)

ANSWER_WRITE_GRACE_SEC: Final = 5.0
"""How long writing one owed answer may wait for the host wire once its writer is cancelled (shielded)."""


@dataclass(eq=False)
class HostWire:
    """The host wire's two ways in: ``direct`` (the pipe, while the writer is idle) and ``out`` (its queue)."""

    direct: DirectWrite = field(default_factory=DirectWrite)
    """Bound to the host wire by the stdio link (``open_stdio_wire``); upstream pumps ``flush`` it per chunk."""
    out: MemoryObjectSendStream[Any] | None = None
    """The writer's queue (a clone this wire owns and closes); None: not attached, nothing is written."""
    _stuck: bool = False

    def attach(self, out: MemoryObjectSendStream[Any] | None) -> None:
        """The host wire's outgoing queue (a clone owned here and closed here), or None to stop writing."""
        if self.out is not None:
            self.out.close()
        self.out = out

    def try_write(self, line: bytes, written: Callable[[], None] | None = None) -> bool:
        """Batch ``line`` for the pipe if the writer is idle (``written`` once it is on the pipe); False: not done."""
        return self.out is not None and self.direct.try_write(line, written)

    def write_pieces(self, pieces: wire_large.Pieces) -> bool:
        """A large line, written at once if the writer is idle; False: not done (send it whole instead)."""
        return self.out is not None and self.direct.write_pieces(pieces)

    async def send(self, line: bytes) -> None:
        """``line`` on the pipe now if the writer is idle (batched: a pump's flush writes it), else queued."""
        if self.direct.try_write(line):
            return
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            if self.out is not None:
                await self.out.send(line)

    async def write_line(self, line: bytes) -> None:
        """``send`` for a task that is no pump (a fast call's notice or answer): it flushes its own line."""
        if self.out is not None and self.direct.try_write(line):
            self.direct.flush()
            return
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            if self.out is not None:
                await self.out.send(line)

    async def write_owed(self, line: bytes, finished: Callable[[], None], host_id: Any) -> None:
        """Write an answer the host is owed (its request ``host_id``); ``finished`` once it is written or dropped.

        A host that reads slowly slows the upstream's replies that wait here, as on
        the general path; nothing is dropped for being slow.
        """
        if self.out is not None and self.direct.try_write(line, finished):
            return  # batched: written (then finished) by the pump's flush, or first by the woken writer
        try:
            if self.out is not None:
                try:
                    await self.out.send(line)
                except trio.Cancelled:
                    # The answer is owed, even when the task delivering it is being cancelled: shielded and
                    # bounded. A host that already left one answer waiting the whole grace gets none.
                    grace = 0.0 if self._stuck else ANSWER_WRITE_GRACE_SEC
                    with trio.CancelScope(shield=True), trio.move_on_after(grace) as bound:
                        await self.out.send(line)
                    self._stuck = bound.cancelled_caught
                    if bound.cancelled_caught:
                        logger.warning("the host did not take a spliced answer within %gs of a stop; dropped", grace)
                    raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("host wire closed; spliced answer to %r dropped", host_id)
        finally:
            finished()
