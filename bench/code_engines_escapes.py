"""The escape set of ``bench.code_engines --escapes``: what a hostile or careless program meets.

For each engine and case: whether it was refused, the error text, how long until the run
ended, whether the worker survived (or the pool replaced it), and which of our child
processes and threads were there afterwards. A socket case connects to a listener of our
own on 127.0.0.1 (the only address this bench ever targets).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import pydantic_monty as pm
import trio
import trio_asyncio  # type: ignore[import-untyped]

from bench.code_engine_deno import DenoProgramError, open_deno
from bench.code_engine_monty import MontyAsyncio, MontyThreads, RunResult, close_asyncio_pool, open_asyncio_pool

STUBS: Final = {
    "demo": "async def echo(text: str) -> str: ...\nasync def slow(sec: float) -> str: ...\n",
}


def children(command: str) -> list[int]:
    """Our own child processes whose executable's name is ``command`` (read from /proc)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == me and name == command and fields[0] != "Z":
            found.append(int(entry))
    return sorted(found)


def rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    python: str
    js: str
    limit_s: float = 1.0
    memory: int | None = 256 * 2**20
    suspensions: int = 1000


def cases(port: int) -> list[Case]:
    return [
        Case("read /etc/passwd", "open('/etc/passwd').read()", "return await Deno.readTextFile('/etc/passwd')"),
        Case(
            "socket to 127.0.0.1",
            f"import socket\ns = socket.create_connection(('127.0.0.1', {port}))",
            f"const c = await Deno.connect({{hostname: '127.0.0.1', port: {port}}}); return 'connected'",
        ),
        Case("fetch 127.0.0.1", "import urllib.request", f"return (await fetch('http://127.0.0.1:{port}/')).status"),
        Case("environment variable", "import os\nos.environ['HOME']", "return Deno.env.get('HOME')"),
        Case("import os: os.system", "import os\nos.system('id')", "return new Deno.Command('id').outputSync().code"),
        Case(
            "import subprocess",
            "import subprocess",
            "const m = await import('node:child_process'); return m.execSync('id').toString()",
        ),
        Case("import ctypes / ffi", "import ctypes", "return Deno.dlopen('libc.so.6', {}) && 'opened'"),
        Case("endless loop, 1 s limit", "while True:\n    pass", "while (true) {}"),
        Case(
            "1.5 s tool wait, 1 s limit",
            "from tools import demo\nawait demo.slow(sec=1.5)\n'finished'",
            "await tools.demo.slow({sec: 1.5}); return 'finished'",
        ),
        Case("deep recursion", "def f(n):\n    return f(n + 1)\nf(0)", "const f = (n) => f(n + 1); return f(0)"),
        Case(
            "100 MB result", "'a' * (100 * 2**20)", "return 'a'.repeat(100 * 2 ** 20)", limit_s=10.0, memory=512 * 2**20
        ),
        Case(
            "10,000 host calls (default max_suspensions)",
            "from tools import demo\nfor i in range(10000):\n    await demo.echo(text='x')\n'done'",
            "for (let i = 0; i < 10000; i++) await tools.demo.echo({text: 'x'}); return 'done'",
            limit_s=30.0,
        ),
        Case(
            "10,000 host calls (max_suspensions 20,001)",
            "from tools import demo\nfor i in range(10000):\n    await demo.echo(text='x')\n'done'",
            "for (let i = 0; i < 10000; i++) await tools.demo.echo({text: 'x'}); return 'done'",
            limit_s=30.0,
            suspensions=20_001,
        ),
        Case(
            "calls never awaited",
            "from tools import demo\nfs = [demo.slow(sec=2) for i in range(5)]\n'returned'",
            "const fs = Array.from({length: 5}, () => tools.demo.slow({sec: 2})); return 'returned'",
        ),
        # Last: a memory bomb may take the whole deno process down with it.
        Case("'a' * 10**10", "x = 'a' * 10**10\nlen(x)", "const x = 'a'.repeat(1e10); return x.length"),
        Case(
            "growing list",
            "x = []\nwhile True:\n    x.append('a' * 1000)",
            "const x = []; while (true) x.push('a'.repeat(1000) + x.length)",
            limit_s=10.0,
        ),
    ]


