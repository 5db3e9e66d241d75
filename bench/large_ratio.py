"""p2's 1 MB case alone, long enough to read on a shared box: ``python -m bench.large_ratio [--rounds R] [--calls N]``.

``python -m bench --quick p2`` makes five 1 MB calls per variant, a window of
well under a second, so its ratio moves by 2x with other people's load. This
keeps a direct host, two relay hosts and a sidecar host (and, with
``--against CHECKOUT``, that checkout's sidecar too) connected to the same
fixture (``--tools echo``) and alternates rounds of ``N`` sequential 1 MB echo
calls between them, who goes first rotating. The relays (``bench.relay_floor``)
are the floor of any stdio proxy: the bytes copied through one more process;
with ``--check`` each line proven as the sidecar proves it (DESIGN I12) before
it goes on; with ``--ahead`` proven while the reader takes it in (what that
guarantee costs).
It prints each round, the median calls/s of each, each one's ratio to direct,
whole and as the median of per-round ratios (the issue's target: sidecar /
direct >= 0.8), the middle process's CPU per
call (``/proc/<pid>/stat``, the robust figure), its minor page faults per call
(each fresh page a 1 MB buffer touches is one) and its resident set after the
last round (``VmRSS``) and at its peak (``VmHWM``). Not part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

import trio

from bench.call_path import CHECKOUT_MARK, _measure_large, open_warm_hosts, tool_of
from bench.harness import cpu_sec, median, reap_marked

VARIANTS = ("direct", "relay", "relay_checked", "relay_ahead", "sidecar")
"""Taking turns, who goes first rotating; the relays (``bench.relay_floor``) are a proxy's floors."""


def minor_faults(pid: int) -> int:
    """Minor page faults one process has taken so far (children excluded), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rfind(b")") + 2 :].split()[7])  # minflt, field 10


def memory_mb(pid: int) -> tuple[float, float]:
    """``VmRSS`` and ``VmHWM`` of one process, in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return tuple(int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


async def _main(rounds: int, calls: int, against: list[Path]) -> None:
    variants = [*VARIANTS, *(f"{CHECKOUT_MARK}{checkout.resolve()}" for checkout in against)]
    cps: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, float] = dict.fromkeys(variants, 0.0)
    faults: dict[str, int] = dict.fromkeys(variants, 0)
    memory: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            async with AsyncExitStack() as stack:
                hosts = await open_warm_hosts(stack, variants, Path(tmp), large_calls=3)
                for round_index in range(rounds):
                    line = f"  round {round_index + 1}:"
                    shift = round_index % len(variants)
                    for variant in variants[shift:] + variants[:shift]:
                        pid = hosts[variant].process.pid
                        before, faults_before = cpu_sec(pid), minor_faults(pid)
                        cps[variant].append(await _measure_large(hosts[variant], tool_of(variant), calls))
                        cpu[variant] += cpu_sec(pid) - before
                        faults[variant] += minor_faults(pid) - faults_before
                        line += f" {variant} {cps[variant][-1]:6.1f}/s"
                    print(line, flush=True)
                memory = {variant: memory_mb(hosts[variant].process.pid) for variant in variants}
        finally:
            await reap_marked("large_ratio")
    rates = {variant: median(cps[variant]) for variant in variants}
    print(f"1 MB calls/s (median of {rounds} rounds x {calls}): " + ", ".join(f"{v} {r:.1f}" for v, r in rates.items()))
    for variant in variants[1:]:
        paired = median([mine / direct for mine, direct in zip(cps[variant], cps["direct"], strict=True)])
        target = " (target >= 0.8)" if variant == "sidecar" else ""
        print(f"{variant} / direct {rates[variant] / rates['direct']:.3f}, paired median {paired:.3f}{target}")
    for variant in variants:
        print(
            f"{variant}: middle process CPU {cpu[variant] / (rounds * calls) * 1e3:.2f} ms per 1 MB call,"
            f" {faults[variant] / (rounds * calls):.0f} minor faults per call,"
            f" RSS {memory[variant][0]:.1f} MB (peak {memory[variant][1]:.1f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.large_ratio", description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument(
        "--against", type=Path, action="append", default=[], help="another checkout's sidecar as one more variant"
    )
    args = parser.parse_args()
    trio.run(_main, args.rounds, args.calls, args.against)


if __name__ == "__main__":
    main()
