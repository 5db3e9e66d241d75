"""What the 1 MB target leaves the sidecar, against what it spends: ``python -m bench.proxy_budget [--calls N]``.

The issue's 1 MB target asks a 1 MB call through the sidecar to take at most
1 / 0.8 of the direct call's time. A proxy that proves each line before it goes
on (``bench.relay_floor --check``, the checked relay: what DESIGN I12 asks, and
nothing else) already spends most of that on its own pipe hops and proofs. What
is left, the direct time / 0.8 minus the checked relay's, is the budget for
everything the sidecar does beyond such a relay: routing, ids, the envelope's
scan and stamp, its bookkeeping and its event loop.

This measures that budget and what the sidecar spends against it, at 1 byte
(its fixed cost per call, which no large-message path can remove) and at 1 MB.
The direct host, the checked relay and the sidecar take turns call by call
(who goes first rotating), so the three share the box's load; the figures are
medians of single calls' latencies. Not part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Final

import trio

from bench.call_path import FLOOR, LARGE_TEXT, _measure_c1_interleaved, open_warm_hosts
from bench.harness import median, reap_marked

VARIANTS: Final = ("direct", FLOOR, "sidecar")
LARGE_TARGET: Final = 0.8
"""The issue's 1 MB target: sidecar calls/s >= 0.8 x direct."""
SMALL_CALLS_PER_LARGE: Final = 10
"""Small calls are this many times as many as 1 MB calls: as cheap, and noisier."""


def _median_ms(latencies: dict[str, list[float]]) -> dict[str, float]:
    return {variant: median(times) * 1e3 for variant, times in latencies.items()}


async def _main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            async with AsyncExitStack() as stack:
                hosts = await open_warm_hosts(stack, list(VARIANTS), Path(tmp), large_calls=3)
                small = _median_ms(await _measure_c1_interleaved(hosts, calls * SMALL_CALLS_PER_LARGE, "x"))
                large = _median_ms(await _measure_c1_interleaved(hosts, calls, LARGE_TEXT))
        finally:
            await reap_marked("proxy_budget")
    for label, figures in (("1 byte", small), ("1 MB", large)):
        print(
            f"{label}: median ms per call "
            + ", ".join(f"{variant} {ms:.3f} (+{ms - figures['direct']:.3f})" for variant, ms in figures.items())
        )
    budget = large["direct"] / LARGE_TARGET - large[FLOOR]
    print(f"1 MB: sidecar / direct {large['direct'] / large['sidecar']:.3f}, {FLOOR} / direct "
          f"{large['direct'] / large[FLOOR]:.3f} (target: sidecar >= {LARGE_TARGET})")  # fmt: skip
    print(f"budget the 1 MB target leaves the sidecar beyond the {FLOOR} floor: {budget:.3f} ms per call")
    print(f"what the sidecar spends beyond it: {small['sidecar'] - small[FLOOR]:.3f} ms at 1 byte (its fixed cost), "
          f"{large['sidecar'] - large[FLOOR]:.3f} ms at 1 MB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.proxy_budget", description=__doc__)
    parser.add_argument("--calls", type=int, default=300, help="1 MB calls per variant (x10 small ones)")
    args = parser.parse_args()
    trio.run(_main, args.calls)


if __name__ == "__main__":
    main()
