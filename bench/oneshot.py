"""``python -m bench.oneshot``: a one-shot host's time from spawn to first answer, sidecar against direct (issue 31).

A one-shot host (a CLI inspector, a ``-p``-style agent run, a script) spawns
its server, sends one request and exits, so what it waits for is the start.
Each round spawns a fresh process pair and times, from the spawn, the
handshake and one request (``tools/call``, ``prompts/get``, ``resources/read``)
to its answer:

* **direct**: the host spawns the fidelity fixture server itself;
* **sidecar**: the host spawns ``python -m supervisor run`` over that server.

Both with a fast server and a slow-starting one (started behind ``sleep``). The
two take turns round by round; the figures are medians, in ms, with the
ratio sidecar / direct. Where the sidecar's own part goes is measured apart,
in the same sitting: the interpreter's start (``python -c pass``), the
sidecar's imports up to the host's first answer (``python -m supervisor
--version``), and, from the sidecar's own log, the spawn of the server and
the first listing (its ``started`` and ``ready`` lines).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import mcp_types as types
import trio

from bench.harness import REPO_ROOT, fixture_argv, fixture_server, open_host, sidecar_argv, write_settings

ROUND_BOUND_SEC: Final = 60.0
SLOW_START_SEC: Final = 1.0
REQUESTS: Final[dict[str, Callable[[Any], Awaitable[Any]]]] = {
    "tools/call": lambda c: c.call_tool("mcp__fx__echo", {"text": "hi"}),
    "prompts/get": lambda c: c.get_prompt("mcp__fx__greet", {"name": "Ada"}),
    "resources/read": lambda c: c.read_resource("fixture://static/hello", cache_mode="bypass"),
}
DIRECT_REQUESTS: Final[dict[str, Callable[[Any], Awaitable[Any]]]] = {
    "tools/call": lambda c: c.call_tool("echo", {"text": "hi"}),
    "prompts/get": lambda c: c.get_prompt("greet", {"name": "Ada"}),
    "resources/read": lambda c: c.read_resource("fixture://static/hello", cache_mode="bypass"),
}
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _slow(delay_sec: float, argv: list[str]) -> list[str]:
    """``argv`` started ``delay_sec`` late (a server slow to start: an interpreter, a JVM, an ``npx`` fetch)."""
    if delay_sec <= 0:
        return argv
    return ["sh", "-c", f'sleep {delay_sec:g} && exec "$@"', "sh", *argv]


async def _one(argv: list[str], request: Callable[[Any], Awaitable[Any]]) -> float:
    """Seconds from spawning ``argv`` to the answer of its first request (after the handshake)."""
    started = time.perf_counter()
    with trio.fail_after(ROUND_BOUND_SEC):
        async with open_host(argv, listen=False) as host:
            result = await request(host.session)
            took = time.perf_counter() - started
    if isinstance(result, types.CallToolResult) and result.is_error:
        raise RuntimeError(f"{argv}: the call failed: {result}")
    return took


def _process_ms(argv: list[str], rounds: int) -> float:
    """Median wall time of a short-lived process, in ms."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=REPO_ROOT)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _log_phases_ms(config: Path) -> dict[str, float]:
    """From one sidecar run's own log: process start to the server's spawn, and the spawn to its first listing."""
    started = time.perf_counter()
    wall_start = datetime.now()
    proc = subprocess.Popen(
        sidecar_argv(config), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO_ROOT
    )
    assert proc.stderr is not None and proc.stdin is not None
    stamps: dict[str, datetime] = {}
    for raw in proc.stderr:
        line = raw.decode(errors="replace")
        match = _STAMP.match(line)
        if match is None:
            continue
        at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
        if "pid=" in line and "started" in line and "spawn" not in stamps:
            stamps["spawn"] = at
        if "generation=1 ready" in line:
            stamps["ready"] = at
            break
        if time.perf_counter() - started > ROUND_BOUND_SEC:
            break
    proc.stdin.close()
    proc.wait(timeout=ROUND_BOUND_SEC)
    if {"spawn", "ready"} - stamps.keys():
        return {}
    return {
        "start_to_spawn_ms": (stamps["spawn"] - wall_start).total_seconds() * 1000,
        "spawn_to_first_listing_ms": (stamps["ready"] - stamps["spawn"]).total_seconds() * 1000,
    }


async def _measure(rounds: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for speed, delay in (("fast", 0.0), ("slow", SLOW_START_SEC)):
            server_argv = _slow(delay, fixture_argv("--fidelity", "--name", "fx"))
            config = write_settings(
                Path(tmp) / f"{speed}.toml",
                {"fx": {"command": server_argv[0], "args": server_argv[1:], "cwd": str(REPO_ROOT)}},
                supervisor={"log_level": "error"},
            )
            for name, request in REQUESTS.items():
                direct: list[float] = []
                sidecar: list[float] = []
                for index in range(rounds):  # take turns; who goes first alternates
                    pair = [
                        (direct, server_argv, DIRECT_REQUESTS[name]),
                        (sidecar, sidecar_argv(config), request),
                    ]
                    for times, argv, ask in pair if index % 2 == 0 else reversed(pair):
                        times.append(await _one(argv, ask))
                d_ms, s_ms = statistics.median(direct) * 1000, statistics.median(sidecar) * 1000
                results[f"{speed} {name}"] = {
                    "direct_ms": round(d_ms, 1),
                    "sidecar_ms": round(s_ms, 1),
                    "sidecar_extra_ms": round(s_ms - d_ms, 1),
                    "ratio": round(s_ms / d_ms, 3),
                }
        debug = write_settings(
            Path(tmp) / "phases.toml",
            {"fx": fixture_server("--fidelity", "--name", "fx")},
            supervisor={"log_level": "debug"},
        )
        phases = [_log_phases_ms(debug) for _ in range(max(3, rounds // 2))]
        phases = [p for p in phases if p]
    results["where the sidecar's time goes"] = {
        "interpreter_start_ms": round(_process_ms([sys.executable, "-c", "pass"], rounds), 1),
        "supervisor_version_ms (interpreter + cli import)": round(
            _process_ms([sys.executable, "-m", "supervisor", "--version"], rounds), 1
        ),
        "serve_imports_ms (interpreter + run's imports)": round(
            _process_ms([sys.executable, "-c", "import supervisor.serve"], rounds), 1
        ),
        **{
            key: round(statistics.median(p[key] for p in phases), 1)
            for key in ("start_to_spawn_ms", "spawn_to_first_listing_ms")
            if phases
        },
    }
    return results


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.oneshot", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds per request kind and speed (default 10)")
    args = parser.parse_args()
    results = trio.run(_measure, args.rounds)
    for key, figures in results.items():
        print(f"{key}: " + ", ".join(f"{name} {value}" for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
