"""The fleet catalog store against a real Redis server (DESIGN I14): scripts, epoch, lifetimes, breaker.

Every test here talks to a real server (``tests/fleet/redis_server.py``); nothing mocks
Redis. Several "sidecars" are several ``FleetStore`` / ``CatalogCache`` objects
in this process, each with its own client and origin, as two processes would
have. Each test gets its own key prefix, so they share the session's server;
the tests that kill, pause or flush a server start their own.
"""

from __future__ import annotations

import itertools
import logging
import random
import uuid
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing
from coredis.connection._uds import UnixDomainSocketConnection, UnixDomainSocketLocation
from mcp.client.caching import CacheEntry, CacheKey
from pydantic import SecretStr

from supervisor.catalog.cache import TOOLS_LIST, CatalogCache
from supervisor.compat.coredis import CONNECTION_STREAMS
from supervisor.config.models import CatalogStoreSettings
from supervisor.config.servers import ServerSettings
from supervisor.errors import CatalogStoreUnavailable
from supervisor.fleet.scripts import target_id
from supervisor.fleet.store import Capture, FleetStore
from tests.fleet.redis_server import RedisServer
from tests.sidecar import scaled

pytestmark = pytest.mark.e2e  # a real Redis server process

IDENTITY = "fixture@1.0.0"
VIRTUAL_BOUND_SEC = 60.0
"""A bound on the virtual clock (autojump): machine load does not stretch it, so it is not scaled."""
TARGET = target_id("http://127.0.0.1:1/mcp#headers=x")


def store_settings(url: str, *, prefix: str | None = None, timeout_ms: int = 500) -> CatalogStoreSettings:
    return CatalogStoreSettings(
        backend="redis",
        url=SecretStr(url),
        key_prefix=prefix or f"t-{uuid.uuid4().hex[:12]}",
        operation_timeout_ms=timeout_ms,
    )


def listing(*names: str) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(name=n, input_schema={"type": "object"}) for n in names])


def payload(*names: str) -> str:
    value = listing(*names).model_dump_json(by_alias=True)
    return f'{{"v":{value},"s":"private","i":"{IDENTITY}"}}'


async def test_an_eviction_racing_an_in_flight_fetch_on_another_sidecar_leaves_nothing_readable(
    shared_redis: RedisServer,
) -> None:
    """I14/I7 in Redis: a write captured before an eviction never becomes readable, even a cancelled one.

    Randomized: each round, sidecar A captures the generation (its fetch starts),
    then A's write and sidecar B's eviction race with random head starts, and A's
    write is often cancelled mid-flight (a cancelled write may still land). Rounds
    whose eviction came after A's capture must leave nothing readable, now and
    after every other round has run (a late write has had every chance to land).
    """
    rng = random.Random(1234)
    settings = store_settings(shared_redis.url)
    a, b, reader = (FleetStore(settings, origin=o) for o in ("a", "b", "reader"))
    raced: list[str] = []
    with trio.fail_after(scaled(60)):
        async with trio.open_nursery() as nursery:
            for store in (a, b, reader):
                await nursery.start(store.run)

            async def write(method: str, capture: Capture) -> None:
                with trio.move_on_after(rng.choice([0, 0.0002, 0.001, 1.0])):
                    await trio.sleep(rng.uniform(0, 0.002))
                    await a.write(TARGET, method, "arm", capture, payload=payload("v1"), px_ms=60_000)

            async def evict(method: str, results: list[int]) -> None:
                await trio.sleep(rng.uniform(0, 0.002))
                results.append(await b.evict(TARGET, method, lock_px_ms=1000))

            for round_ in range(300):
                method = f"tools/list#{round_}"
                capture = await a.prepare(TARGET, method)
                evicted: list[int] = []
                async with trio.open_nursery() as race:
                    race.start_soon(write, method, capture)
                    race.start_soon(evict, method, evicted)
                assert evicted[0] > capture.generation
                raced.append(method)
                found = await reader.read(TARGET, method, "arm")
                assert found.payload is None, f"round {round_}: a write captured before the eviction is readable"
            for method in raced:
                found = await reader.read(TARGET, method, "arm")
                assert found.payload is None, f"{method}: a late write landed after the eviction"
            nursery.cancel_scope.cancel()


async def test_a_write_whose_generation_is_unchanged_is_readable_with_its_remaining_lifetime(
    shared_redis: RedisServer,
) -> None:
    """The control case of the race test, and PTTL-relative lifetimes: PX is what is left, read back as PTTL."""
    settings = store_settings(shared_redis.url)
    a, reader = FleetStore(settings, origin="a"), FleetStore(settings, origin="reader")
    with trio.fail_after(scaled(10)):
        async with trio.open_nursery() as nursery:
            await nursery.start(a.run)
            await nursery.start(reader.run)
            capture = await a.prepare(TARGET, TOOLS_LIST)
            assert await a.write(TARGET, TOOLS_LIST, "arm", capture, payload=payload("v1"), px_ms=30_000)
            found = await reader.read(TARGET, TOOLS_LIST, "arm")
            assert found.payload is not None and found.payload.startswith(f"{capture.epoch}|{capture.generation}|")
            assert 0 < found.pttl_ms <= 30_000
            nursery.cancel_scope.cancel()


