"""Catalog changes told to the hosts of one view, per kind, coalesced, in both protocol eras (DESIGN §7, I16, I22).

Each Front runs one notifier over its view: it compares the view's own
per-kind counters (``catalog.views.CatalogView.versions``), so a change the
view cannot see (another server's, a hidden tool's) reaches none of its
hosts, and an edit of the view's rules (a reload) reaches all of them.

A moved counter is a reason to look, not to tell (I22: notices mean change).
``ReceivedListings`` keeps, per kind, what the view's hosts were answered since
they were last told of a change, and what the view listed when they were told;
a notice goes out only when what a list would answer now differs from one of
those. So a start whose first list waited for the servers and got them all, a
reconnect or a re-judged pin that swaps in the same catalog, a search view whose
hidden tools moved, or a catalog from disk that the live one confirms, tells
nobody anything.

2026-era hosts hold ``subscriptions/listen`` streams served by the SDK's
``ListenHandler`` over the relay's in-memory bus; handshake-era hosts get
``notifications/*/list_changed`` on their connection (the relay's ``legacy``
set, captured when each finished its handshake).

Concurrency: ``ChangeNotices.serve`` is one task in the Front's nursery, the
only reader of the Registry's versions for notices. It waits on the
Supervisor's level-triggered ``catalog_changed`` signal, so no change is missed
while it is announcing the previous one; sends to a closed connection are best
effort (the SDK does not raise).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import trio
from mcp.server.subscriptions import InMemorySubscriptionBus, PromptsListChanged, ResourcesListChanged, ToolsListChanged

from supervisor.catalog.disk import answer_digest
from supervisor.catalog.registry import Kind, Registered
from supervisor.catalog.views import CatalogView
from supervisor.catalog.wire_form import ToolsListWireCache
from supervisor.host.relay import LegacyHosts
from supervisor.root import ChangeSignal

logger = logging.getLogger(__name__)

NOTICE_COALESCE_SEC: Final = 0.01
"""Registry changes within this window reach the host as one notice per kind."""


Listing = list[Registered[Any]]
"""What one list answer showed: the view's entries of a kind as they were (entries live for one generation)."""
Encode = Callable[[Kind, str], "str | None"]
"""The view's first-page answer of a kind in a protocol version, as JSON text (None: none can be made now)."""


@dataclass(frozen=True, slots=True)
class EncodedAnswer:
    """A list answer known only by its text's digest: one the prelude gave from disk (``host.stdio.prelude``)."""

    version: str
    digest: str


class ReceivedListings:
    """What one view's hosts know of each kind's listing: the answers since their last notice, and that notice (I22).

    ``answered`` is called where each list answer is made (the Front's list
    handlers, the tools-list wire cache, the stdio splice), in the same
    synchronous step, so the listing recorded is the one sent. ``told`` records
    the listing a notice told the hosts of. A kind is ``stale`` when the view's
    listing now differs from what some host was answered since, or from what the
    last notice told of. Listings are compared by value: the same entries are
    the same objects, so an unchanged listing compares in one pass of identity
    checks. Synchronous; atomic under trio.
    """

    def __init__(
        self, view: CatalogView, encode: Encode | None = None, starting: Callable[[], bool] = lambda: False
    ) -> None:
        """``encode``: the view's answers as text (to compare with the prelude's); ``starting``: whether a server
        of the view is still on its first attempt (the view's catalog is not all in yet)."""
        self._view = view
        self._encode = encode
        self._starting = starting
        self._answered: dict[Kind, list[Listing | EncodedAnswer]] = {}
        self._told: dict[Kind, Listing] = {}
        self.deferred: set[Kind] = set()
        """Kinds whose answer from disk cannot be compared yet: the view's catalog is still coming in."""

    def answered(self, kind: Kind) -> None:
        """A host was just answered the view's list of ``kind`` as it is now."""
        listing = self._view.listed(kind)
        held = self._answered.setdefault(kind, [])
        if not any(known is listing for known in held):
            held.append(listing)

    def answered_from_disk(self, kind: Kind, answer: EncodedAnswer) -> None:
        """A host was answered a list of ``kind`` this process never made: the prelude's, from the view's snapshot."""
        self._answered.setdefault(kind, []).append(answer)

    def stale(self, kind: Kind) -> bool:
        """Whether the view's listing of ``kind`` differs from what its hosts were answered or last told of.

        An answer from disk is compared only once the view's servers are all in: a catalog half swapped in
        differs from it for no reason but the start. Till then its kind is ``deferred``.
        """
        now = self._view.listed(kind)
        told = self._told.get(kind)
        if told is not None and told != now:
            return True
        held = self._answered.get(kind, ())
        if any(isinstance(answer, EncodedAnswer) for answer in held) and self._starting():
            self.deferred.add(kind)
            return any(answer != now for answer in held if not isinstance(answer, EncodedAnswer))
        return any(self._differs(kind, answer, now) for answer in held)

    def take_deferred(self) -> set[Kind]:
        """The deferred kinds, to look at again now that the view's servers are all in."""
        kinds, self.deferred = self.deferred, set()
        return kinds

    def _differs(self, kind: Kind, held: Listing | EncodedAnswer, now: Listing) -> bool:
        if not isinstance(held, EncodedAnswer):
            return held != now
        text = self._encode(kind, held.version) if self._encode is not None else None
        return text is None or answer_digest(text) != held.digest

    def told(self, kinds: set[Kind]) -> None:
        """The hosts were told ``kinds`` changed: that, as the view lists it now, is what they know."""
        for kind in kinds:
            self._answered.pop(kind, None)
            self._told[kind] = self._view.listed(kind)


