"""Whether p1 lowers p2's 1 MB ratio, and what a 1 MB call costs each process: ``python -m bench.after_p1``.

Diagnostic for issue 11 (not part of ``python -m bench``). ``--p1`` runs p1 first
in its own ``trio.run``, as ``python -m bench`` does; then a direct host and a
sidecar host take turns in rounds of ``--calls`` sequential 1 MB echo calls, and
it prints the median calls/s of each and, per variant, the CPU and minor page
faults per call of every process on the path: the bench host (this process), the
middle process and, for the sidecar, its fixture. ``--pin host=0,middle=1,upstream=0``
pins the processes (all threads) to CPUs, to see what placement does to each cost.

Findings (issue 11, round 4): p1 does not lower the ratio (alternating, five
runs each: 0.707-0.761 without p1, 0.710-0.797 with it); the costs move with
placement (sidecar CPU per call 1.22-1.28 ms with all three on one core,
1.44-1.61 ms with the sidecar alone on the other core).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

import trio

from bench import reconnect
from bench.call_path import TOOL, _measure_large, open_warm_hosts
from bench.harness import cpu_sec, median, quiet_host_heap, reap_marked

VARIANTS = ("direct", "sidecar")


def _children(pid: int) -> list[int]:
    # A child belongs to the thread that forked it: read every thread's list.
    return [int(p) for task in Path(f"/proc/{pid}/task").iterdir() for p in (task / "children").read_text().split()]


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _self_faults() -> float:
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def _faults(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return float(stat[stat.rfind(b")") + 2 :].split()[7])


def _pin(pid: int, cpu: int | None) -> None:
    if cpu is None:
        return
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), {cpu})


async def _large(rounds: int, calls: int, *, freeze: bool, pins: dict[str, int | None]) -> None:
    cps: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu: dict[str, dict[str, float]] = {
        v: {"host": 0.0, "middle": 0.0, "fixture": 0.0, "host_flt": 0.0, "middle_flt": 0.0, "fixture_flt": 0.0}
        for v in VARIANTS
    }
    with tempfile.TemporaryDirectory() as tmp:
        try:
            async with AsyncExitStack() as stack:
                hosts = await open_warm_hosts(stack, list(VARIANTS), Path(tmp), large_calls=3)
                if freeze:
                    quiet_host_heap()
                _pin(os.getpid(), pins["host"])
                for variant in VARIANTS:  # the direct variant's middle process is the upstream itself
                    _pin(hosts[variant].process.pid, pins["middle" if variant == "sidecar" else "upstream"])
                    for kid in _children(hosts[variant].process.pid):
                        _pin(kid, pins["upstream"])
                for _ in range(rounds):
                    for variant in VARIANTS:
                        pid = hosts[variant].process.pid
                        kids = _children(pid) if variant == "sidecar" else []

                        def sample(pid: int = pid, kids: list[int] = kids) -> tuple[float, ...]:
                            return (
                                _self_cpu(),
                                cpu_sec(pid),
                                sum(cpu_sec(k) for k in kids),
                                _self_faults(),
                                _faults(pid),
                                sum(_faults(k) for k in kids),
                            )

                        before = sample()
                        cps[variant].append(await _measure_large(hosts[variant], TOOL[variant], calls))
                        after = sample()
                        keys = ("host", "middle", "fixture", "host_flt", "middle_flt", "fixture_flt")
                        for key, b, a in zip(keys, before, after, strict=True):
                            cpu[variant][key] += a - b
        finally:
            await reap_marked("after_p1")
    d, s = median(cps["direct"]), median(cps["sidecar"])
    print(f"RESULT direct {d:.1f}/s sidecar {s:.1f}/s ratio {s / d:.3f}", flush=True)
    for variant in VARIANTS:
        per = {k: v / (rounds * calls) * 1e3 for k, v in cpu[variant].items()}
        print(
            f"  {variant}: rounds {[round(x) for x in cps[variant]]} cpu ms/call host {per['host']:.2f}"
            f" middle {per['middle']:.2f} fixture {per['fixture']:.2f}; faults/call host {per['host_flt'] / 1e3:.0f}"
            f" middle {per['middle_flt'] / 1e3:.0f} fixture {per['fixture_flt'] / 1e3:.0f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.after_p1", description=__doc__)
    parser.add_argument("--p1", action="store_true")
    parser.add_argument("--no-freeze", action="store_true")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--pin", default="", help="e.g. host=0,middle=1,upstream=0")
    args = parser.parse_args()
    if args.p1:
        with contextlib.redirect_stdout(io.StringIO()):
            trio.run(lambda: reconnect.run(quick=False))
        print(f"after p1: {_self_faults():.0f} faults so far", flush=True)
    print(f"pid {os.getpid()} p1={args.p1}", flush=True)
    pins: dict[str, int | None] = dict.fromkeys(("host", "middle", "upstream"))
    for item in filter(None, args.pin.split(",")):
        key, _, cpu = item.partition("=")
        pins[key] = int(cpu)
    print(f"pins {pins}", flush=True)
    trio.run(lambda: _large(args.rounds, args.calls, freeze=not args.no_freeze, pins=pins))


if __name__ == "__main__":
    main()
