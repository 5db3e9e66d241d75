"""A/B two checkouts on p3's lite fleet: ``python -m bench.ab_fleet [--rounds N] BEFORE AFTER``.

Each round starts one lite server and then 50 behind the sidecar of each
checkout, the two checkouts taking turns first. Each sidecar runs
``python -P`` with only its own checkout on the path, so it is that
checkout's code (``python -m supervisor`` would import the current
directory's). It prints every round and then:

* medians of both ready times and of the ratio;
* AFTER minus BEFORE as paired medians: the 50-server ready time, and the
  sidecar's CPU until then.

A shared box whose speed drifts moves unpaired medians by more than a change
of a few percent. Round 6 measured items 34 and 35 this way (``RESULTS.md``).
Not part of ``python -m bench``: an A/B is for deciding whether a change helps.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from statistics import median

import trio

from bench import fleet
from bench.harness import sidecar_argv_from

FLEET: int = 50


async def _main(rounds: int, checkouts: list[Path]) -> None:
    runs: dict[Path, list[tuple[dict[str, float], dict[str, float]]]] = {c: [] for c in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds):
            for checkout in checkouts if index % 2 == 0 else checkouts[::-1]:
                sidecar = sidecar_argv_from(checkout)
                one = await fleet._one(Path(tmp), 1, "lite", measure=False, sidecar=sidecar)
                many = await fleet._one(Path(tmp), FLEET, "lite", measure=False, sidecar=sidecar)
                runs[checkout].append((one, many))
                print(
                    f"round {index + 1} {checkout}: 1 server {one['ready_sec']:.3f} s, {FLEET} servers "
                    f"{many['ready_sec']:.3f} s (sidecar CPU {many['cpu_at_ready_sec']:.2f} s), "
                    f"ratio {many['ready_sec'] / one['ready_sec']:.3f}",
                    flush=True,
                )
    for checkout, pairs in runs.items():
        ready_1 = median(one["ready_sec"] for one, _ in pairs)
        ready_n = median(many["ready_sec"] for _, many in pairs)
        own = median(many["ready_sec"] / one["ready_sec"] for one, many in pairs)
        print(f"{checkout}: 1 server {ready_1:.3f} s, {FLEET} servers {ready_n:.3f} s, ratio {ready_n / ready_1:.3f}"
              f" (rounds' own {own:.3f})")  # fmt: skip
    before, after = (runs[c] for c in checkouts)
    ready = [b[1]["ready_sec"] - a[1]["ready_sec"] for a, b in zip(before, after, strict=True)]
    cpu = [b[1]["cpu_at_ready_sec"] - a[1]["cpu_at_ready_sec"] for a, b in zip(before, after, strict=True)]
    faster = sum(delta < 0 for delta in ready)
    print(
        f"{checkouts[1]} minus {checkouts[0]}, paired medians: {FLEET} servers ready {median(ready) * 1000:+.0f} ms "
        f"({faster} of {rounds} rounds faster), sidecar CPU until then {median(cpu) * 1000:+.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ab_fleet", description=__doc__)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    trio.run(_main, args.rounds, [args.before.resolve(), args.after.resolve()])


if __name__ == "__main__":
    main()
