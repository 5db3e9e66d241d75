"""``python -m bench [--quick] [--json] [NAME ...]``: run the benchmarks, print medians and ratios."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from bench import (
    big_listing,
    call_path,
    code_mode,
    code_search,
    fleet,
    fleet_store,
    pins,
    reconnect,
    retrieval,
    search,
    storm,
    views,
)
from bench.harness import box_speed, cores, versions

BENCHMARKS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "p1": reconnect.run,
    "p2": call_path.run,
    "p3": fleet.run,
    "p4": storm.run,
    "p5": fleet_store.run,
    "p6": big_listing.run,
    "p7": retrieval.run,
    "p7-lexical": search.run,
    "p8": views.run,
    "p9": pins.run,
    "p10": code_mode.run,
    "p11": code_search.run,
}


def _describe(speed: dict[str, float]) -> str:
    return f"python loop {speed['python_loop_ms']} ms, pipe round trip {speed['pipe_round_trip_us']} us"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (under 2 minutes)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    parser.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], help="which benchmarks (default: all)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    box = {"start": box_speed()}
    print(f"box at the start: {_describe(box['start'])}")
    results: dict[str, Any] = {
        "cores": cores(),
        "quick": args.quick,
        "versions": versions() | {"fastmcp": call_path.FASTMCP_VERSION},
        "box": box,
    }
    for name in args.names or list(BENCHMARKS):
        results.update(trio.run(lambda run=BENCHMARKS[name]: run(quick=args.quick)))
    box["end"] = box_speed()
    print(f"box at the end: {_describe(box['end'])}")
    if args.json:
        print(json.dumps(results))
    return 0


sys.exit(main())