class ChangeNotices:
    """Announces one view's catalog changes to the hosts of the Front serving it."""

    def __init__(
        self,
        view: CatalogView,
        changed: ChangeSignal,
        bus: InMemorySubscriptionBus,
        legacy: LegacyHosts,
        *,
        tools_list_cache: ToolsListWireCache,
        received: ReceivedListings,
        after_change: Callable[[], None] = lambda: None,
        started: Callable[[], Awaitable[None]] = trio.lowlevel.checkpoint,
    ) -> None:
        """``started``: returns once the view's servers have all finished their first attempt."""
        self._view = view
        self._changed = changed
        self._bus = bus
        self._legacy = legacy
        self._tools_list_cache = tools_list_cache
        self._received = received
        self._after_change = after_change
        self._started = started

    async def serve(self) -> None:
        """Tell the view's hosts about its changes, per kind, coalesced, until cancelled."""
        view = self._view
        seen = view.versions
        while True:
            while view.versions == seen and not self._received.deferred:
                await self._changed.wait()
            if view.versions == seen:
                await self._change_or_start_done()
            # New tools get their wire forms now, while servers are still starting, not in the
            # first answer (``catalog.wire_form``): that one is on the host's critical path.
            self._tools_list_cache.warm()
            await trio.sleep(NOTICE_COALESCE_SEC)
            now = view.versions
            moved = {kind for kind in now if now[kind] != seen[kind]} | self._received.take_deferred()
            seen = now
            changed = {kind for kind in moved if self._received.stale(kind)}
            self._after_change()
            if changed:
                self._received.told(_told_with(changed))
                await self._announce(changed)

    async def _change_or_start_done(self) -> None:
        """Wait for the next change, or for the start to end (answers from disk wait to be compared then)."""
        async with trio.open_nursery() as waits:

            async def then_stop(wait: Callable[[], Awaitable[None]]) -> None:
                await wait()
                waits.cancel_scope.cancel()

            waits.start_soon(then_stop, self._changed.wait)
            waits.start_soon(then_stop, self._started)

    async def _announce(self, kinds: set[Kind]) -> None:
        """Tell the view's hosts that ``kinds`` changed (resources and templates share one notice)."""
        logger.debug("catalog changed (%s); notifying the hosts of view %r", ", ".join(sorted(kinds)), self._view.name)
        bus = self._bus
        legacy = self._legacy.of_view(self._view)  # a snapshot: connections may close while we await
        if "tools" in kinds:
            await bus.publish(ToolsListChanged())
            for connection in legacy:
                await connection.send_tool_list_changed()  # best effort: the SDK never raises here
        if "prompts" in kinds:
            await bus.publish(PromptsListChanged())
            for connection in legacy:
                await connection.send_prompt_list_changed()
        if kinds & {"resources", "templates"}:
            await bus.publish(ResourcesListChanged())
            for connection in legacy:
                await connection.send_resource_list_changed()


def _told_with(kinds: set[Kind]) -> set[Kind]:
    """The kinds a notice for ``kinds`` tells of: resources and templates share ``resources/list_changed``."""
    return kinds | {"resources", "templates"} if kinds & {"resources", "templates"} else kinds
