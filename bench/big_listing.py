"""p6: a server that lists 100,000 tools, beside a healthy one (issue 9, I15).

``python -m bench.big_listing``. Two fixture servers behind ``python -m supervisor
run``: ``big`` lists 100,000 tools (over the default ``max_tools`` of 2,000) and
``ok`` answers ``echo``. For 20 s from the host's first successful call the host
calls ``mcp__ok__echo`` every 20 ms; printed are the worst and median call
latency and the sidecar's peak RSS (VmHWM). The big listing is refused from a
count before it is parsed, so neither should move.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Final

import trio

from bench.harness import fixture_server, median, open_host, reap_marked, sidecar_argv, write_settings

BIG_TOOLS: Final = 100_000
WATCH_SEC: Final = 20.0


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run(*, quick: bool = False) -> dict[str, Any]:
    watch = WATCH_SEC / 2 if quick else WATCH_SEC
    with tempfile.TemporaryDirectory() as tmp:
        servers = {
            "big": fixture_server("--name", "big", "--extra-tools", str(BIG_TOOLS), reconnect={"max_attempts": 1}),
            "ok": fixture_server("--name", "ok"),
        }
        config = write_settings(Path(tmp) / "settings.toml", servers)
        latencies: list[float] = []
        async with open_host(sidecar_argv(config), mode="legacy") as host:
            with trio.fail_after(60):
                await host.wait_tools(lambda names: "mcp__ok__echo" in names, bound_sec=60)
            end = trio.current_time() + watch
            while trio.current_time() < end:
                started = trio.current_time()
                await host.session.call_tool("mcp__ok__echo", {"text": "x"})
                latencies.append(trio.current_time() - started)
                await trio.sleep(0.02)
            peak = _peak_rss_mb(host.pid)
        await reap_marked("p6")
    return {
        "p6_calls": len(latencies),
        "p6_worst_echo_ms": round(max(latencies) * 1000, 1),
        "p6_median_echo_ms": round(median(latencies) * 1000, 2),
        "p6_sidecar_peak_rss_mb": round(peak, 1),
    }


if __name__ == "__main__":
    print(json.dumps(trio.run(run)))
