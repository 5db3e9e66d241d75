"""Catalog reuse across reconnects: one response-cache store per upstream server (I4-I7).

The ``CatalogCache`` (the CacheActor of DESIGN §2) owns one ``ServerCacheStore``
per configured server and hands the same store to every ``mcp.Client``
generation of that server through ``CacheConfig(store=…)``, so a reconnect can
serve ``tools/list`` from the entry an earlier generation wrote, with no round
trip (I4). The SDK applies the lifetime: a server-declared ``ttlMs`` wins,
including ``0``; ``catalog_reuse_ttl_ms`` is the ``default_ttl_ms`` for servers
that declare none, i.e. handshake-era servers (I5). Keys carry the principal
(partition), the configured transport target and the negotiated protocol
version.

What the SDK cannot do alone, this module does:

* **Identity (I6).** An entry is reused only by a server that reports the same
  ``name@version`` as the generation that wrote it. ``cache_mode_for`` turns a
  reconnect's ``use`` into ``refresh`` (and evicts) when the identity differs
  or the server is anonymous. A changed command/args/url/env is a new target,
  hence a new key.
* **Eviction wins races (I7).** Every eviction bumps a per-(server, method)
  generation *before* deleting. A sync captures the generation before its
  fetch; if it moved by the time the fetch returns, whatever that fetch wrote
  is removed. The counter lives here, not in a ``Client``, so the rule holds
  across client generations.

**Catalogs on disk.** With ``backend = "file"`` (the default) every store is
also kept in a file under the state directory (``catalog.cache_files``, run by
``run``): a fresh sidecar loads a server's file when its first generation is
configured, with the identity that wrote it on record, so a cold start's first
sync may reuse it (``first_sync_mode`` is ``use``) under the same rules as a
reconnect.

**The fleet store (I14).** With ``[supervisor.catalog_store] backend =
"redis"`` the cache becomes a real actor (``run``): a ``FleetLink``
(:mod:`supervisor.fleet.sync`) with an outbox carries every Redis side effect
(eviction, write) in order, retried until it lands; local effects stay as
below. A local miss may be answered from the fleet store (a *fleet hit*), but
only for the identity the fetch was prepared for (``prepare_fetch``), so the
writer's ``name@version`` travels with the entry. A cold start's first sync
may then use the store (``first_sync_mode`` is ``use``); with the memory
backend it stays ``refresh``.

Concurrency: every method that changes local state is synchronous. The local
stores never suspend, so under trio each local eviction (bump + delete) is
atomic with respect to every fetch; the fleet side of an eviction is queued in
the same synchronous step. The only awaits on a sync path are
``prepare_fetch`` and a local miss's fleet read, each bounded by
``operation_timeout_ms``. Time is ``trio.current_time()``, so tests drive it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

import trio
from mcp.client.caching import CacheConfig, CacheEntry, CacheKey, CacheMode

from supervisor.catalog.cache_files import DiskMirror
from supervisor.catalog.disk import CatalogFiles
from supervisor.catalog.registry import Kind
from supervisor.config.models import CatalogStoreSettings
from supervisor.config.servers import ServerSettings
from supervisor.fleet.scripts import target_id
from supervisor.fleet.sync import FleetLink
from supervisor.fleet.types import Capture, StoreState, new_origin

logger = logging.getLogger(__name__)

TOOLS_LIST: Final = "tools/list"
PROMPTS_LIST: Final = "prompts/list"
CATALOG_METHODS: Final = (TOOLS_LIST, PROMPTS_LIST)
"""The list methods a catalog lifetime may serve; resource lists always bypass the cache (I9)."""
EvictionReason = Literal["list_changed", "unknown_tool", "identity", "config", "race", "fleet"]
_KIND_OF_METHOD: Final[dict[str, Kind]] = {TOOLS_LIST: "tools", PROMPTS_LIST: "prompts"}


class ServerCacheStore:
    """The response-cache store of one upstream server, shared by all its client generations.

    Implements the SDK's ``ResponseCacheStore`` protocol. Methods never
    suspend, so each operation is atomic under trio.
    """

    def __init__(
        self, link: FleetLink | None = None, tid: str = "", on_change: Callable[[], None] | None = None
    ) -> None:
        self._entries: dict[CacheKey, CacheEntry] = {}
        self._on_change = on_change
        """Called after every change of the entries (the disk mirror's dirty mark)."""
        self.hits = 0
        """Fresh entries served, local and fleet."""
        self.fleet_hits = 0
        """Of ``hits``, those the fleet store answered after a local miss."""
        self.writes = 0
        self._link = link
        self.tid = tid
        self.captures: dict[str, Capture] = {}
        """Per method: the fleet epoch and generation the running fetch's write is guarded by."""
        self.identity: str | None = None
        """The identity the running fetch was prepared for; fleet entries of any other are misses."""
        self.fleet_reads = False
        """Whether a local miss may ask the fleet store (only a prepared ``use`` fetch)."""

    async def get(self, key: CacheKey) -> CacheEntry | None:
        entry = self._entries.get(key)
        now = trio.current_time()
        if entry is not None and entry.expires_at is not None and entry.expires_at > now:
            self.hits += 1
            return entry
        if self._link is not None and self.fleet_reads and self.identity is not None:
            fleet_entry = await self._link.read((self.tid, key.method), key.partition, self.identity)
            if fleet_entry is not None:
                self._entries[key] = fleet_entry
                self.hits += 1
                self.fleet_hits += 1
                return fleet_entry
        return entry

    @property
    def entries(self) -> dict[CacheKey, CacheEntry]:
        """The entries themselves (the disk mirror loads into them and reads them back)."""
        return self._entries

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    async def set(self, key: CacheKey, entry: CacheEntry) -> None:
        self.writes += 1
        self._entries[key] = entry
        self._changed()
        capture = self.captures.get(key.method)
        if self._link is not None and capture is not None and self.identity is not None:
            self._link.enqueue_write((self.tid, key.method), key.partition, capture, entry, self.identity)

    async def delete(self, key: CacheKey) -> None:
        if self._entries.pop(key, None) is not None:
            self._changed()

    async def clear(self) -> None:
        self._entries.clear()
        self._changed()

    def delete_method(self, method: str) -> int:
        """Drop every entry of ``method`` (all arms, all eras); return how many were dropped."""
        doomed = [key for key in self._entries if key.method == method]
        for key in doomed:
            del self._entries[key]
        if doomed:
            self._changed()
        return len(doomed)

    def fresh_entries(self) -> list[tuple[CacheKey, float]]:
        """Every unexpired entry with its remaining lifetime in seconds."""
        now = trio.current_time()
        return [
            (key, entry.expires_at - now)
            for key, entry in self._entries.items()
            if entry.expires_at is not None and entry.expires_at > now
        ]


@dataclass
class CacheStats:
    """What status shows about one server's catalog cache."""

    hits: int = 0
    misses: int = 0
    fleet_hits: int = 0
    evictions: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True, slots=True)
