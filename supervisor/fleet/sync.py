"""The cache actor's fleet side: the outbox, fleet-wide evictions and re-syncs (DESIGN I14).

``FleetLink`` is owned by the ``CatalogCache`` (the CacheActor) when
``[supervisor.catalog_store] backend = "redis"``. Local effects stay
synchronous and immediate in ``CatalogCache``; every Redis side effect goes
through this link's **outbox**, in order, retried until it lands:

* ``_Evict``: INCR the generation + UNLINK the index + take the re-list lock +
  PUBLISH, one script. Consecutive evictions of one (target, method) coalesce
  (one INCR is enough to refuse every older write).
* ``_Write``: store an entry, only if the epoch and generation captured before
  its fetch are unchanged (checked inside Redis). Its lifetime is computed when
  it is sent (``PX`` = what is left), never stored as an absolute time. A write
  behind a pending eviction of its key is dropped; a refused one is dropped.

Nothing on a call path waits for the outbox. At a stop, what is left is sent
(shielded, bounded by ``STOP_GRACE_SEC``), so a sidecar that lists and exits
still shares what it listed. A sync waits at most one
operation timeout, in ``prepare`` (the capture, after this key's pending
evictions have landed) and in ``read``.

**Another sidecar's eviction** (a pub/sub event, or a newer generation found by
the periodic compare, after every rebuild of the subscription and every
recovery of the store): the local entries go at once (``evict_local``), then,
after a small jitter, the one sidecar holding the ``SET NX PX`` lock of (target,
generation) re-lists; the others wait (bounded) for its write and re-sync with
``use``, reading the store.

Concurrency: ``run`` owns one nursery: the store (its pool and prober), the
subscriber, the outbox worker, the compare loop and one re-sync task per
(target, method) at a time. Every method called from outside is synchronous,
except ``prepare`` and ``read``, which are bounded.
"""

from __future__ import annotations

import functools
import json
import logging
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import mcp_types as types
import trio
from mcp.client.caching import CacheEntry, CacheMode

from supervisor.config.models import CatalogStoreSettings
from supervisor.errors import CatalogStoreUnavailable
from supervisor.fleet.scripts import FleetEvent
from supervisor.fleet.types import Capture, StoreState

if TYPE_CHECKING:
    from supervisor.fleet.store import FleetStore
    from supervisor.fleet.subscriber import FleetSubscriber

logger = logging.getLogger(__name__)

COMPARE_PERIOD_SEC: Final = 5.0
"""A lost pub/sub message costs at most this long."""
RELIST_JITTER_SEC: Final = 0.1
LOCK_PX_MS: Final = 3000
"""How long the re-list lock of one generation is held; the others wait at most this for its write."""
OUTBOX_MAX_WRITES: Final = 256
_RESULT_TYPES: Final[dict[str, type[types.ListToolsResult] | type[types.ListPromptsResult]]] = {
    "tools/list": types.ListToolsResult,
    "prompts/list": types.ListPromptsResult,
}
Key = tuple[str, str]
"""(target id, method)."""


@dataclass(frozen=True, slots=True)
class _Evict:
    key: Key


@dataclass(frozen=True, slots=True)
class _Write:
    key: Key
    arm: str
    capture: Capture
    payload: str
    expires_at: float


_Op = _Evict | _Write


