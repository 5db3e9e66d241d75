"""Resource forwarding for the Front (DESIGN I9): ``resources/list`` and ``resources/read``.

Resources are not namespaced the way tools are: a resource keeps its URI. The
router lists every ready server's resources concurrently (one slow or failing
server only loses its own entries, I12), remembers which server answered for
each URI, and routes reads there. Every request reaches the upstream with
``cache_mode="bypass"`` (see ``Upstream.list_all_resources``/``read_resource``),
so no catalog lifetime ever serves resource content.

Concurrency: ``list_resources`` owns a short-lived nursery, one task per server;
each task is bounded by that server's ``tool_timeout_sec`` inside the actor.
The URI map is replaced in one synchronous assignment.
"""

from __future__ import annotations

import logging

import mcp_types as types
import trio
from mcp import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from supervisor.errors import UpstreamError
from supervisor.root import Supervisor
from supervisor.server_actor import ServerActor

logger = logging.getLogger(__name__)


class ResourceRouter:
    """Lists resources across servers and routes reads to the server that listed the URI."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        self._owners: dict[str, str] = {}

    async def list_resources(self) -> list[types.Resource]:
        """Every ready server's resources; the first server (by name) to list a URI owns it."""
        listed: dict[str, list[types.Resource]] = {}
        async with trio.open_nursery() as nursery:
            for actor in self._supervisor.actors.values():
                nursery.start_soon(self._collect, actor, listed)
        owners: dict[str, str] = {}
        merged: list[types.Resource] = []
        for server in sorted(listed):
            for resource in listed[server]:
                uri = str(resource.uri)
                if uri in owners:
                    logger.warning(
                        "resource %s is listed by %r and %r; routing to %r", uri, owners[uri], server, owners[uri]
                    )
                    continue
                owners[uri] = server
                merged.append(resource)
        self._owners = owners
        return merged

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read ``uri`` from the server that listed it (re-listing once if it is not known yet).

        Raises:
            MCPError: Unknown URI (-32602), an upstream error (passed through), or the server unavailable (-32603).
        """
        if uri not in self._owners:
            await self.list_resources()
        owner = self._owners.get(uri)
        actor = self._supervisor.actors.get(owner) if owner is not None else None
        if actor is None:
            raise MCPError(INVALID_PARAMS, f"Unknown resource: {uri} (no ready server lists it)")
        try:
            return await actor.read_resource(uri)
        except UpstreamError as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from exc

    @staticmethod
    async def _collect(actor: ServerActor, listed: dict[str, list[types.Resource]]) -> None:
        try:
            listed[actor.name] = await actor.list_resources()
        except (UpstreamError, MCPError) as exc:
            logger.warning("server=%s resources/list failed; its resources are left out: %s", actor.name, exc)