@dataclass
class _Tally:
    started: int = 0
    finished: int = 0
    cancelled: int = 0


async def _serve_port(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    task_status.started(port)
    await trio.serve_listeners(_drop, listeners)


async def _drop(stream: trio.SocketStream) -> None:
    await stream.aclose()


Runner = Callable[[Case, Callable[[str, str, dict[str, Any]], Awaitable[Any]]], Awaitable[RunResult]]


@asynccontextmanager
async def _engines() -> AsyncIterator[dict[str, tuple[Runner, Callable[[], list[int]]]]]:
    with pm.Monty(min_processes=1, max_processes=2) as pool:
        threads = MontyThreads(pool, stubs=STUBS)
        async with trio_asyncio.open_loop():
            apool = await open_asyncio_pool(min_processes=1, max_processes=2)
            asyncio_engine = MontyAsyncio(apool, stubs=STUBS)
            try:
                async with open_deno() as deno:

                    def limits(case: Case) -> pm.ResourceLimits:
                        return {
                            "max_feed_duration_secs": case.limit_s,
                            "max_memory": case.memory,
                            "max_suspensions": case.suspensions,
                        }

                    async def run_threads(case: Case, call: Any) -> RunResult:
                        return await threads.run(case.python, call, limits=limits(case))

                    async def run_asyncio(case: Case, call: Any) -> RunResult:
                        return await asyncio_engine.run(case.python, call, limits=limits(case))

                    async def run_deno(case: Case, call: Any) -> RunResult:
                        return await deno.run(case.js, call, timeout_ms=int(case.limit_s * 1000))

                    yield {
                        "monty-threads": (run_threads, lambda: children("monty")),
                        "monty-asyncio": (run_asyncio, lambda: children("monty")),
                        "deno": (run_deno, lambda: [deno.process.pid] if deno.process.returncode is None else []),
                    }
            finally:
                await close_asyncio_pool(apool)


async def run_escapes() -> list[dict[str, Any]]:
    """Run every case on every engine; print and return one row per (engine, case)."""
    rows: list[dict[str, Any]] = []
    print("== escapes")
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_serve_port)
        async with _engines() as engines:
            for case in cases(port):
                for engine, (run, pids) in engines.items():
                    rows.append(await _one(engine, case, run, pids))
        nursery.cancel_scope.cancel()
    return rows


async def _one(engine: str, case: Case, run: Runner, pids: Callable[[], list[int]]) -> dict[str, Any]:
    tally = _Tally()

    async def call(server: str, name: str, args: dict[str, Any]) -> Any:
        tally.started += 1
        try:
            if name == "slow":
                await trio.sleep(float(args["sec"]))
            tally.finished += 1
            return args.get("text", "slept")
        except trio.Cancelled:
            tally.cancelled += 1
            raise

    before = pids()
    started = time.perf_counter()
    try:
        with trio.fail_after(60):
            result = await run(case, call)
        value = result.value
        shown = (
            f"{value[:40]!r}... ({len(value):,} chars)" if isinstance(value, str) and len(value) > 60 else repr(value)
        )
        outcome = f"ran: {shown}"
    except (pm.MontyError, DenoProgramError) as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        outcome = f"{type(exc).__name__}: {text[:160]}"
    except trio.TooSlowError:
        outcome = "no answer within 60 s"
    elapsed = time.perf_counter() - started
    await trio.sleep(0.05)
    after = pids()
    worker = "survived" if set(before) & set(after) else "replaced" if after else "gone"
    row = {
        "engine": engine,
        "case": case.name,
        "outcome": outcome,
        "seconds": round(elapsed, 3),
        "worker": worker,
        "calls": f"{tally.started} started, {tally.finished} finished, {tally.cancelled} cancelled",
        "children": len(after),
        "threads": threading.active_count(),
    }
    print(
        f"  {engine:14} {case.name:44} {elapsed:7.3f} s  worker {worker:8}  children {len(after)}  "
        f"threads {row['threads']}  calls {row['calls']}\n      {outcome}"
    )
    return row
