"""``QuickLock``: a trio lock that costs no scheduler pass when it is free.

``async with trio.Lock()`` checkpoints even when nobody holds the lock, and
under trio a checkpoint is a pass of the scheduler: an ``epoll_wait``, the
deadlines, every runnable task. An HTTP answer took two such locks (its
response's, its connection's writes'), so two of the five passes a spliced
call cost (``strace -c``: five ``epoll_wait`` per call) were locks nobody
else wanted.

Concurrency: a free lock is taken at once (no checkpoint: the holder's next
await is its first); a held one is waited for as ``trio.Lock`` waits (first
come, first served: ``trio.Lock`` hands a released lock straight to its first
waiter, so ``locked()`` stays true while anyone waits and nobody jumps the
queue). Release never blocks.
"""

from __future__ import annotations

from types import TracebackType

import trio


class QuickLock:
    """``async with lock:`` like ``trio.Lock``, without the checkpoint of an uncontended acquire."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = trio.Lock()

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> None:
        if self._lock.locked():
            await self._lock.acquire()
        else:
            self._lock.acquire_nowait()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._lock.release()
