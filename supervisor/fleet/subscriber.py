"""The fleet store's pub/sub subscriber, run by us: heartbeat and rebuild (DESIGN I14).

Pub/sub is only a speed-up: a lost message costs at most one compare period
(``CatalogCache`` compares generations periodically and on every rebuild).
coredis can resubscribe by itself, but its automatic resubscribe after an
outage did not always come back, so this module turns it off
(``retry_policy=None``) and owns the whole life of the subscription instead:

* wait until the store's breaker is closed, open a pub/sub connection and
  subscribe to the prefix's one channel;
* tell ``on_rebuilt`` (the cache compares generations: whatever was missed
  while unsubscribed is caught up);
* every ``heartbeat_sec`` publish a heartbeat through the shared client and
  expect to receive it on the subscription within ``heartbeat_sec``; if it does
  not come back, or the connection fails, tear everything down and rebuild.

Concurrency: ``run`` owns one nursery per subscription (the reader and the
heartbeat); ``on_event`` and ``on_rebuilt`` are synchronous and never block.
Every wait is bounded by the heartbeat or the store's operation timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import anyio
import trio

from supervisor.errors import CatalogStoreUnavailable
from supervisor.fleet import scripts
from supervisor.fleet.scripts import FleetEvent
from supervisor.fleet.store import FleetStore

logger = logging.getLogger(__name__)

HEARTBEAT_SEC: Final = 2.0
REBUILD_DELAY_SEC: Final = 0.2


class _HeartbeatLost(Exception):
    """Our own heartbeat did not come back: the subscription is silently dead."""


class FleetSubscriber:
    """Keeps one subscription to the fleet channel alive."""

    def __init__(
        self,
        store: FleetStore,
        *,
        on_event: Callable[[FleetEvent], None],
        on_rebuilt: Callable[[], None],
        heartbeat_sec: float = HEARTBEAT_SEC,
    ) -> None:
        self._store = store
        self._on_event = on_event
        self._on_rebuilt = on_rebuilt
        self._heartbeat_sec = heartbeat_sec
        self._heard = trio.Event()
        self.subscribed = False
        self.rebuilds = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Subscribe, listen, rebuild on any failure; until cancelled."""
        task_status.started()
        while True:
            await self._store.wait_up()
            try:
                await self._subscribe_once()
            except* (anyio.ClosedResourceError, anyio.BrokenResourceError):
                # coredis's own cleanup of a torn-down subscription raises these (also while we are
                # being cancelled, beside the Cancelled, which except* lets through).
                logger.debug("catalog store subscription connection closed; rebuilding")
            except* Exception as group:  # the subscription's boundary: any other failure means rebuild
                logger.debug("catalog store subscription ended (%r); rebuilding", group.exceptions[0])
            finally:
                self.subscribed = False
            self.rebuilds += 1
            await trio.sleep(REBUILD_DELAY_SEC)

    async def _subscribe_once(self) -> None:
        bound_sec = max(self._store.timeout_sec, 1.0)
        pubsub = self._store.client.pubsub(retry_policy=None, ignore_subscribe_messages=True)
        async with pubsub:
            with trio.fail_after(bound_sec):
                await pubsub.subscribe(scripts.channel(self._store.prefix))
            self.subscribed = True
            self._on_rebuilt()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeat)
                while True:
                    message = await pubsub.get_message()
                    if message is None or message.get("type") != "message":
                        continue
                    event = scripts.parse_event(str(message.get("data", "")))
                    if event is None:
                        continue
                    if event.kind == "heartbeat":
                        if event.origin == self._store.origin:
                            self._heard.set()
                        continue
                    self._on_event(event)

    async def _heartbeat(self) -> None:
        while True:
            await trio.sleep(self._heartbeat_sec)
            self._heard = trio.Event()
            try:
                await self._store.publish_heartbeat()
            except CatalogStoreUnavailable as exc:
                raise _HeartbeatLost("could not publish") from exc
            with trio.move_on_after(self._heartbeat_sec):
                await self._heard.wait()
                continue
            raise _HeartbeatLost(f"no heartbeat back within {self._heartbeat_sec:g}s")
