"""p1: catalog reuse across reconnects (DESIGN I4).

One handshake-era fixture server whose ``tools/list`` takes 500 ms is killed and
reconnected N times, in-process through a real ServerActor. Two variants
alternate round by round: ``reuse`` (the default ``catalog_reuse_ttl_ms``) and
``refresh`` (``catalog_reuse_ttl_ms = 0``). Measured per reconnect: time from
transport-up (handshake done) to tools-usable (first sync swapped in), and the
``tools/list`` requests the server's later processes received.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import trio

from bench.harness import fixture_server, median, write_settings
from supervisor.catalog.cache import CatalogCache
from supervisor.catalog.registry import Registry
from supervisor.config.loader import load_settings
from supervisor.ops.status import ServerStatus
from supervisor.root import production_connector
from supervisor.server_actor import ServerActor

LIST_DELAY_SEC = 0.5


async def _one_round(workdir: Path, variant: str, reconnects: int) -> tuple[list[float], int]:
    log = workdir / f"{variant}.log"
    log.unlink(missing_ok=True)
    ttl = 300000 if variant == "reuse" else 0
    server = fixture_server(
        "--legacy-only", "--list-delay-sec", str(LIST_DELAY_SEC), "--tools", "echo,crash", "--log", str(log),
        reconnect={"initial_delay_ms": 10, "max_delay_ms": 20, "jitter": 0, "max_attempts": 100,
                   "catalog_reuse_ttl_ms": ttl},
    )  # fmt: skip
    settings = load_settings(write_settings(workdir / f"{variant}.toml", {"fx": server}))
    ready = trio.Event()
    usable_after: list[float] = []

    def on_status(status: ServerStatus) -> None:
        nonlocal ready
        if status.state == "ready" and status.connected_at is not None and status.ready_at is not None:
            usable_after.append(status.ready_at - status.connected_at)
            ready.set()

    cache = CatalogCache(principal="bench")
    actor = ServerActor(
        settings.mcp_servers["fx"],
        Registry(),
        connector=production_connector(cache, None),
        cache=cache,
        on_status=on_status,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        with trio.fail_after(30):
            await ready.wait()
        for _ in range(reconnects):
            ready = trio.Event()
            # The process dies under the call; any error is expected.
            with contextlib.suppress(Exception):
                await actor.call_tool("crash", {})
            with trio.fail_after(30):
                await ready.wait()
        nursery.cancel_scope.cancel()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    first_pid = next(e["pid"] for e in events if e["event"] == "start")
    later_lists = sum(
        1 for e in events if e.get("method") == "tools/list" and e["event"] == "request" and e["pid"] != first_pid
    )
    return usable_after[1:], later_lists


async def run(*, quick: bool) -> dict[str, Any]:
    rounds, reconnects = (2, 3) if quick else (4, 5)
    samples: dict[str, list[float]] = {"reuse": [], "refresh": []}
    lists: dict[str, int] = {"reuse": 0, "refresh": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for variant in ("reuse", "refresh"):
                usable, later_lists = await _one_round(Path(tmp), variant, reconnects)
                samples[variant].extend(usable)
                lists[variant] += later_lists
    reuse_ms = median(samples["reuse"]) * 1000
    refresh_ms = median(samples["refresh"]) * 1000
    print(f"p1 reconnect: transport-up -> tools-usable, {rounds} rounds x {reconnects} reconnects, list delay 500 ms")
    print(f"  reuse   median {reuse_ms:8.1f} ms   tools/list after reconnects: {lists['reuse']}")
    print(f"  refresh median {refresh_ms:8.1f} ms   tools/list after reconnects: {lists['refresh']}")
    print(f"  ratio reuse/refresh: {reuse_ms / refresh_ms:.3f} (target <= 0.2)")
    return {
        "p1_tools_list_requests": lists["reuse"],
        "p1_tools_list_requests_refresh": lists["refresh"],
        "p1_usable_ms_reuse": round(reuse_ms, 2),
        "p1_usable_ms_refresh": round(refresh_ms, 2),
        "p1_ratio_reuse_vs_refresh": round(reuse_ms / refresh_ms, 4),
    }
