"""Profile the sidecar of one p2 era pair or front: ``python -m bench.profile_pair PAIR [--seconds S] [--out FILE]``.

``PAIR`` is a key of ``bench.call_pairs.PAIRS`` (``h2026_u2025``, ``httpfront``,
``httpup``, …). The pair's processes start as ``bench.call_pairs`` starts them;
32 concurrent callers keep the sidecar busy while ``py-spy record`` samples it.
Prints the calls made, the sidecar's CPU per call over the sampled window, and
the share of samples under a few frames of interest (``bench.profile_p2``'s).
Not part of ``python -m bench``: a profile is for choosing what to change.
"""

from __future__ import annotations

import argparse
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Final

import trio

from bench.call_measure import CONCURRENCY, TOOL
from bench.call_pairs import PAIRS, open_pair
from bench.harness import reap_marked, summarize_samples
from bench.profile_p2 import INTEREST, sample_under_load

HTTP_INTEREST: Final = {
    **INTEREST,
    "http server (hypercorn, h11, starlette)": ("hypercorn/", "h11/", "starlette/"),
    "sdk streamable http": ("streamable_http",),
    "http client (httpx, httpcore)": ("httpx", "httpcore"),
    "sse": ("sse",),
}


async def _main(pair_key: str, seconds: float, out: Path) -> None:
    pair = next(p for p in PAIRS if p.key == pair_key)
    print(pair.label)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            async with AsyncExitStack() as stack:
                hosts, pids, _ = await open_pair(stack, pair, Path(tmp))
                await sample_under_load(
                    hosts["sidecar"], TOOL["sidecar"], pids["sidecar"], seconds=seconds, out=out,
                    concurrency=CONCURRENCY,
                )  # fmt: skip
        finally:
            await reap_marked(f"profile {pair_key}")
    summarize_samples(out, HTTP_INTEREST)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_pair", description=__doc__)
    parser.add_argument("pair", choices=[p.key for p in PAIRS])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/profile_pair.txt"))
    args = parser.parse_args()
    trio.run(_main, args.pair, args.seconds, args.out)


if __name__ == "__main__":
    main()
