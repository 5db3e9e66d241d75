"""Catalog changes told to the hosts of one view, per kind, coalesced, in both protocol eras (DESIGN §7, I16).

Each Front runs one notifier over its view: it compares the view's own
per-kind counters (``catalog.views.CatalogView.versions``), so a change the
view cannot see (another server's, a hidden tool's) reaches none of its
hosts, and an edit of the view's rules (a reload) reaches all of them.

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
from typing import Final

import trio
from mcp.server.subscriptions import InMemorySubscriptionBus, PromptsListChanged, ResourcesListChanged, ToolsListChanged

from supervisor.catalog.registry import Kind
from supervisor.catalog.views import CatalogView
from supervisor.catalog.wire_form import ToolsListWireCache
from supervisor.host.relay import LegacyHosts
from supervisor.root import ChangeSignal

logger = logging.getLogger(__name__)

NOTICE_COALESCE_SEC: Final = 0.01
"""Registry changes within this window reach the host as one notice per kind."""


class ChangeNotices:
    """Announces one view's catalog changes to the hosts of the Front serving it."""

    def __init__(
        self,
        view: CatalogView,
        changed: ChangeSignal,
        bus: InMemorySubscriptionBus,
        legacy: LegacyHosts,
        tools_list_cache: ToolsListWireCache,
    ) -> None:
        self._view = view
        self._changed = changed
        self._bus = bus
        self._legacy = legacy
        self._tools_list_cache = tools_list_cache

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
            changed = {kind for kind in now if now[kind] != seen[kind]}
            seen = now
            await self._announce(changed)

    async def _announce(self, kinds: set[Kind]) -> None:
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
