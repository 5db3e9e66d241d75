"""The cache actor's disk side (issue 57): a fresh sidecar's cache starts from the files, under the reconnect's rules.

In process, on the real clock (the writes run in a worker thread, which a virtual
clock would jump past): a ``CatalogCache`` with the file backend
writes each store's state to its file (coalesced, in a worker thread), and a
second one, standing for the next start, loads it when the server's first
generation is configured. What holds in memory holds across the start (I4-I7):
the lifetime, the identity, the principal partition, and an eviction that wins.
"""

from __future__ import annotations

import json
import time

import mcp_types as types
import pytest
import trio
from mcp.client.caching import CacheEntry, CacheKey

from supervisor.catalog.cache import CatalogCache
from supervisor.config.models import CatalogStoreSettings
from supervisor.config.servers import ServerSettings
from tests.sidecar import wait_until

BOUND_SEC = 10.0
SERVER = ServerSettings(name="demo", command="python", args=["-m", "demo"])
ARM = '["private","2025-11-25","stdio","local"]'


def _cache(principal: str = "local") -> CatalogCache:
    return CatalogCache(principal=principal, store=CatalogStoreSettings(backend="file"))


async def _listed(cache: CatalogCache, ttl_sec: float, *names: str) -> None:
    """What a first sync's ``refresh`` leaves in the store: one fresh ``tools/list`` entry, written by ``demo@1``."""
    config = cache.config_for(SERVER)
    assert config.store is not None
    ticket = cache.begin_fetch("demo", "refresh")
    listing = types.ListToolsResult(tools=[types.Tool(name=n, input_schema={"type": "object"}) for n in names])
    await config.store.set(
        CacheKey("tools/list", "", ARM), CacheEntry(listing, "private", trio.current_time() + ttl_sec)
    )
    assert cache.finish_fetch(ticket, "demo@1")


async def _written(cache: CatalogCache, writes: int) -> None:
    """Until the mirror has written ``writes`` files in all (it coalesces changes, then writes in a thread)."""
    disk = cache.disk
    assert disk is not None
    await wait_until(lambda: disk.writes >= writes, what=f"{writes} file write(s)", bound_sec=BOUND_SEC)


async def test_the_next_start_reuses_a_fresh_catalog_from_disk_for_the_same_identity_only() -> None:
    with trio.fail_after(BOUND_SEC):
        first = _cache()
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            await _listed(first, 300, "echo", "add")
            await _written(first, 1)
            nursery.cancel_scope.cancel()
        assert first.disk is not None and first.disk.writes >= 1
        document = json.loads(first.disk.files.server_path("demo").read_text())
        assert document["identity"] == "demo@1"

        later = _cache()
        assert later.first_sync_mode == "use"
        config = later.config_for(SERVER)
        assert config.store is not None
        entry = await config.store.get(CacheKey("tools/list", "", ARM))
        assert entry is not None and [t.name for t in entry.value.tools] == ["echo", "add"]
        assert entry.expires_at is not None and 299 < entry.expires_at - trio.current_time() <= 300
        assert later.cache_mode_for("demo", "use", "demo@1") == "use"
        assert later.cache_mode_for("demo", "use", "demo@2") == "refresh", "another version is re-listed (I6)"


async def test_another_principal_finds_nothing_and_a_catalog_past_its_lifetime_is_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with trio.fail_after(BOUND_SEC):
        first = _cache()
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            await _listed(first, 10, "echo")
            await _written(first, 1)
            nursery.cancel_scope.cancel()
        other = _cache("team")
        other.config_for(SERVER)
        assert other.disk is not None and other.disk.loaded == {"demo": None}
        assert other.cache_mode_for("demo", "use", "demo@1") == "refresh"
        # Eleven seconds later (a file keeps wall time): the 10 s entry is not loaded, and the start re-lists.
        later_wall = time.time() + 11
        monkeypatch.setattr(time, "time", lambda: later_wall)  # the files read wall time
        later = _cache()
        later.config_for(SERVER)
        assert later.disk is not None and later.disk.loaded == {"demo": None}
        assert later.fresh_until("demo", "tools/list") is None
        assert later.cache_mode_for("demo", "use", "demo@1") == "refresh"


async def test_an_eviction_reaches_the_file_so_the_next_start_relists() -> None:
    with trio.fail_after(BOUND_SEC):
        first = _cache()
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            await _listed(first, 300, "echo")
            await _written(first, 1)
            first.evict("demo", "list_changed")
            await _written(first, 2)
            nursery.cancel_scope.cancel()
        assert first.disk is not None
        assert not first.disk.files.server_path("demo").exists()
        later = _cache()
        later.config_for(SERVER)
        assert later.cache_mode_for("demo", "use", "demo@1") == "refresh"


async def test_an_entry_that_is_no_longer_fresh_never_reaches_the_disk() -> None:
    # ttlMs 0: the SDK stores nothing, and what is not fresh by the time its store is written is left out (I5).
    with trio.fail_after(BOUND_SEC):
        first = _cache()
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            await _listed(first, 0, "echo")
            await _written(first, 1)
            nursery.cancel_scope.cancel()
        assert first.disk is not None
        assert not first.disk.files.server_path("demo").exists()
