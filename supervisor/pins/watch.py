"""Picking up an approval without a restart: poll each server's pin signature, judge again on a change (issue 27).

``pins approve`` and ``pins reset`` run in another process (or, with the fleet
store, on another machine) and write the store. ``serve_pin_changes`` polls each
guard's ``PinStore.signature`` (a ``stat``; a Redis read) every
``PIN_POLL_SEC`` and, when it moved since the guard last judged (or the guard
asked to judge once more after its own write), asks that server's actor to
judge its last listing again (``catalog.mailbox.Rejudge``: no fetch). Withheld
tools then appear, and the Front's change notices tell the hosts.

Concurrency: one task in the Supervisor's nursery; it only reads guards and
posts messages (``post`` never blocks). A store that cannot be read now is
skipped until the next poll; the sync that meets it reports it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Final

import trio

from supervisor.pins.guard import PinGuard

logger = logging.getLogger(__name__)

PIN_POLL_SEC: Final = 1.0
"""How soon an approval written elsewhere is picked up (a ``stat`` per pinned server per poll)."""


async def serve_pin_changes(
    guards: Callable[[], Iterable[tuple[PinGuard, Callable[[], None]]]], *, poll_sec: float = PIN_POLL_SEC
) -> None:
    """Until cancelled: for each ``(guard, rejudge)``, call ``rejudge()`` when the guard's pins changed."""
    while True:
        await trio.sleep(poll_sec)
        for guard, rejudge in list(guards()):
            if not guard.active or guard.judgement is None:
                continue  # never judged yet: its first sync will read the store anyway
            try:
                signature = await guard.store.signature(guard.server)
            except OSError as exc:
                logger.debug("server=%s pin store not readable now: %s", guard.server, exc)
                continue
            if guard.stale or signature != guard.signature:
                guard.stale = False  # one rejudge per change; the rejudge sets the signature it judged
                rejudge()
