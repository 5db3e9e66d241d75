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

Concurrency: every method that changes state is synchronous. The stores are
in-memory and their async ``ResponseCacheStore`` methods never suspend, so
under trio each eviction (bump + delete) is atomic with respect to every
fetch. No mailbox is needed while that holds; a store that does network I/O
would need one. Time is ``trio.current_time()``, so tests drive it.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Final, Literal

import trio
from mcp.client.caching import CacheConfig, CacheEntry, CacheKey, CacheMode

from supervisor.settings import ServerSettings

logger = logging.getLogger(__name__)

TOOLS_LIST: Final = "tools/list"
PROMPTS_LIST: Final = "prompts/list"
CATALOG_METHODS: Final = (TOOLS_LIST, PROMPTS_LIST)
"""The list methods a catalog lifetime may serve; resource lists always bypass the cache (I9)."""
EvictionReason = Literal["list_changed", "unknown_tool", "identity", "config", "race"]


class ServerCacheStore:
    """The response-cache store of one upstream server, shared by all its client generations.

    Implements the SDK's ``ResponseCacheStore`` protocol. Methods never
    suspend, so each operation is atomic under trio.
    """

    def __init__(self) -> None:
        self._entries: dict[CacheKey, CacheEntry] = {}
        self.hits = 0
        self.writes = 0

    async def get(self, key: CacheKey) -> CacheEntry | None:
        entry = self._entries.get(key)
        if entry is not None and entry.expires_at is not None and entry.expires_at > trio.current_time():
            self.hits += 1
        return entry

    async def set(self, key: CacheKey, entry: CacheEntry) -> None:
        self.writes += 1
        self._entries[key] = entry

    async def delete(self, key: CacheKey) -> None:
        self._entries.pop(key, None)

    async def clear(self) -> None:
        self._entries.clear()

    def delete_method(self, method: str) -> int:
        """Drop every entry of ``method`` (all arms, all eras); return how many were dropped."""
        doomed = [key for key in self._entries if key.method == method]
        for key in doomed:
            del self._entries[key]
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


class CatalogCache:
    """Owns every server's store, the eviction generations and the identity ledger."""

    def __init__(self, *, principal: str) -> None:
        self._principal = principal
        self._stores: dict[str, ServerCacheStore] = {}
        self._generations: Counter[tuple[str, str]] = Counter()
        self._writer_identity: dict[str, str] = {}
        self._stats: dict[str, CacheStats] = {}

    def config_for(self, settings: ServerSettings) -> CacheConfig:
        """The ``CacheConfig`` for a new client generation of ``settings.name`` (same store every time)."""
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
        # With no writer on record the entry (if any) is of unknown origin; a refresh overwrites it.
        return "refresh"

    def begin_fetch(self, server: str, mode: CacheMode, method: str = TOOLS_LIST) -> FetchTicket:
        """Capture the eviction generation of ``method`` before a fetch."""
        store = self._store(server)
        return FetchTicket(server, method, self._generations[(server, method)], store.writes, store.hits, mode)

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
            else:
                stats.misses += 1
        if self._generations[(server, ticket.method)] != ticket.generation:
            # An eviction landed while this fetch was in flight: its result must not be served later.
            store.delete_method(ticket.method)
            stats.evictions["race"] += 1
            return False
        if store.writes > ticket.writes_before and identity is not None:
            self._writer_identity[server] = identity
        return True

    def served_from_cache(self, ticket: FetchTicket) -> bool:
        """Whether the fetch ``ticket`` was taken for was answered by a fresh entry (no upstream round trip)."""
        return ticket.mode == "use" and self._store(ticket.server).hits > ticket.hits_before

    def evict(self, server: str, reason: EvictionReason, methods: tuple[str, ...] = CATALOG_METHODS) -> None:
        """Evict ``server``'s entries of ``methods``: bump each generation first, then delete (I7).

        The identity on record goes too, so the next reuse of any method relists.
        """
        dropped = 0
        for method in methods:
            self._generations[(server, method)] += 1
            dropped += self._store(server).delete_method(method)
        self._writer_identity.pop(server, None)
        self._stats_for(server).evictions[reason] += 1
        logger.debug("server=%s evicted %d %s entries (%s)", server, dropped, "/".join(methods), reason)

    def describe(self, server: str) -> dict[str, object]:
        """Status fields: entries and their remaining lifetimes, hits, misses, evictions by reason."""
        stats = self._stats_for(server)
        entries = self._store(server).fresh_entries()
        return {
            "entries": len(entries),
            "remaining_sec": sorted(round(remaining, 1) for _key, remaining in entries),
            "hits": stats.hits,
            "misses": stats.misses,
            "evictions": dict(stats.evictions),
        }

    def _store(self, server: str) -> ServerCacheStore:
        return self._stores.setdefault(server, ServerCacheStore())

    def _stats_for(self, server: str) -> CacheStats:
        return self._stats.setdefault(server, CacheStats())