def _server(name: str = "srv", url: str = "http://127.0.0.1:1/mcp") -> ServerSettings:
    return ServerSettings(name=name, url=url)


async def _fetch(cache: CatalogCache, server: ServerSettings, identity: str, result: types.ListToolsResult) -> bool:
    """What one sync's tools/list does to the cache: prepare, look up (use), write on a miss; True on a hit."""
    config = cache.config_for(server)
    assert config.store is not None
    await cache.prepare_fetch(server.name, TOOLS_LIST, "use", identity)
    ticket = cache.begin_fetch(server.name, "use")
    key = CacheKey(TOOLS_LIST, "", f'["private", "2026-07-28", "{server.target}", "{config.partition}"]')
    hit = await config.store.get(key)
    if hit is None or hit.expires_at is None or hit.expires_at <= trio.current_time():
        await config.store.set(key, CacheEntry(result, "private", trio.current_time() + 60))
        hit = None
    cache.finish_fetch(ticket, identity)
    return hit is not None


async def _drained(cache: CatalogCache) -> None:
    assert cache.fleet is not None
    await cache.fleet.wait_outbox_drained()


async def test_a_cold_cache_reuses_another_sidecars_entry_only_under_the_same_principal_and_identity(
    shared_redis: RedisServer,
) -> None:
    """I6 across the fleet: the writer's identity lives next to the entry; the principal is in the key."""
    settings = store_settings(shared_redis.url)
    server = _server()
    writer = CatalogCache(principal="team-a", store=settings)
    same = CatalogCache(principal="team-a", store=settings)
    other_principal = CatalogCache(principal="team-b", store=settings)
    other_version = CatalogCache(principal="team-a", store=settings)
    with trio.fail_after(scaled(10)):
        async with trio.open_nursery() as nursery:
            for cache in (writer, same, other_principal, other_version):
                await nursery.start(cache.run)
            assert not await _fetch(writer, server, IDENTITY, listing("echo"))
            await _drained(writer)
            assert await _fetch(same, server, IDENTITY, listing("other"))
            assert not await _fetch(other_principal, server, IDENTITY, listing("echo"))
            assert not await _fetch(other_version, server, "fixture@2.0.0", listing("echo"))
            assert same.store_status()["fleet_hits"] == 1
            nursery.cancel_scope.cancel()


async def test_a_flushed_store_never_serves_an_entry_written_before_the_flush(own_redis: RedisServer) -> None:
    """The epoch rule: a write captured before FLUSHALL lands after it, and is still never trusted."""
    settings = store_settings(own_redis.url)
    a, reader = FleetStore(settings, origin="a"), FleetStore(settings, origin="reader")
    with trio.fail_after(scaled(10)):
        async with trio.open_nursery() as nursery:
            await nursery.start(a.run)
            await nursery.start(reader.run)
            capture = await a.prepare(TARGET, TOOLS_LIST)
            assert own_redis.command("FLUSHALL").startswith(b"+OK")
            # The late write finds no epoch (or a new one) and is refused ...
            assert not await a.write(TARGET, TOOLS_LIST, "arm", capture, payload=payload("old"), px_ms=30_000)
            # ... and an entry forced in under the old epoch (a restored snapshot) is never trusted.
            keys = a.keys(TARGET)
            old = f"{capture.epoch}|{capture.generation}|{payload('old')}"
            own_redis.command("SET", keys.entry(TOOLS_LIST, "arm"), _quote(old), "PX", "30000")
            found = await reader.read(TARGET, TOOLS_LIST, "arm")
            assert found.capture.epoch != capture.epoch
            cache = CatalogCache(principal="p", store=settings)
            await nursery.start(cache.run)
            assert cache.fleet is not None
            assert await cache.fleet.read((TARGET, TOOLS_LIST), "arm", IDENTITY) is None
            nursery.cancel_scope.cancel()


