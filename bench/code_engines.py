"""Code-mode engines side by side: ``python -m bench.code_engines [--quick] [--escapes] [--json]``.

Three ways to run a model's program whose tool calls our trio process answers:

* ``monty-threads``: pydantic-monty's sync pool, its snapshot API driven from trio, each
  worker round trip in ``trio.to_thread.run_sync`` (``bench.code_engine_monty.MontyThreads``);
* ``monty-asyncio``: ``AsyncMonty`` through trio-asyncio (``MontyAsyncio``);
* ``deno``: one permissionless deno process, a fresh permissionless Worker per program,
  tool calls as JSON lines over its stdin/stdout (``bench.code_engine_deno``). JavaScript.

Measured for each: cold start (pool or process creation to the first result), the wall
time of a trivial run (p50/p90; Monty with and without its type check), the cost of one
inner tool call (100 sequential calls to a tool that answers at once, less an empty run),
20 gathered calls to a tool that sleeps 50 ms, a cancel mid-run (how long until the run
returns, whether the worker process dies and what serves the next run), the RSS of the
worker processes, and the threads and warnings left behind. ``--escapes`` also runs the
escape set (files, network, environment, processes, loops, memory, recursion, a large
result, many calls, calls never awaited) and prints one line per case.

Benchmarks print numbers and never assert them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

import pydantic_monty as pm
import trio
import trio_asyncio  # type: ignore[import-untyped]

from bench.code_engine_deno import DenoEngine, DenoProgramError, open_deno
from bench.code_engine_monty import (
    MontyAsyncio,
    MontyThreads,
    RunResult,
    ToolFailed,
    close_asyncio_pool,
    open_asyncio_pool,
)
from bench.code_engines_escapes import alive, children, rss_mib, run_escapes

STUBS: Final = {
    "demo": (
        "async def echo(text: str) -> str:\n"
        '    """Echo the text back."""\n'
        "    ...\n"
        "async def slow(sec: float) -> str:\n"
        '    """Sleep for sec seconds, then answer."""\n'
        "    ...\n"
        "async def fail(text: str) -> str:\n"
        '    """Always fails."""\n'
        "    ...\n"
    )
}
LIMITS: Final[pm.ResourceLimits] = {
    "max_feed_duration_secs": 5.0,
    "max_memory": 256 * 2**20,
    "max_suspensions": 100_000,
}


@dataclass(frozen=True, slots=True)
class Program:
    python: str
    js: str


TRIVIAL: Final = Program("1 + 1", "return 1 + 1")
ONE_CALL: Final = Program(
    "from tools import demo\nawait demo.echo(text='hi')", "return await tools.demo.echo({text: 'hi'})"
)
SEQUENTIAL_100: Final = Program(
    "from tools import demo\nfor i in range(100):\n    await demo.echo(text='x')\n'done'",
    "for (let i = 0; i < 100; i++) await tools.demo.echo({text: 'x'}); return 'done'",
)
GATHER_20: Final = Program(
    "from tools import demo\nimport asyncio\nawait asyncio.gather(*[demo.slow(sec=0.05) for i in range(20)])",
    "return await Promise.all(Array.from({length: 20}, () => tools.demo.slow({sec: 0.05})))",
)
ENDLESS: Final = Program("while True:\n    pass", "while (true) {}")
AWAIT_SLOW: Final = Program(
    "from tools import demo\nawait demo.slow(sec=60)", "return await tools.demo.slow({sec: 60})"
)


async def tool(server: str, name: str, args: dict[str, Any]) -> Any:
    """The host's tools: ``echo`` answers at once, ``slow`` sleeps, ``fail`` fails."""
    if name == "slow":
        await trio.sleep(float(args["sec"]))
        return "slept"
    if name == "fail":
        raise ToolFailed(f"tool {server}.{name} failed: {args.get('text')}")
    return args.get("text")


class Engine(Protocol):
    name: str

    async def run(self, program: Program, *, type_check: bool = False) -> RunResult: ...

    def worker_pids(self) -> list[int]: ...


