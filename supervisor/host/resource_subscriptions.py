"""A host's resource subscriptions: handshake-era ``resources/subscribe`` and 2026-era listen streams (I13, I16).

A subscription is recorded in the Relay's ``Subscriptions`` (who hears which
URI of which server) and applied upstream before the host is answered, so the
answer means "updates flow". A URI routes through the Front's view (``route``),
so a host can only ever subscribe to what its view shows; a URI that routes
nowhere is honored but never fires, as with a direct server.

Concurrency: each handler runs in its host request's task; the bookkeeping is
synchronous.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.subscriptions import ListenHandler

from supervisor.catalog.views import CatalogView
from supervisor.compat.sdk import connection_of
from supervisor.errors import UpstreamError
from supervisor.host.relay import Relay
from supervisor.server_actor import ServerActor

logger = logging.getLogger(__name__)


class ResourceSubscriptions:
    """The Front's subscribe, unsubscribe and listen handlers.

    Args:
        view: The Front's view (handshake connections are captured with it).
        relay: Holds the subscriptions and the handshake-era connections.
        listen: The SDK's handler serving the Front's listen bus.
        route: A URI's owning actor, through the Front's routing rule (raises ``MCPError`` for none).
    """

    def __init__(
        self,
        view: CatalogView,
        relay: Relay,
        listen: ListenHandler,
        route: Callable[[str], Awaitable[ServerActor]],
    ) -> None:
        self._view = view
        self._relay = relay
        self._listen = listen
        self._route = route

    async def subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        actor = await self._route(uri)
        connection = connection_of(ctx.session)
        self._relay.legacy.capture(connection, self._view)
        self._relay.subscriptions.subscribe(connection, uri, actor.name)
        await self._subscribed_upstream(actor)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self._relay.subscriptions.unsubscribe(connection_of(ctx.session), str(params.uri))
        return types.EmptyResult()

    async def listen(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """A 2026-era host's listen stream; its resource URIs count as that stream's subscriptions."""
        stream = object()
        owners: dict[str, ServerActor] = {}
        for uri in params.notifications.resource_subscriptions or ():
            try:
                owner = await self._route(uri)
            except MCPError:
                continue  # honored but never fires, as with a direct server and an unknown URI
            self._relay.subscriptions.subscribe(stream, uri, owner.name)
            owners[owner.name] = owner
        try:
            # The acknowledgement must mean "updates flow": subscribe upstream first.
            for owner in owners.values():
                await self._subscribed_upstream(owner)
            return await self._listen(ctx, params)
        finally:
            self._relay.subscriptions.release(stream)

    async def _subscribed_upstream(self, actor: ServerActor) -> None:
        try:
            await actor.apply_subscriptions()
        except UpstreamError as exc:
            # The subscription stays recorded and is applied again on the next generation.
            logger.warning("server=%s resource subscription not applied yet: %s", actor.name, exc)
