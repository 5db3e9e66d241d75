"""p2's measuring primitives (``bench.call_path``, ``bench.call_pairs``): warm-up, c1 in turns, c32, 1 MB calls.

Each takes connected hosts (``tests.sidecar.Host``) keyed by variant and runs in the
caller's task; the c32 window opens its own nursery of callers and closes it before it
returns. Nothing here starts or stops a process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

import trio

from tests.sidecar import Host

CONCURRENCY: Final = 32
LARGE_TEXT: Final = "x" * 1_000_000
"""The 1 MB argument (echoed back as the result) of the large-result calls."""
TOOL: Final = {
    "direct": "echo",
    "sidecar": "mcp__fx__echo",
    "fastmcp": "echo",
    "relay": "echo",
    "relay_checked": "echo",
    "relay_ahead": "echo",
}
"""Each variant's name for the fixture's echo tool (the relays of ``bench.relay_floor`` pass names through)."""
PROGRESS_ENV: Final = "BENCH_P2_PROGRESS"
"""``1``: every measured call of every variant carries a progress token (issue 47: what a token costs a call;
the echo tool reports no progress, so this is the cost of carrying one, not of forwarding notices)."""


async def _no_progress(progress: float, total: float | None, message: str | None) -> None:
    del progress, total, message


PROGRESS_OPTIONS: Final[dict[str, Any]] = {"progress_callback": _no_progress}
CALL_OPTIONS: Final[dict[str, Any]] = PROGRESS_OPTIONS if os.environ.get(PROGRESS_ENV) == "1" else {}
"""What each measured call passes to ``call_tool`` besides its name and arguments (``PROGRESS_ENV``)."""


async def _warm_up(host: Host, tool: str) -> None:
    names = await host.tool_names()
    if tool not in names:
        raise RuntimeError(f"{tool!r} is not listed: {names}")
    for _ in range(20):
        await host.session.call_tool(tool, {"text": "warm"})


async def _measure_c1_interleaved(hosts: dict[str, Host], calls: int, text: str = "x") -> dict[str, list[float]]:
    """``calls`` sequential calls per variant, the variants taking turns call by call (rotating who goes first).

    The added latency at c1 is a difference of two medians of about a millisecond;
    measured in separate windows seconds apart, it moved with the box's load
    between the windows (p50s of the same code 0.04 ms and 0.73 ms apart in two
    runs). Taking turns puts both variants under the same load, call by call.
    """
    variants = list(hosts)
    latencies: dict[str, list[float]] = {v: [] for v in variants}
    for i in range(calls):
        for variant in variants[i % len(variants) :] + variants[: i % len(variants)]:
            t0 = trio.current_time()
            result = await hosts[variant].session.call_tool(TOOL[variant], {"text": text}, **CALL_OPTIONS)
            latencies[variant].append(trio.current_time() - t0)
            if result.is_error:
                raise RuntimeError(f"{TOOL[variant]} failed: {result}")
    return latencies


async def _measure_large(host: Host, tool: str, calls: int) -> float:
    start = trio.current_time()
    for _ in range(calls):
        result = await host.session.call_tool(tool, {"text": LARGE_TEXT}, **CALL_OPTIONS)
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result}")
    return calls / (trio.current_time() - start)


async def _measure_concurrent(
    host: Host, tool: str, calls: int, concurrency: int, options: dict[str, Any] | None = None
) -> float:
    """Calls per second, ``calls`` of ``tool`` made ``concurrency`` at a time (``options``: ``CALL_OPTIONS``)."""
    remaining = calls
    options = CALL_OPTIONS if options is None else options

    async def caller() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1  # no await between check and decrement: atomic under trio
            result = await host.session.call_tool(tool, {"text": "x"}, **options)
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result}")

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(caller)
    return calls / (trio.current_time() - start)


def _log_summary(log: Path) -> dict[str, int]:
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    counts: dict[str, int] = {"starts": sum(e["event"] == "start" for e in events)}
    for e in events:
        if e["event"] == "request":
            counts[e["method"]] = counts.get(e["method"], 0) + 1
    return counts