def _script_calls(server: RedisServer) -> int:
    """How many EVALSHA/EVAL commands the server has processed (INFO commandstats)."""
    total = 0
    for line in server.command("INFO", "commandstats").decode().splitlines():
        if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
            total += int(line.split("calls=")[1].split(",")[0])
    return total


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def test_a_paused_store_costs_a_sync_one_operation_timeout_then_the_breaker_answers_at_once(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """CLIENT PAUSE: the first call gives up after operation_timeout_ms, the next fail fast; one warning."""
    settings = store_settings(own_redis.url, timeout_ms=200)
    store = FleetStore(settings, origin="a")
    caplog.set_level(logging.INFO, logger="supervisor.fleet.store")
    with trio.fail_after(scaled(20)):
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run)
            assert store.state == "up"
            await store.prepare(TARGET, TOOLS_LIST)
            before = _script_calls(own_redis)
            own_redis.command("CLIENT", "PAUSE", "3000", "ALL")
            started = trio.current_time()
            with pytest.raises(CatalogStoreUnavailable):
                await store.prepare(TARGET, TOOLS_LIST)
            first = trio.current_time() - started
            started = trio.current_time()
            for _ in range(20):
                with pytest.raises(CatalogStoreUnavailable):
                    await store.prepare(TARGET, TOOLS_LIST)
            state: str = store.state
            assert state == "down"
            rest_ms = (trio.current_time() - started) * 1000
            print(f"paused: first call {first * 1000:.0f} ms, then 20 calls in {rest_ms:.1f} ms")
            await store.wait_up()  # the prober closes the breaker once the pause ends
            await store.prepare(TARGET, TOOLS_LIST)
            # Only the first call (held by the pause) and the last reached Redis: the breaker answered the rest.
            assert _script_calls(own_redis) - before <= 2
            nursery.cancel_scope.cancel()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


async def test_a_wrong_password_is_one_warning_and_a_store_state_that_never_shows_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A wrong password at run time: state down, reason says so, one warning, the password nowhere."""
    server = RedisServer(password="right-one")
    server.start()
    try:
        wrong = server.url.replace("right-one", "s3cret-wrong")
        settings = store_settings(wrong)
        cache = CatalogCache(principal="p", store=settings)
        caplog.set_level(logging.DEBUG)
        with trio.fail_after(scaled(10)):
            async with trio.open_nursery() as nursery:
                await nursery.start(cache.run)
                assert cache.fleet is not None
                for _ in range(5):
                    await cache.prepare_fetch("srv", TOOLS_LIST, "use", IDENTITY)
                status: dict[str, Any] = cache.store_status()
                nursery.cancel_scope.cancel()
    finally:
        server.cleanup()
    assert status["state"] == "down"
    assert "password" in str(status["reason"]), status
    text = repr(status) + "\n".join(r.getMessage() for r in caplog.records)
    assert "s3cret-wrong" not in text
    assert "***" in str(status["url"])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


async def test_the_breaker_probes_an_unreachable_store_with_doubling_delays_and_warns_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Virtual clock: probes at 0, then 0.1, 0.2, 0.4 … s apart up to 5 s; calls fail at once meanwhile."""
    settings = store_settings(f"unix://{tmp_path}/nothing-listens-here.sock")
    store = FleetStore(settings, origin="a")
    caplog.set_level(logging.INFO, logger="supervisor.fleet.store")
    with trio.fail_after(VIRTUAL_BOUND_SEC):
        async with trio.open_nursery() as nursery:
            start = trio.current_time()
            await nursery.start(store.run)
            state: str = store.state
            assert state == "down"
            await trio.sleep(20)
            before = trio.current_time()
            with pytest.raises(CatalogStoreUnavailable):
                await store.prepare(TARGET, TOOLS_LIST)
            assert trio.current_time() == before  # the open breaker answers without waiting
            nursery.cancel_scope.cancel()
    gaps = [round(b - a, 3) for a, b in itertools.pairwise([start, *store.probe_times])]
    assert gaps == [0.0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0], gaps
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_coredis_connections_still_carry_the_buffers_the_compat_patch_closes() -> None:
    """The compat module's assumption: a coredis connection holds these six memory streams."""
    connection = UnixDomainSocketConnection(UnixDomainSocketLocation("/nonexistent.sock"))
    try:
        for name in CONNECTION_STREAMS:
            assert hasattr(getattr(connection, name), "close"), name
    finally:
        for name in CONNECTION_STREAMS:
            getattr(connection, name).close()


async def test_the_relist_lock_goes_to_the_evicting_sidecar_and_only_a_newer_generation_takes_it_over(
    shared_redis: RedisServer,
) -> None:
    """At most one sidecar re-lists per (target, generation); one lock key per (target, method) (Cluster-safe)."""
    settings = store_settings(shared_redis.url)
    a, b = (FleetStore(settings, origin=o) for o in ("a", "b"))
    with trio.fail_after(scaled(20)):
        async with trio.open_nursery() as nursery:
            for store in (a, b):
                await nursery.start(store.run)
            first = await a.evict(TARGET, TOOLS_LIST, lock_px_ms=60_000)
            assert not await b.try_lock(TARGET, TOOLS_LIST, first, 60_000)  # a evicted: a re-lists
            assert not await a.try_lock(TARGET, TOOLS_LIST, first - 1, 60_000)  # an older generation never
            assert await b.try_lock(TARGET, TOOLS_LIST, first + 1, 60_000)  # a newer one takes it over
            assert not await a.try_lock(TARGET, TOOLS_LIST, first + 1, 60_000)  # once
            second = await a.evict(TARGET, TOOLS_LIST, lock_px_ms=60_000)
            assert second == first + 1
            assert await b.try_lock(TARGET, TOOLS_LIST, second + 1, 60_000)
            nursery.cancel_scope.cancel()