class FleetLink:
    """One sidecar's link to the fleet store: outbox, subscriber, compare loop, re-sync scheduling."""

    def __init__(
        self,
        settings: CatalogStoreSettings,
        *,
        origin: str,
        evict_local: Callable[[str, str], None],
        servers_of: Callable[[str], list[str]],
        resync: Callable[[str, CacheMode, str], None],
        rng: random.Random | None = None,
    ) -> None:
        """``evict_local(tid, method)`` drops the local entries of every server on that target,
        ``servers_of(tid)`` names those servers, and ``resync(server, mode, method)`` asks a
        server's actor for a sync through its mailbox."""
        # Imported here: only a sidecar with a Redis store loads coredis (``fleet.types``).
        from supervisor.fleet.store import FleetStore  # noqa: PLC0415
        from supervisor.fleet.subscriber import FleetSubscriber  # noqa: PLC0415

        self.store: FleetStore = FleetStore(settings, origin=origin, on_state=self._on_state)
        self.subscriber: FleetSubscriber = FleetSubscriber(
            self.store, on_event=self.on_event, on_rebuilt=self._compare_soon
        )
        self._evict_local = evict_local
        self._servers_of = servers_of
        self._resync = resync
        self._rng = rng if rng is not None else random.Random()
        self._outbox: deque[_Op] = deque()
        self._outbox_changed = trio.Event()
        self._outbox_drained = trio.Event()
        self._compare_now = trio.Event()
        self._known: dict[Key, int] = {}
        self._landed: dict[Key, trio.Event] = {}
        """Set when no eviction of the key waits in the outbox any more."""
        self._written: dict[Key, int] = {}
        self._written_changed = trio.Event()
        self._relisting: dict[Key, int] = {}
        self._nursery: trio.Nursery | None = None
        self.fleet_evictions_seen = 0

    @property
    def state(self) -> StoreState:
        return self.store.state

    @property
    def outbox_depth(self) -> int:
        return len(self._outbox)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(functools.partial(self.store.run, before_close=self._drain_at_stop))
            await nursery.start(self.subscriber.run)
            nursery.start_soon(self._serve_outbox)
            nursery.start_soon(self._serve_compare)
            task_status.started()

    # -- the outbox (synchronous producers) ------------------------------------------------

    def enqueue_evict(self, key: Key) -> None:
        """Queue a fleet-wide eviction of (target, method); writes queued before it are dropped."""
        self._outbox = deque(op for op in self._outbox if op.key != key or isinstance(op, _Evict))
        if not any(isinstance(op, _Evict) and op.key == key for op in self._outbox):
            self._outbox.append(_Evict(key))
        if key not in self._landed or self._landed[key].is_set():
            self._landed[key] = trio.Event()
        self._wake_outbox()

    def enqueue_write(self, key: Key, arm: str, capture: Capture, entry: CacheEntry, identity: str) -> None:
        """Queue an entry for the fleet store (dropped there if an eviction moved the generation)."""
        if entry.expires_at is None:
            return
        value: Any = entry.value
        payload = json.dumps(
            {"v": value.model_dump(mode="json", by_alias=True, exclude_none=True), "s": entry.scope, "i": identity},
            separators=(",", ":"),
        )
        writes = [op for op in self._outbox if isinstance(op, _Write)]
        if len(writes) >= OUTBOX_MAX_WRITES:
            self._outbox.remove(writes[0])  # writes only save work; evictions are never dropped
        self._outbox.append(_Write(key, arm, capture, payload, entry.expires_at))
        self._wake_outbox()

    def _wake_outbox(self) -> None:
        self._outbox_changed.set()

    async def wait_outbox_drained(self) -> None:
        """Return once the outbox is empty (every queued eviction and write was sent or dropped)."""
        while self._outbox:
            await self._outbox_drained.wait()

    async def _serve_outbox(self) -> None:
        while True:
            if not self._outbox:
                self._outbox_drained.set()
                self._outbox_drained = trio.Event()
                self._outbox_changed = trio.Event()
                await self._outbox_changed.wait()
                continue
            await self.store.wait_up()
            op = self._outbox[0]
            try:
                await self._send(op)
            except CatalogStoreUnavailable:
                continue  # the breaker is open now: wait_up, then retry the same op (in order)
            if self._outbox and self._outbox[0] is op:
                self._outbox.popleft()
            if isinstance(op, _Evict) and not any(o.key == op.key and isinstance(o, _Evict) for o in self._outbox):
                self._landed.setdefault(op.key, trio.Event()).set()

    async def _drain_at_stop(self) -> None:
        """At a stop (shielded, bounded by the store): send what is left, in order, while the store is up."""
        while self._outbox and self.store.state == "up":
            try:
                await self._send(self._outbox[0])
            except CatalogStoreUnavailable:
                return
            self._outbox.popleft()

    async def _send(self, op: _Op) -> None:
        tid, method = op.key
        match op:
            case _Evict():
                generation = await self.store.evict(tid, method, LOCK_PX_MS)
                self._known[op.key] = max(self._known.get(op.key, 0), generation)
            case _Write():
                px_ms = int((op.expires_at - trio.current_time()) * 1000)
                if px_ms <= 0:
                    return
                await self.store.write(tid, method, op.arm, op.capture, payload=op.payload, px_ms=px_ms)

    # -- the sync path (bounded) -------------------------------------------------------------

    async def prepare(self, key: Key) -> Capture | None:
        """The capture a fetch's write will be guarded by, after this key's evictions landed; None if unavailable."""
        landed = self._landed.get(key)
        with trio.move_on_after(self.store.timeout_sec):
            if landed is not None:
                await landed.wait()
            try:
                capture = await self.store.prepare(*key)
            except CatalogStoreUnavailable:
                return None
            self._observe(key, capture.generation)
            return capture
        return None

    async def read(self, key: Key, arm: str, identity: str) -> CacheEntry | None:
        """A trusted, fresh entry written under ``identity``, or None (a miss; never raises)."""
        try:
            found = await self.store.read(key[0], key[1], arm)
        except CatalogStoreUnavailable:
            return None
        self._observe(key, found.capture.generation)
        if found.payload is None or found.pttl_ms <= 0:
            return None
        epoch, _, rest = found.payload.partition("|")
        generation, _, body = rest.partition("|")
        if epoch != found.capture.epoch or generation != str(found.capture.generation):
            return None  # written before a flush or restart, or under an older generation
        try:
            document = json.loads(body)
            if document.get("i") != identity:
                return None
            value = _RESULT_TYPES[key[1]].model_validate(document["v"])
            scope: Literal["public", "private"] = "public" if document.get("s") == "public" else "private"
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # a wrong-shape entry is a miss
        return CacheEntry(value=value, scope=scope, expires_at=trio.current_time() + found.pttl_ms / 1000)

    def _observe(self, key: Key, generation: int) -> None:
        """A generation read on our own sync path: remember it (the sync in progress is fresh).

        A lower one than known means the store lost its state (flush, restart): follow it down,
        or later evictions would look old.
        """
        self._known[key] = generation

    # -- other sidecars' evictions -------------------------------------------------------------

    def on_event(self, event: FleetEvent) -> None:
        key = (event.tid, event.method)
        if event.kind == "write":
            self._written[key] = max(self._written.get(key, 0), event.generation)
            self._written_changed.set()
            self._written_changed = trio.Event()
        elif event.kind == "evict" and event.origin != self.store.origin:
            self._newer(key, event.generation)

    def _newer(self, key: Key, generation: int) -> None:
        known = self._known.get(key)
        if known is not None and generation < known:
            self._known[key] = generation  # the store was flushed or restarted: follow it down
            return
        if known is not None and generation == known:
            return
        self._known[key] = generation
        if known is None:
            return  # never synced this key here: nothing local to evict
        self.fleet_evictions_seen += 1
        self._evict_local(*key)
        if not self._servers_of(key[0]) or self._nursery is None:
            return
        if key in self._relisting:
            self._relisting[key] = generation  # the running task picks the newest up
            return
        self._relisting[key] = generation
        self._nursery.start_soon(self._relist, key)

    async def _relist(self, key: Key) -> None:
        try:
            await trio.sleep(self._rng.uniform(0, RELIST_JITTER_SEC))
            generation = self._relisting[key]
            try:
                won = await self.store.try_lock(key[0], key[1], generation, LOCK_PX_MS)
            except CatalogStoreUnavailable:
                won = True  # no store: re-list from the upstream, as a memory store would
            if not won:
                with trio.move_on_after(LOCK_PX_MS / 1000):
                    while self._written.get(key, 0) < generation:
                        await self._written_changed.wait()
        finally:
            self._relisting.pop(key, None)
        mode: CacheMode = "refresh" if won else "use"
        for server in self._servers_of(key[0]):
            self._resync(server, mode, key[1])

    def _compare_soon(self) -> None:
        self._compare_now.set()

    def _on_state(self, state: StoreState) -> None:
        if state == "up":
            self._wake_outbox()
            self._compare_soon()

    async def _serve_compare(self) -> None:
        while True:
            with trio.move_on_after(COMPARE_PERIOD_SEC):
                await self._compare_now.wait()
            self._compare_now = trio.Event()
            await self.compare()

    async def compare(self) -> None:
        """Compare every known generation with the store's; handle each newer one as an eviction."""
        by_target: dict[str, list[str]] = {}
        for tid, method in list(self._known):
            by_target.setdefault(tid, []).append(method)
        for tid, methods in by_target.items():
            try:
                current = await self.store.generations(tid, tuple(methods))
            except CatalogStoreUnavailable:
                return
            for method, generation in current.items():
                pending = any(isinstance(op, _Evict) and op.key == (tid, method) for op in self._outbox)
                if not pending:
                    self._newer((tid, method), generation)
