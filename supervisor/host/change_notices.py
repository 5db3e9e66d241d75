"""Registry changes told to every host, per kind, coalesced, in both protocol eras (DESIGN §7).

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
from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

from supervisor.catalog.registry import Kind
from supervisor.catalog.wire_form import ToolsListWireCache
from supervisor.host.relay import Relay
from supervisor.root import Supervisor

logger = logging.getLogger(__name__)

NOTICE_COALESCE_SEC: Final = 0.01
"""Registry changes within this window reach the host as one notice per kind."""


class ChangeNotices:
    """Announces the Supervisor's Registry changes to the Front's hosts."""

    def __init__(self, supervisor: Supervisor, relay: Relay, tools_list_cache: ToolsListWireCache) -> None:
        self._supervisor = supervisor
        self._relay = relay
        self._tools_list_cache = tools_list_cache

    async def serve(self) -> None:
        """Tell every host about Registry changes, per kind, coalesced, until cancelled."""
        registry = self._supervisor.registry
        seen = registry.versions
        while True:
            while registry.versions == seen:
                await self._supervisor.catalog_changed.wait()
            # New tools get their wire forms now, while servers are still starting, not in the
            # first answer (``catalog.wire_form``): that one is on the host's critical path.
            self._tools_list_cache.warm()
            await trio.sleep(NOTICE_COALESCE_SEC)
            now = registry.versions
            changed = {kind for kind in now if now[kind] != seen[kind]}
            seen = now
            await self._announce(changed)

    async def _announce(self, kinds: set[Kind]) -> None:
        logger.debug("catalog changed (%s); notifying hosts", ", ".join(sorted(kinds)))
        bus = self._relay.bus
        legacy = self._relay.legacy.connections  # a snapshot: connections may close while we await
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
