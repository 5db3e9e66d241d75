"""Syscalls and CPU per spliced call, per process: ``python -m bench.call_io [--python PY] [--calls N]``.

At c32 on two cores every process on the call path is CPU-bound, and part of
each one's cost is waking up: a read that parks, an ``epoll_ctl`` to re-arm it,
a write that wakes the next process. This starts the p2 sidecar (fixture
``--tools echo``), warms it up, then makes ``--calls`` calls at c1 and at c32
and prints, per call and per process (the bench host, the sidecar, the fixture
it runs), the CPU (``/proc/<pid>/stat``) and the reads and writes
(``/proc/<pid>/io`` ``syscr``/``syscw``), and the sidecar's calls per second.

``--python`` runs the sidecar with another interpreter (another checkout's
venv, e.g. ``/work/main/.venv/bin/python``): run both back to back to compare
before and after under the same load. Not part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Final

import trio

from bench.call_path import CONCURRENCY, _measure_concurrent, _warm_up
from bench.harness import (
    BENCH_MARK_ENV,
    bench_mark,
    cpu_sec,
    fixture_argv,
    fixture_server,
    open_host,
    reap_marked,
    write_settings,
)

TOOL: Final = "mcp__fx__echo"


def _io(pid: int) -> tuple[int, int]:
    fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(fields["syscr"]), int(fields["syscw"])


def _child(pid: int) -> int:
    tasks = Path(f"/proc/{pid}/task").iterdir()  # the fixture may have been forked from any thread
    children = [child for task in tasks for child in (task / "children").read_text().split()]
    if len(children) != 1:
        raise RuntimeError(f"the sidecar has children {children}, expected the one fixture")
    return int(children[0])


def _snapshot(pids: dict[str, int]) -> dict[str, tuple[float, int, int]]:
    return {name: (cpu_sec(pid), *_io(pid)) for name, pid in pids.items()}


async def _main(python: str, calls: int, rounds: int, levels: tuple[int, ...], direct: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = fixture_server("--tools", "echo", env={BENCH_MARK_ENV: bench_mark()})
        config = write_settings(Path(tmp) / "io.toml", {"fx": server}, supervisor={"log_level": "warning"})
        # -P: the cwd (this checkout) is not put on sys.path, so the sidecar runs its interpreter's checkout.
        argv = [python, "-P", "-m", "supervisor", "run", "--config", str(config)]
        if direct:
            argv = fixture_argv("--tools", "echo")
        try:
            async with open_host(argv, mode="auto") as host:
                with trio.fail_after(60):
                    await _warm_up(host, "echo" if direct else TOOL)
                assert host.process is not None
                middle = host.process.pid
                pids = (
                    {"host": os.getpid(), "fixture": middle}
                    if direct
                    else {"host": os.getpid(), "sidecar": middle, "fixture": _child(middle)}
                )
                for concurrency in levels:
                    totals = {name: [0.0, 0.0, 0.0] for name in pids}  # CPU seconds, reads, writes
                    rates = []
                    for _ in range(rounds):
                        before = _snapshot(pids)
                        with trio.fail_after(120):
                            rates.append(
                                await _measure_concurrent(host, "echo" if direct else TOOL, calls, concurrency)
                            )
                        after = _snapshot(pids)
                        for name in pids:
                            for i, (a, b) in enumerate(zip(after[name], before[name], strict=True)):
                                totals[name][i] += a - b
                    n = calls * rounds
                    rates.sort()
                    print(f"c{concurrency}: {rates[len(rates) // 2]:.0f} calls/s (median of {rounds} x {calls})")
                    for name, (cpu, reads, writes) in totals.items():
                        print(
                            f"  {name:8} cpu {cpu / n * 1e6:6.0f} us/call"
                            f"   reads {reads / n:5.2f}/call   writes {writes / n:5.2f}/call"
                        )
        finally:
            await reap_marked("call_io")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.call_io", description=__doc__)
    parser.add_argument("--python", default=sys.executable, help="the sidecar's interpreter (its checkout's venv)")
    parser.add_argument("--calls", type=int, default=3200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--c32-only", action="store_true", help="skip the c1 calls")
    parser.add_argument("--levels", help="concurrency levels, comma-separated (default: 1,32)")
    parser.add_argument("--direct", action="store_true", help="the host calls the fixture itself (no sidecar)")
    args = parser.parse_args()
    levels = (CONCURRENCY,) if args.c32_only else (1, CONCURRENCY)
    if args.levels:
        levels = tuple(int(level) for level in args.levels.split(","))
    trio.run(_main, args.python, args.calls, args.rounds, levels, args.direct)


if __name__ == "__main__":
    main()
