"""``QuickLock`` and ``QuickLimiter``: a trio lock, and a capacity limiter, that cost no scheduler pass when free.

``async with trio.Lock()`` checkpoints even when nobody holds the lock, and
under trio a checkpoint is a pass of the scheduler: an ``epoll_wait``, the
deadlines, every runnable task. An HTTP answer took two such locks (its
response's, its connection's writes'), so two of the five passes a spliced
call cost (``strace -c``: five ``epoll_wait`` per call) were locks nobody
else wanted.

The HTTP upstream client's limit on open connections (``trio.CapacityLimiter``)
did the same for every POST.

Concurrency: a free lock (a free token) is taken at once (no checkpoint: the
holder's next await is its first); a held one is waited for as trio waits
(first come, first served: a released ``QuickLock`` is handed straight to its
first waiter, so ``locked()`` stays true while anyone waits, and
``CapacityLimiter.acquire_nowait`` refuses while anyone waits, so nobody jumps
the queue). Release never blocks. A waiter cancelled while it waits leaves the
queue (trio's parking lot).
"""

from __future__ import annotations

from types import TracebackType

import trio


class QuickLock:
    """``async with lock:`` like ``trio.Lock``, without the checkpoint of an uncontended acquire.

    Its waiters' parking lot is made on first contention: most locks (one per
    HTTP answer) are never contended, and a ``trio.Lock`` costs its making.
    """

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: trio.lowlevel.ParkingLot | None = None

    def locked(self) -> bool:
        return self._held

    async def __aenter__(self) -> None:
        if not self._held:
            self._held = True
            return
        if self._waiters is None:
            self._waiters = trio.lowlevel.ParkingLot()
        await self._waiters.park()  # woken holding it: a release hands it over, ``_held`` stays true

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._waiters is None or not self._waiters.unpark(count=1):
            self._held = False


class QuickLimiter:
    """``async with limiter:`` like ``trio.CapacityLimiter(total)``, without the checkpoint of a free token."""

    __slots__ = ("_limiter",)

    def __init__(self, total: int) -> None:
        self._limiter = trio.CapacityLimiter(total)

    async def __aenter__(self) -> None:
        try:
            self._limiter.acquire_nowait()
        except trio.WouldBlock:
            await self._limiter.acquire()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._limiter.release()
