"""The ServerActor's seams: what it needs of an upstream generation, how one is opened, who watches it.

Production wires ``upstream.open_upstream`` (through ``production_connector``)
and ``metrics.Metrics``; unit tests put in-process fakes behind the same
protocols. Nothing here owns a task or a nursery.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import mcp_types as types
from mcp.client.caching import CacheMode

from supervisor.cache import CatalogCache
from supervisor.settings import ServerSettings
from supervisor.upstream import Identity, open_upstream
from supervisor.upstream_stdio import TransportHealth


class UpstreamSession(Protocol):
    """What the actor needs of one connected generation (``upstream.Upstream`` in production)."""

    health: TransportHealth

    @property
    def protocol_version(self) -> str: ...

    @property
    def identity(self) -> Identity: ...

    async def list_all_tools(self, cache_mode: CacheMode) -> list[types.Tool]: ...

    @property
    def has_resources(self) -> bool: ...

    async def list_all_resources(self) -> list[types.Resource]: ...

    async def read_resource(self, uri: str) -> types.ReadResourceResult: ...

    async def call_tool(self, raw_name: str, arguments: dict[str, Any] | None) -> types.CallToolResult: ...


class ActorEvents(Protocol):
    """Synchronous observers of an actor's milestones (``metrics.Metrics``); they must not block or raise."""

    def sync_finished(self, server: str, reason: str, ok: bool) -> None: ...

    def upstream_listed(self, server: str) -> None: ...

    def generation_ended(self, server: str, *, gave_up: bool) -> None: ...


class Connector(Protocol):
    """Opens one generation; ``open_upstream`` in production, a fake in unit tests."""

    def __call__(
        self, settings: ServerSettings, *, on_tools_changed: Callable[[], None]
    ) -> AbstractAsyncContextManager[UpstreamSession]: ...


def production_connector(cache: CatalogCache | None) -> Connector:
    """Connect real upstreams, each generation sharing the server's one cache store (I4)."""

    def connect(
        settings: ServerSettings, *, on_tools_changed: Callable[[], None]
    ) -> AbstractAsyncContextManager[UpstreamSession]:
        config = cache.config_for(settings) if cache is not None else None
        return open_upstream(settings, on_tools_changed=on_tools_changed, cache=config)

    return connect
