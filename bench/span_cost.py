"""What telemetry costs one call, in isolation: ``python -m bench.span_cost [--calls N] [--rounds R]``.

The per-call telemetry work of the two ways a call goes, run in this process
with nothing else competing, so the figure does not move with the box's load as
a whole-sidecar measurement does (``bench.ab_calls --telemetry-after``):

* **spliced**: the two spans of a spliced call (``spans.start_spliced_call``), the
  trace keys of its upstream request, the CLIENT span's end at the answer and the
  SERVER span's end;
* **task**: a call a task runs: our SERVER span, the CLIENT span made current
  while the request goes out with its context (``spans.traced_request``), both ends.

Each is run on the production pipeline (``telemetry.sdk.tracer_provider``, no
exporter, a metric reader as in production) twice, side by side in alternating
rounds: with the sidecar's lean spans (``telemetry.lean``) and with the SDK's
own (the same provider given a span processor that watches starts). Prints the
median microseconds per call of each and their ratio. Not part of ``python -m
bench``: it prices one design choice.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any, Final

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor

from supervisor.telemetry import sdk, spans
from supervisor.telemetry.durations import DurationReading
from supervisor.telemetry.spans import TELEMETRY

HOST_TRACE: Final = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}


class _Reader(DurationReading, InMemoryMetricReader):
    """A reader that collects the duration histograms, as production's periodic one does."""


class _WatchesStarts(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        del span, parent_context


def _tracer(*, lean: bool) -> Any:
    provider = sdk.tracer_provider([], batch=False)
    if not lean:
        provider.add_span_processor(_WatchesStarts())
    return provider.get_tracer(spans.OWN_TRACER_NAME, "bench")


def _spliced(i: int) -> None:
    trace = spans.start_spliced_call(
        "mcp__fx__echo", "echo", i, f"s-{i}", HOST_TRACE, server="fx", generation=1,
        host_version="2026-07-28", upstream_version="2026-07-28",
    )  # fmt: skip
    trace.upstream_meta(HOST_TRACE)
    trace.upstream_answered("ok")
    trace.finish("ok")


def _task(i: int) -> None:
    host = spans.start_host_call(
        "mcp__fx__echo", i, HOST_TRACE, server="fx", generation=1, host_version="2026-07-28", stdio=True
    )
    client = spans.start_client_call(
        "echo", server="fx", generation=1, protocol_version="2026-07-28", stdio=False, parent=host.context
    )
    with spans.covering_call(client, "echo"):
        spans.traced_request({}, {}, f"u-{i}")
    client.end("ok")
    host.end("ok")


def _us_per_call(work: Callable[[int], None], tracer: Any, calls: int) -> float:
    spans._tracer = tracer
    start = time.perf_counter()
    for i in range(calls):
        work(i)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.span_cost", description=__doc__)
    parser.add_argument("--calls", type=int, default=5000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    metrics.set_meter_provider(MeterProvider(metric_readers=[_Reader(resource=Resource.create())]))
    tracers = {"lean": _tracer(lean=True), "sdk": _tracer(lean=False)}
    TELEMETRY.on = True
    for name, work in (("spliced", _spliced), ("task", _task)):
        for tracer in tracers.values():
            _us_per_call(work, tracer, args.calls // 5)  # warm up
        figures: dict[str, list[float]] = {kind: [] for kind in tracers}
        for _ in range(args.rounds):
            for kind, tracer in tracers.items():
                figures[kind].append(_us_per_call(work, tracer, args.calls))
        lean, full = statistics.median(figures["lean"]), statistics.median(figures["sdk"])
        print(f"{name:8} lean {lean:6.1f} us/call   sdk spans {full:6.1f} us/call   lean/sdk {lean / full:.3f}")


if __name__ == "__main__":
    main()
