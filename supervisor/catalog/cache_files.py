"""The cache actor's disk side: every server's response-cache store mirrored into its file (issue 57).

With ``[supervisor.catalog_store] backend = "file"`` (the default), the
``CatalogCache`` (the CacheActor) owns one ``DiskMirror``:

* **Load.** The first time a server's store is configured (its first client
  generation, ``CatalogCache.config_for``), its file (``catalog.disk``) is read
  and its fresh entries become entries of the store, with the writer's
  identity on record, so the first sync of a server that reports that identity
  reuses the catalog exactly as a reconnect would (I4-I6). A file written for
  another target (the command, url or env changed) loads nothing.
* **Mirror.** Every change of a store (a write, a delete, an eviction, the
  identity on record) marks its server dirty; ``run`` writes the store's
  state as it is then, in a worker thread, after a short coalescing wait. A
  file is a copy of the memory store, never a log of operations: a write that
  an eviction raced is removed from the store (I7) and so from the next file.

The stores keep ``trio.current_time()`` (the tests' virtual clock); a file keeps
wall time. The two are converted here, at load and at each write.

Concurrency: ``run`` is the one task that writes files (it lives in the
CacheActor's nursery); marking dirty is synchronous. The last writes at a stop
are shielded and bounded (``STOP_FLUSH_SEC``). A file that cannot be written is
a warning (``catalog.disk``), and the catalogs stay in memory.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final

import mcp_types as types
import trio
from mcp.client.caching import CacheEntry, CacheKey

from supervisor.catalog.disk import CatalogFiles, ServerRecord, StoredEntry

logger = logging.getLogger(__name__)

COALESCE_SEC: Final = 0.05
"""Changes of a store within this window reach its file as one write."""
STOP_FLUSH_SEC: Final = 2.0
"""How long the last writes may take at a stop."""
_RESULT_TYPES: Final[dict[str, type[types.ListToolsResult] | type[types.ListPromptsResult]]] = {
    "tools/list": types.ListToolsResult,
    "prompts/list": types.ListPromptsResult,
}

Entries = dict[CacheKey, CacheEntry]


class DiskMirror:
    """Loads each server's store from its file once, and writes it back whenever it changes (module docstring).

    Args:
        files: Where the principal's catalogs live.
        identity_of: The identity on record for a server's entries (``CatalogCache``'s ledger).
    """

    def __init__(self, files: CatalogFiles, identity_of: Callable[[str], str | None]) -> None:
        self.files = files
        self._identity_of = identity_of
        self._entries: dict[str, Entries] = {}
        self._targets: dict[str, str] = {}
        self._dirty: set[str] = set()
        self._wake = trio.Event()
        self.loaded: dict[str, str | None] = {}
        """Servers whose file was read, with the identity it was written by (tests read it)."""
        self.writes = 0
        """Files written (tests count them)."""

    def load(self, server: str, target: str, entries: Entries) -> str | None:
        """Fill ``entries`` (the server's empty store) from its file; return the identity that wrote them."""
        self._entries[server] = entries
        self._targets[server] = target
        record = self.files.read_server(server, target)
        if record is None:
            self.loaded[server] = None
            return None
        now_trio, now_wall = trio.current_time(), time.time()
        for stored in record.entries:
            value_type = _RESULT_TYPES.get(stored.method)
            if value_type is None:
                continue
            try:
                value = value_type.model_validate(stored.value)
            except ValueError:  # pydantic's ValidationError: a wrong-shape entry is a miss, never trusted
                continue
            expires_at = now_trio + (stored.expires_at - now_wall)
            entries[CacheKey(stored.method, "", stored.arm)] = CacheEntry(value, stored.scope, expires_at)
        identity = record.identity if entries else None
        self.loaded[server] = identity
        logger.debug("server=%s %d catalog entries from disk (%s)", server, len(entries), identity or "anonymous")
        return identity

    def changed(self, server: str) -> None:
        """``server``'s store (or the identity on record) changed: its file is written soon."""
        if server in self._entries:
            self._dirty.add(server)
            self._wake.set()

    async def run(self) -> None:
        """Write each dirty server's file, coalesced, until cancelled; then the last ones (shielded, bounded)."""
        try:
            while True:
                await self._wake.wait()
                await trio.sleep(COALESCE_SEC)
                self._wake = trio.Event()
                await self._flush()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(STOP_FLUSH_SEC):
                await self._flush()

    async def _flush(self) -> None:
        records = [self._record(server) for server in sorted(self._dirty)]
        self._dirty.clear()
        if records:
            await trio.to_thread.run_sync(self._write_all, records)

    def _write_all(self, records: list[ServerRecord]) -> None:
        for record in records:
            self.files.write_server(record)
            self.writes += 1

    def _record(self, server: str) -> ServerRecord:
        """The server's store as it is now, with wall-clock expiries (synchronous: one consistent picture)."""
        now_trio, now_wall = trio.current_time(), time.time()
        stored = tuple(
            StoredEntry(key.method, key.partition, entry.scope, now_wall + (entry.expires_at - now_trio), _dump(entry))
            for key, entry in self._entries[server].items()
            if key.method in _RESULT_TYPES and key.params_key == "" and entry.expires_at is not None
            if entry.expires_at > now_trio
        )
        return ServerRecord(server, self._targets[server], self._identity_of(server), stored)


def _dump(entry: CacheEntry) -> dict[str, Any]:
    value: dict[str, Any] = entry.value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value
