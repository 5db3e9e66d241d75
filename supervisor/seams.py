"""The ServerActor's seams: what it needs of an upstream generation, how one is opened, who watches it.

Production wires ``upstream.connect.open_upstream`` (``root.production_connector``)
and ``ops.metrics.Metrics``; unit tests put in-process fakes behind the same
protocols. Protocols only: nothing here owns a task, a nursery or a default.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import mcp_types as types
from mcp.client.caching import CacheMode

from supervisor.calls.attribution import HostCall
from supervisor.catalog.registry import Definition, Kind
from supervisor.config.servers import ServerSettings
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.session import Identity


class UpstreamSession(Protocol):
    """What the actor needs of one connected generation (``upstream.session.Upstream`` in production)."""

    health: TransportHealth
    change_notices: bool

    @property
    def protocol_version(self) -> str: ...

    @property
    def identity(self) -> Identity: ...

    @property
    def kinds(self) -> frozenset[Kind]: ...

    @property
    def about(self) -> str:
        """One line of what the server says it does (its description, else its instructions); "" if nothing."""
        ...

    async def list_all(self, kind: Kind, cache_mode: CacheMode) -> list[Definition]: ...

    async def call_tool(
        self, raw_name: str, arguments: dict[str, Any] | None, call: HostCall | None = None
    ) -> types.CallToolResult | types.InputRequiredResult: ...

    async def get_prompt(
        self, raw_name: str, arguments: dict[str, str] | None, call: HostCall | None = None
    ) -> types.GetPromptResult | types.InputRequiredResult: ...

    async def read_resource(
        self, uri: str, call: HostCall | None = None
    ) -> types.ReadResourceResult | types.InputRequiredResult: ...

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None,
    ) -> types.CompleteResult: ...

    async def set_log_level(self, level: types.LoggingLevel | None) -> None: ...

    async def set_subscriptions(self, uris: frozenset[str]) -> None: ...

    async def roots_changed(self) -> None: ...


class ActorEvents(Protocol):
    """Synchronous observers of an actor's milestones (``ops.metrics.Metrics``); they must not block or raise."""

    def sync_finished(self, server: str, reason: str, ok: bool) -> None: ...

    def upstream_listed(self, server: str) -> None: ...

    def generation_ended(self, server: str, *, gave_up: bool) -> None: ...


class Connector(Protocol):
    """Opens one generation; ``open_upstream`` in production, a fake in unit tests."""

    def __call__(
        self, settings: ServerSettings, *, on_list_changed: Callable[[Kind], None]
    ) -> AbstractAsyncContextManager[UpstreamSession]: ...
