"""The 2026-era change-notice stream of one upstream generation (``subscriptions/listen``).

A 2026-era server delivers change notices (tools, prompts, resources) and
resource updates only on an open listen stream. ``serve_listen`` holds one for
the generation's lifetime and forwards its events to the ``ListenTarget``.

The resource URIs a stream carries are fixed when it opens, so a new set of
subscribed URIs (``ListenFilter.update``) opens a *new* stream first and
closes the old one only once the new one is acknowledged: there is never a
moment without a stream, so no notice is lost in the switch. Events the old
stream still delivers after that are dropped, so none is delivered twice.
``ListenFilter.wait_applied`` lets a subscriber wait until its URI is listened for.

A server that never acknowledges (some answer ``listen`` with plain JSON
instead of a stream) gets ``LISTEN_ACK_BOUND_SEC``; then the generation goes
on without notices (``serve_listen`` reports False), and the actor re-lists
on reconnect instead of reusing. An established stream that drops abruptly
means the connection is gone (over HTTP nothing else would say so until the
next call), so it marks the generation lost.

Concurrency: ``serve_listen`` owns a nursery with one task per open stream
(at most two, during a switch). ``ListenFilter`` changes are synchronous and
wake waiters with a fresh ``trio.Event``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import trio
from mcp import Client, MCPError
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, ToolsListChanged

from supervisor.calls.attribution import HostSide
from supervisor.catalog.registry import Kind
from supervisor.upstream.health import TransportHealth

logger = logging.getLogger(__name__)

LISTEN_ACK_BOUND_SEC: Final = 5.0
"""How long a 2026-era server may take to acknowledge ``subscriptions/listen`` before we go without notices."""


class ListenFilter:
    """The resource URIs the listen stream should carry, and the set the server has acknowledged."""

    def __init__(self) -> None:
        self.uris: frozenset[str] = frozenset()
        self.changed = trio.Event()
        self.applied: frozenset[str] | None = None
        self._applied_changed = trio.Event()

    def update(self, uris: frozenset[str]) -> None:
        if uris != self.uris:
            self.uris = uris
            self.changed.set()
            self.changed = trio.Event()

    def acknowledged(self, uris: frozenset[str]) -> None:
        self.applied = uris
        self._applied_changed.set()
        self._applied_changed = trio.Event()

    async def wait_applied(self, uris: frozenset[str]) -> None:
        """Return once a stream carrying ``uris`` is acknowledged (or the wish moved on)."""
        while self.applied != uris and self.uris == uris:
            await self._applied_changed.wait()


@dataclass(frozen=True, slots=True)
class ListenTarget:
    """Where one generation's listen events go."""

    server: str
    health: TransportHealth
    on_list_changed: Callable[[Kind], None]
    host: HostSide | None


@dataclass(eq=False)
class _Stream:
    uris: frozenset[str]
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    superseded: bool = False
    ended: trio.Event = field(default_factory=trio.Event)
    graceful: bool = False


async def serve_listen(
    client: Client,
    listen_filter: ListenFilter,
    target: ListenTarget,
    *,
    task_status: trio.TaskStatus[bool] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Hold the generation's listen stream; report True once the first is acknowledged, else False."""
    name = target.server
    started = False
    try:
        async with trio.open_nursery() as nursery:
            current: _Stream | None = None
            while True:
                changed = listen_filter.changed
                stream = _Stream(listen_filter.uris)
                with trio.move_on_after(LISTEN_ACK_BOUND_SEC) as ack_scope:
                    await nursery.start(_hold, client, stream, target)
                if ack_scope.cancelled_caught:
                    logger.warning(
                        "server=%s did not acknowledge subscriptions/listen within %gs; going on without "
                        "change notices (its catalog is re-listed on every reconnect)",
                        name, LISTEN_ACK_BOUND_SEC,
                    )  # fmt: skip
                    if current is None:
                        return
                    stream = current  # keep the stream we have; try the new set on the next change
                else:
                    if current is not None:
                        current.superseded = True  # from now on only the new stream speaks
                        current.scope.cancel()
                    current = stream
                    listen_filter.acknowledged(stream.uris)
                    logger.debug("server=%s listening for changes and %d resource URIs", name, len(stream.uris))
                if not started:
                    task_status.started(True)
                    started = True
                await _wait_either(changed, stream.ended)
                if stream.ended.is_set() and not stream.superseded:
                    nursery.cancel_scope.cancel()
                    return  # the server closed the stream gracefully: no more notices this generation
    except* SubscriptionLost as group:
        if started:
            target.health.mark_lost("the change-notice stream dropped")
        logger.debug("server=%s: listen stream lost (%r)", name, group.exceptions[0])
    except* (ListenNotSupportedError, MCPError, TimeoutError) as group:
        logger.debug("server=%s: no listen stream (%r)", name, group.exceptions[0])
    finally:
        if not started:
            task_status.started(False)


async def _hold(client: Client, stream: _Stream, target: ListenTarget, *, task_status: trio.TaskStatus[None]) -> None:
    try:
        with stream.scope:
            async with client.listen(
                tools_list_changed=True,
                prompts_list_changed=True,
                resources_list_changed=True,
                resource_subscriptions=sorted(stream.uris),
            ) as subscription:
                task_status.started()
                async for event in subscription:
                    if not stream.superseded:
                        await _forward(event, target)
                stream.graceful = True
    finally:
        stream.ended.set()


async def _forward(event: Any, target: ListenTarget) -> None:
    match event:
        case ToolsListChanged():
            target.on_list_changed("tools")
        case PromptsListChanged():
            target.on_list_changed("prompts")
        case ResourcesListChanged():
            target.on_list_changed("resources")
        case ResourceUpdated(uri=uri) if target.host is not None:
            await target.host.deliver_resource_updated(target.server, uri)
        case _:
            pass


async def _wait_either(first: trio.Event, second: trio.Event) -> None:
    async with trio.open_nursery() as nursery:

        async def wait(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(wait, first)
        nursery.start_soon(wait, second)
