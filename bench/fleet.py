"""p3: a fleet of 50 stdio servers x 100 tools each, against one server.

Each round starts ``python -m supervisor run`` for 1 server, then for 50 servers (every
server a fixture with ``--tools echo --extra-tools 99``: 100 tools), and times from the
sidecar's spawn until the host's ``tools/list`` (``cache_mode="bypass"``, re-listed on
every change notice) shows every tool. With the fleet ready it records the sidecar's
own RSS (VmRSS, children excluded) and the p50 of ~20 host ``tools/list`` calls.

Every sidecar is stopped by closing its stdin (it stops its children); leftovers that
carry the run's marker are killed and reported.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Final

import trio

from bench.harness import (
    BENCH_MARK_ENV,
    bench_mark,
    fixture_server,
    median,
    open_host,
    percentile,
    reap_marked,
    rss_mb,
    sidecar_argv,
    write_settings,
)

TOOLS_PER_SERVER: Final = 100
READY_BOUND_SEC: Final = 180.0
LISTS: Final = 20


def _config(workdir: Path, servers: int) -> Path:
    table = fixture_server(
        "--tools", "echo", "--extra-tools", str(TOOLS_PER_SERVER - 1), env={BENCH_MARK_ENV: bench_mark()}
    )  # fmt: skip
    return write_settings(
        workdir / f"fleet{servers}.toml",
        {f"s{i:02d}": table for i in range(servers)},
        supervisor={"log_level": "warning"},
        # Measure the fleet's cold start, not the default startup bound on a loaded 2-core box.
        defaults={"startup_timeout_sec": READY_BOUND_SEC},
    )


async def _one(workdir: Path, servers: int, *, measure: bool) -> dict[str, float]:
    expected = servers * TOOLS_PER_SERVER
    config = _config(workdir, servers)
    out: dict[str, float] = {}
    try:
        start = trio.current_time()
        async with open_host(sidecar_argv(config), mode="auto") as host:
            names = await host.wait_tools(lambda n: len(n) >= expected, bound_sec=READY_BOUND_SEC, poll_sec=0.1)
            if names is None:
                raise RuntimeError(f"{servers} servers: the host never saw {expected} tools")
            out["ready_sec"] = trio.current_time() - start
            if measure:
                out["rss_mb"] = rss_mb(host.process.pid)
                samples: list[float] = []
                for _ in range(LISTS):
                    t0 = trio.current_time()
                    listed = len((await host.session.list_tools(cache_mode="bypass")).tools)
                    samples.append(trio.current_time() - t0)
                    if listed != expected:
                        raise RuntimeError(f"listed {listed} tools, expected {expected}")
                out["list_ms_p50"] = percentile(samples, 0.5) * 1000
                out["list_ms_max"] = max(samples) * 1000
    finally:
        await reap_marked(f"p3 ({servers} servers)")
    return out


async def run(*, quick: bool) -> dict[str, Any]:
    # 50 cold Python children take ~30 s on 2 cores: too much for --quick's 60 s budget.
    rounds, fleet = (1, 5) if quick else (3, 50)
    print(f"p3 fleet: {fleet} stdio servers x {TOOLS_PER_SERVER} tools vs 1 server; {rounds} round(s)")
    one: list[dict[str, float]] = []
    many: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            one.append(await _one(Path(tmp), 1, measure=False))
            many.append(await _one(Path(tmp), fleet, measure=True))
    ready_1 = median([r["ready_sec"] for r in one])
    ready_50 = median([r["ready_sec"] for r in many])
    result: dict[str, Any] = {
        "p3_fleet_servers": fleet,
        "p3_ready_sec_1": round(ready_1, 3),
        "p3_ready_sec_50": round(ready_50, 3),
        "p3_ready_ratio_50_vs_1": round(ready_50 / ready_1, 3),
        "p3_list_ms_p50": round(median([r["list_ms_p50"] for r in many]), 2),
        "p3_list_ms_max": round(max(r["list_ms_max"] for r in many), 2),
        "p3_rss_mb": round(median([r["rss_mb"] for r in many]), 1),
    }
    print(f"  ready: 1 server {ready_1:.2f} s, {fleet} servers {ready_50:.2f} s")
    if fleet != 50:
        print(f"  NOTE: --quick runs a {fleet}-server fleet; the p3_*_50 keys hold its numbers")
    print(f"  ratio {fleet}/1: {result['p3_ready_ratio_50_vs_1']} (target <= 1.5)")
    print(f"  host tools/list with {fleet * TOOLS_PER_SERVER} tools: p50 {result['p3_list_ms_p50']} ms (target <= 50)")
    print(f"  sidecar RSS (children excluded): {result['p3_rss_mb']} MB (target <= 200)")
    return result