class FetchTicket:
    """Captured before a fetch; ``CatalogCache.finish_fetch`` checks it afterwards."""

    server: str
    method: str
    generation: int
    writes_before: int
    hits_before: int
    mode: CacheMode
    fleet_hits_before: int = 0


class CatalogCache:
    """Owns every server's store, the eviction generations and the identity ledger."""

    def __init__(
        self, *, principal: str, store: CatalogStoreSettings | None = None, state_dir: str | None = None
    ) -> None:
        """``store``: the ``[supervisor.catalog_store]`` table (None: the memory store alone); ``state_dir``: the
        ``token_store`` setting (unset: the default state directory), where the file backend's files live."""
        self._principal = principal
        self._stores: dict[str, ServerCacheStore] = {}
        self._generations: Counter[tuple[str, str]] = Counter()
        self._writer_identity: dict[str, str] = {}
        self._stats: dict[str, CacheStats] = {}
        self._store_settings = store if store is not None else CatalogStoreSettings(backend="memory")
        self._targets: dict[str, str] = {}
        """server -> target id (the fleet store's hash tag), as last configured."""
        self.resync: Callable[[str, CacheMode, frozenset[Kind]], None] | None = None
        """Set by the owner: ask a server's actor for a sync (a fleet eviction's re-sync)."""
        self.fleet: FleetLink | None = None
        self.disk: DiskMirror | None = None
        """With the file backend: every store mirrored into its file (``catalog.cache_files``)."""
        self._loaded: dict[str, str] = {}
        """server -> the target its file was loaded for."""
        if self._store_settings.backend == "file":
            self.disk = DiskMirror(CatalogFiles(state_dir, principal), identity_of=self._writer_identity.get)
        if self._store_settings.backend == "redis":
            self.fleet = FleetLink(
                self._store_settings,
                origin=new_origin(),
                evict_local=self._evict_from_fleet,
                servers_of=self._servers_of,
                resync=self._fleet_resync,
            )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The CacheActor: run the fleet link (redis: outbox, subscriber, compare) or the disk mirror until cancelled.

        With the memory backend there is nothing to run: it returns once started.
        """
        if self.fleet is not None:
            await self.fleet.run(task_status=task_status)
            return
        task_status.started()
        if self.disk is not None:
            await self.disk.run()

    @property
    def first_sync_mode(self) -> CacheMode:
        """A cold start's first sync: ``use`` the fleet store (redis) or the files (file), else ``refresh`` (I4)."""
        return "use" if self.fleet is not None or self.disk is not None else "refresh"

    async def prepare_fetch(self, server: str, method: str, mode: CacheMode, identity: str | None) -> None:
        """Before a fetch: capture the fleet generation its write is guarded by (bounded; no-op for memory)."""
        store = self._store(server)
        store.identity = identity
        store.fleet_reads = False
        store.captures.pop(method, None)
        if self.fleet is None or identity is None or mode == "bypass":
            return
        capture = await self.fleet.prepare((store.tid, method))
        if capture is not None:
            store.captures[method] = capture
            store.fleet_reads = mode == "use"

    def config_for(self, settings: ServerSettings) -> CacheConfig:
        """The ``CacheConfig`` for a new client generation of ``settings.name`` (same store every time)."""
        tid = target_id(settings.target)
        if self._targets.get(settings.name) != tid:
            self._targets[settings.name] = tid
            self._store(settings.name).tid = tid
        if self.disk is not None and self._loaded.get(settings.name) != settings.target:
            self._loaded[settings.name] = settings.target
            identity = self.disk.load(settings.name, settings.target, self._store(settings.name).entries)
            if identity is not None:
                self._writer_identity[settings.name] = identity
        return CacheConfig(
            store=self._store(settings.name),
            partition=self._principal,
            target_id=settings.target,
            default_ttl_ms=settings.reconnect.catalog_reuse_ttl_ms,
            clock=trio.current_time,
        )

    def cache_mode_for(self, server: str, mode: CacheMode, identity: str | None) -> CacheMode:
        """Downgrade a reuse to a refresh unless the entry's writer had this exact identity (I6)."""
        if mode != "use":
            return mode
        writer = self._writer_identity.get(server)
        if identity is not None and writer == identity:
            return mode
        if writer is not None:
            logger.info("server=%s identity %s differs from %s: relisting", server, identity or "anonymous", writer)
            self.evict(server, "identity")
        elif self.fleet is not None and identity is not None:
            # Fleet entries carry their writer's identity: a read accepts only this one.
            return mode
        # With no writer on record the entry (if any) is of unknown origin; a refresh overwrites it.
        return "refresh"

    def begin_fetch(self, server: str, mode: CacheMode, method: str = TOOLS_LIST) -> FetchTicket:
        """Capture the eviction generation of ``method`` before a fetch."""
        store = self._store(server)
        generation = self._generations[(server, method)]
        return FetchTicket(server, method, generation, store.writes, store.hits, mode, store.fleet_hits)

    def finish_fetch(self, ticket: FetchTicket, identity: str | None) -> bool:
        """Account for a finished fetch; return False if an eviction raced it (its write was removed).

        Synchronous, so the check and the removal are one atomic step.
        """
        server = ticket.server
        store = self._store(server)
        stats = self._stats_for(server)
        if ticket.mode == "use":
            if store.hits > ticket.hits_before:
                stats.hits += 1
                stats.fleet_hits += store.fleet_hits > ticket.fleet_hits_before
            else:
                stats.misses += 1
        if self._generations[(server, ticket.method)] != ticket.generation:
            # An eviction landed while this fetch was in flight: its result must not be served later.
            store.delete_method(ticket.method)
            stats.evictions["race"] += 1
            return False
        if store.writes > ticket.writes_before and identity is not None:
            self._writer_identity[server] = identity
            if self.disk is not None:
                self.disk.changed(server)
        return True

    def served_from_cache(self, ticket: FetchTicket) -> bool:
        """Whether the fetch ``ticket`` was taken for was answered by a fresh entry (no upstream round trip)."""
        return ticket.mode == "use" and self._store(ticket.server).hits > ticket.hits_before

    def evict(self, server: str, reason: EvictionReason, methods: tuple[str, ...] = CATALOG_METHODS) -> None:
        """Evict ``server``'s entries of ``methods``: bump each generation first, then delete (I7).

        The identity on record goes too, so the next reuse of any method relists.
        With the fleet store the same eviction is queued for every sidecar (I14),
        in this synchronous step, unless it came from the fleet (``reason="fleet"``).
        """
        dropped = 0
        store = self._store(server)
        for method in methods:
            self._generations[(server, method)] += 1
            dropped += store.delete_method(method)
            store.captures.pop(method, None)
            if self.fleet is not None and reason != "fleet" and store.tid:
                self.fleet.enqueue_evict((store.tid, method))
        self._writer_identity.pop(server, None)
        if self.disk is not None:
            self.disk.changed(server)
        self._stats_for(server).evictions[reason] += 1
        logger.debug("server=%s evicted %d %s entries (%s)", server, dropped, "/".join(methods), reason)

    def fresh_until(self, server: str, method: str) -> float | None:
        """When the earliest fresh entry of ``server``'s ``method`` expires (``trio.current_time()``), or None."""
        store = self._stores.get(server)
        if store is None:
            return None
        now = trio.current_time()
        expiries = [
            entry.expires_at
            for key, entry in store.entries.items()
            if key.method == method and entry.expires_at is not None and entry.expires_at > now
        ]
        return min(expiries) if expiries else None

    def describe(self, server: str) -> dict[str, object]:
        """Status fields: entries and their remaining lifetimes, hits, misses, evictions by reason."""
        stats = self._stats_for(server)
        entries = self._store(server).fresh_entries()
        return {
            "entries": len(entries),
            "remaining_sec": sorted(round(remaining, 1) for _key, remaining in entries),
            "hits": stats.hits,
            "fleet_hits": stats.fleet_hits,
            "misses": stats.misses,
            "evictions": dict(stats.evictions),
        }

    def store_status(self) -> dict[str, object]:
        """The catalog store's status fields: backend, state, fleet vs local hits, outbox depth."""
        stores = self._stores.values()
        hits, fleet_hits = sum(s.hits for s in stores), sum(s.fleet_hits for s in stores)
        document: dict[str, object] = {
            "backend": self._store_settings.backend,
            "state": "local" if self.fleet is None else self.fleet.state,
            "local_hits": hits - fleet_hits,
            "fleet_hits": fleet_hits,
            "outbox_depth": 0 if self.fleet is None else self.fleet.outbox_depth,
        }
        if self.fleet is not None:
            document["url"] = self._store_settings.masked_url
            document["reason"] = self.fleet.store.reason
            document["subscribed"] = self.fleet.subscriber.subscribed
        return document

    @property
    def store_state(self) -> StoreState | Literal["local"]:
        return "local" if self.fleet is None else self.fleet.state

    # -- the fleet link's callbacks (synchronous) --------------------------------------------

    def _servers_of(self, tid: str) -> list[str]:
        return [server for server, known in self._targets.items() if known == tid]

    def _evict_from_fleet(self, tid: str, method: str) -> None:
        for server in self._servers_of(tid):
            logger.info("server=%s %s evicted by another sidecar: re-syncing", server, method)
            self.evict(server, "fleet", (method,))

    def _fleet_resync(self, server: str, mode: CacheMode, method: str) -> None:
        if self.resync is not None:
            self.resync(server, mode, frozenset({_KIND_OF_METHOD.get(method, "tools")}))

    def _store(self, server: str) -> ServerCacheStore:
        store = self._stores.get(server)
        if store is None:
            disk = self.disk
            changed = None if disk is None else (lambda: disk.changed(server))
            store = self._stores[server] = ServerCacheStore(self.fleet, on_change=changed)
        return store

    def _stats_for(self, server: str) -> CacheStats:
        return self._stats.setdefault(server, CacheStats())