class _Monty:
    def __init__(self, name: str, engine: MontyThreads | MontyAsyncio) -> None:
        self.name = name
        self._engine = engine

    async def run(self, program: Program, *, type_check: bool = False) -> RunResult:
        return await self._engine.run(program.python, tool, limits=LIMITS, type_check=type_check)

    def worker_pids(self) -> list[int]:
        return children("monty")


class _Deno:
    name = "deno"

    def __init__(self, engine: DenoEngine) -> None:
        self._engine = engine

    async def run(self, program: Program, *, type_check: bool = False) -> RunResult:
        return await self._engine.run(program.js, tool, timeout_ms=5000)

    def worker_pids(self) -> list[int]:
        return [self._engine.process.pid]


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _timed(run: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await run()
    return time.perf_counter() - start


async def measure(engine: Engine, *, runs: int, type_checks: bool) -> dict[str, Any]:
    """Items 2, 3 and 5 of the brief for one warm engine; prints a line per figure."""
    out: dict[str, Any] = {}

    def say(key: str, text: str, value: Any) -> None:
        out[key] = value
        print(f"  {engine.name:14} {text}")

    await engine.run(TRIVIAL)  # warm
    for tc in (False, True) if type_checks else (False,):
        for label, program in (("1 + 1", TRIVIAL), ("one call", ONE_CALL)):
            samples = []
            for _ in range(runs):
                started = time.perf_counter()
                await engine.run(program, type_check=tc)
                samples.append(time.perf_counter() - started)
            p50, p90 = _pct(samples, 0.5) * 1e3, _pct(samples, 0.9) * 1e3
            tag = f"run {label!r}{' (type-checked)' if tc else ''}"
            say(
                f"run_{label.replace(' ', '_').replace('+', 'plus')}{'_tc' if tc else ''}_ms",
                f"{tag}: p50 {p50:.2f} ms, p90 {p90:.2f} ms",
                [round(p50, 3), round(p90, 3)],
            )

    rounds = max(5, runs // 20)
    empty = [await _timed(lambda: engine.run(TRIVIAL)) for _ in range(rounds)]
    hundred = [await _timed(lambda: engine.run(SEQUENTIAL_100)) for _ in range(rounds)]
    per_call_us = (statistics.median(hundred) - statistics.median(empty)) / 100 * 1e6
    say(
        "per_call_us",
        f"one inner call (100 sequential, less an empty run): {per_call_us:.0f} us",
        round(per_call_us, 1),
    )

    gathers = [await _timed(lambda: engine.run(GATHER_20)) for _ in range(5)]
    say(
        "gather_20x50ms_ms",
        f"gather of 20 calls sleeping 50 ms: {statistics.median(gathers) * 1e3:.1f} ms wall",
        round(statistics.median(gathers) * 1e3, 2),
    )

    for label, program in (("cpu loop", ENDLESS), ("awaiting a tool", AWAIT_SLOW)):
        before = engine.worker_pids()
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def cancel_later(scope: trio.CancelScope = scope) -> None:
                    await trio.sleep(0.2)
                    scope.cancel()
                    out["_cancelled_at"] = time.perf_counter()

                nursery.start_soon(cancel_later)
                try:
                    await engine.run(program)
                except (pm.MontyError, DenoProgramError) as exc:
                    say("cancel_error", f"cancel: the run raised {type(exc).__name__}: {exc}", str(exc))
        returned_ms = (time.perf_counter() - out.pop("_cancelled_at")) * 1e3
        gone_ms = None
        for i in range(200):
            if not any(alive(pid) for pid in before):
                gone_ms = i * 5
                break
            await trio.sleep(0.005)
        started = time.perf_counter()
        after = await engine.run(TRIVIAL)
        next_ms = (time.perf_counter() - started) * 1e3
        survived = "the same worker" if set(before) & set(engine.worker_pids()) else "a new worker"
        gone = f"old worker gone within {gone_ms} ms" if gone_ms is not None else "old worker still alive after 1 s"
        if isinstance(engine, _Deno):
            gone = "its Worker terminated; the one deno process stays"
        say(
            f"cancel_{label.replace(' ', '_')}",
            f"cancel while {label}: run returned {returned_ms:.1f} ms after the cancel; {gone}; next run "
            f"({after.value}) on {survived} in {next_ms:.1f} ms",
            {
                "returned_ms": round(returned_ms, 2),
                "worker_gone_ms": gone_ms,
                "next_ms": round(next_ms, 2),
                "next_on": survived,
            },
        )
    rss = {pid: round(rss_mib(pid), 1) for pid in engine.worker_pids()}
    say("worker_rss_mib", f"worker RSS: {', '.join(f'{v} MiB' for v in rss.values())}", list(rss.values()))
    return out


async def cold_monty_threads() -> float:
    started = time.perf_counter()
    with pm.Monty(min_processes=1) as pool:
        await MontyThreads(pool, stubs=STUBS).run(TRIVIAL.python, tool)
        return time.perf_counter() - started


async def cold_monty_asyncio() -> float:
    started = time.perf_counter()
    pool = await open_asyncio_pool(min_processes=1)
    try:
        await MontyAsyncio(pool, stubs=STUBS).run(TRIVIAL.python, tool)
        return time.perf_counter() - started
    finally:
        await close_asyncio_pool(pool)


async def cold_deno() -> float:
    started = time.perf_counter()
    async with open_deno() as engine:
        await engine.run(TRIVIAL.js, tool)
        return time.perf_counter() - started


async def cold(name: str, start: Callable[[], Awaitable[float]], rounds: int) -> dict[str, Any]:
    samples = [await start() for _ in range(rounds)]
    median = statistics.median(samples) * 1e3
    print(
        f"  {name:14} cold start (pool or process creation to the first result of 1 + 1): {median:.1f} ms"
        f" (median of {rounds}; min {min(samples) * 1e3:.1f})"
    )
    return {"cold_start_ms": round(median, 2)}


async def main(*, quick: bool, escapes: bool) -> dict[str, Any]:
    runs = 40 if quick else 200
    results: dict[str, Any] = {"versions": {"pydantic-monty": pm.__version__, "python": sys.version.split()[0]}}
    threads_before = {t.ident for t in threading.enumerate()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        print("== monty-threads (sync Monty snapshots, trio.to_thread)")
        results["monty-threads"] = await cold("monty-threads", cold_monty_threads, 5)
        with pm.Monty(min_processes=1, max_processes=4) as pool:
            engine = _Monty("monty-threads", MontyThreads(pool, stubs=STUBS))
            results["monty-threads"] |= await measure(engine, runs=runs, type_checks=True)
        print("== monty-asyncio (AsyncMonty through trio-asyncio)")
        async with trio_asyncio.open_loop():
            results["monty-asyncio"] = await cold("monty-asyncio", cold_monty_asyncio, 5)
            apool = await open_asyncio_pool(min_processes=1, max_processes=4)
            try:
                engine = _Monty("monty-asyncio", MontyAsyncio(apool, stubs=STUBS))
                results["monty-asyncio"] |= await measure(engine, runs=runs, type_checks=True)
            finally:
                await close_asyncio_pool(apool)
        print("== deno (a permissionless Worker per program, JSON lines)")
        results["deno"] = await cold("deno", cold_deno, 3)
        async with open_deno() as deno:
            denoe = _Deno(deno)
            results["deno"] |= await measure(denoe, runs=max(runs // 2, 20), type_checks=False)
        if escapes:
            results["escapes"] = await run_escapes()
    await trio.sleep(0.2)
    left = [t.name for t in threading.enumerate() if t.ident not in threads_before]
    results["threads_left"] = left
    results["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    print(f"threads left behind (not there at the start): {left or 'none'}")
    print(f"warnings: {results['warnings'] or 'none'}")
    return results


def cli() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.code_engines", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="40 runs per figure instead of 200")
    parser.add_argument("--escapes", action="store_true", help="also run the escape set (about a minute)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = parser.parse_args()
    results = trio.run(lambda: main(quick=args.quick, escapes=args.escapes))
    if args.json:
        print(json.dumps(results))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(cli())
