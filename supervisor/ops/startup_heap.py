"""The cyclic collector across a cold start: no full collection until the first attempts end (issue 11).

``serve`` freezes the heap it starts with (``gc.freeze``), so the SDK and
pydantic's schemas are never rescanned. What a cold start then allocates is
nearly all long-lived too: every server's tool definitions, its client, its
session and its tasks. CPython (3.11) runs a full collection whenever the
objects promoted since the last one exceed a quarter of those that survived
it; right after a freeze that is almost at once, and then again at every
quarter of growth. On p3's lite fleet (50 servers x 100 tools) two full
collections ran before the fleet was ready, ~50 ms of the sidecar's CPU
(~1 ms per server connected), and found nothing to collect; a third, ~60 ms,
landed on the host's first lists.

So while the first attempts run, only full collections wait: the young
generations are collected as usual, so short-lived cycles still go. When
every first attempt has ended (connected or failed), the young generations
are collected once more, what survived is frozen like the start-up heap, and
the usual thresholds come back: the next full collection scans only what the
running sidecar allocates from then on. The price is that a cycle that became
garbage only after its promotion, during the start-up window, is never freed;
the fleet's runs found none.

The wait is bounded by the longest ``startup_timeout_sec`` (plus a margin): a
start-up that outlasts it gets the usual thresholds back without a freeze.

Concurrency: ``defer_full_collections`` is a synchronous context manager
around the whole run (it restores the thresholds on every exit, cancellation
included); ``settle_after`` is a task in ``serve``'s root nursery that ends
after one wait, bounded as above. Nothing here awaits while holding state.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Final

import trio

logger = logging.getLogger(__name__)

NO_FULL_COLLECTIONS: Final = 2**31 - 1
"""A third threshold no count of young collections reaches."""
SETTLE_MARGIN_SEC: Final = 5.0
"""Slack on top of the longest first attempt's bound before the thresholds come back anyway."""


class HeapSettler:
    """Holds the usual collector thresholds while full collections wait."""

    def __init__(self) -> None:
        self._usual: tuple[int, int, int] | None = None

    @property
    def deferring(self) -> bool:
        """Whether full collections are being held back now."""
        return self._usual is not None

    def defer(self) -> None:
        """Hold back full collections; the young generations keep their thresholds."""
        if self._usual is None:
            self._usual = gc.get_threshold()
            gc.set_threshold(self._usual[0], self._usual[1], NO_FULL_COLLECTIONS)

    def settle(self, *, freeze: bool) -> None:
        """Give the thresholds back; with ``freeze``, first collect the young generations and freeze the rest."""
        if self._usual is None:
            return
        if freeze:
            gc.collect(1)  # the young generations only: a few thousand objects at most
            gc.freeze()
        gc.set_threshold(*self._usual)
        self._usual = None

    async def settle_after(self, wait: Callable[[], Awaitable[None]], bound_sec: float) -> None:
        """Settle once ``wait`` returns; give the thresholds back unfrozen if it has not within ``bound_sec``."""
        with trio.move_on_after(bound_sec + SETTLE_MARGIN_SEC) as bound:
            await wait()
        if bound.cancelled_caught:
            logger.debug("first attempts outlasted %gs: full collections resume without a freeze", bound_sec)
        self.settle(freeze=not bound.cancelled_caught)


@contextmanager
def defer_full_collections() -> Iterator[HeapSettler]:
    """Hold back full collections until the yielded settler settles, or the block exits."""
    settler = HeapSettler()
    settler.defer()
    try:
        yield settler
    finally:
        settler.settle(freeze=False)
