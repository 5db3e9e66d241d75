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
from typing import Any, Final

import trio
from mcp.server.subscriptions import InMemorySubscriptionBus, PromptsListChanged, ResourcesListChanged, ToolsListChanged

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

    def __init__(self, view: CatalogView) -> None:
        self._view = view
        self._answered: dict[Kind, list[Listing]] = {}
        self._told: dict[Kind, Listing] = {}

    def answered(self, kind: Kind) -> None:
        """A host was just answered the view's list of ``kind`` as it is now."""
        listing = self._view.listed(kind)
        held = self._answered.setdefault(kind, [])
        if not any(known is listing for known in held):
            held.append(listing)

    def stale(self, kind: Kind) -> bool:
        """Whether the view's listing of ``kind`` differs from what its hosts were answered or last told of."""
        now = self._view.listed(kind)
        told = self._told.get(kind)
        return (told is not None and told != now) or any(listing != now for listing in self._answered.get(kind, ()))

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
        tools_list_cache: ToolsListWireCache,
        received: ReceivedListings,
    ) -> None:
        self._view = view
        self._changed = changed
        self._bus = bus
        self._legacy = legacy
        self._tools_list_cache = tools_list_cache
        self._received = received

    async def serve(self) -> None:
        """Tell the view's hosts about its changes, per kind, coalesced, until cancelled."""
        view = self._view
        seen = view.versions
        while True:
            while view.versions == seen:
                await self._changed.wait()
            # New tools get their wire forms now, while servers are still starting, not in the
            # first answer (``catalog.wire_form``): that one is on the host's critical path.
            self._tools_list_cache.warm()
            await trio.sleep(NOTICE_COALESCE_SEC)
            now = view.versions
            moved = {kind for kind in now if now[kind] != seen[kind]}
            seen = now
            changed = {kind for kind in moved if self._received.stale(kind)}
            if changed:
                self._received.told(_told_with(changed))
                await self._announce(changed)

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
