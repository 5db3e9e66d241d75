"""p2's small calls, this checkout's sidecar against another's: ``python -m bench.ab_calls --against CHECKOUT``.

A full ``p2`` run compares the sidecar with direct; whether a change moved the
sidecar itself is easier to read side by side with the code before it, in one
run on one box. This starts this checkout's sidecar and ``CHECKOUT``'s (each
over its own fixture ``--tools echo``, both 2026-era hosts unless ``--mode
legacy``, the fixture handshake-only with ``--legacy-upstream``; over the HTTP
front with ``--front http``, each host a streamable-HTTP client) and alternates
rounds between them, who goes first rotating: ``--c1`` sequential calls, then
``--c32`` calls 32 at a time. It prints, per variant, the median c1 p50 latency,
the median c32 calls/s and the sidecar's CPU per call over every round
(``/proc/<pid>/stat``, the robust figure), and the ratios after / before.
Not part of ``python -m bench``.

``--upstream http``: each fixture serves over streamable HTTP instead of stdio.
Against this very checkout (``--against .``), one option makes the variants
differ in one thing, so that the ratio is its cost: ``--telemetry-after``
runs the after variant's sidecar with ``[supervisor.telemetry] enabled = true``
(exporters ``none`` unless ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``
say otherwise: spans and metrics made, not sent), ``--progress-after`` gives
each of the after variant's calls a progress token (issue 47's targets: +100 us
and +30 us of sidecar CPU per call).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio

from bench.call_measure import CONCURRENCY, PROGRESS_OPTIONS, _measure_concurrent, _warm_up
from bench.call_pairs import FRONT_TOKEN
from bench.harness import (
    BENCH_MARK_ENV,
    bench_mark,
    cpu_sec,
    fixture_server,
    median,
    open_host,
    percentile,
    reap_marked,
    sidecar_argv,
    sidecar_argv_from,
    write_settings,
)
from tests.sidecar import MARK_ENV, http_supervisor_table, open_http_fixture, open_http_host, open_http_sidecar


async def _main(args: argparse.Namespace) -> None:
    os.environ.setdefault(MARK_ENV, bench_mark())  # the HTTP helpers mark their children with it: reaped below
    if args.telemetry_after:
        os.environ.setdefault("OTEL_TRACES_EXPORTER", "none")
        os.environ.setdefault("OTEL_METRICS_EXPORTER", "none")
    options = {"after": PROGRESS_OPTIONS if args.progress_after else {}, "before": {}}
    variants = {"after": sidecar_argv, "before": sidecar_argv_from(args.against.resolve())}
    fixture_args = ["--tools", "echo", *(["--legacy-only"] if args.legacy_upstream else [])]
    p50: dict[str, list[float]] = {v: [] for v in variants}
    cps: dict[str, list[float]] = {v: [] for v in variants}
    cpu = dict.fromkeys(variants, 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            async with AsyncExitStack() as stack:
                hosts = {}
                pids: dict[str, int] = {}
                tools: dict[str, str] = {}
                for name, argv_of in variants.items():
                    if args.upstream == "http":
                        fixture = await stack.enter_async_context(open_http_fixture(*fixture_args))
                        server: dict[str, Any] = {"url": fixture.url}
                    else:
                        server = fixture_server(*fixture_args, env={BENCH_MARK_ENV: bench_mark()})
                    http = args.front == "http"
                    # An HTTP front announces its URL at level info (``open_http_sidecar`` reads that line).
                    front: dict[str, Any] = http_supervisor_table() if http else {"log_level": "warning"}
                    if args.telemetry_after and name == "after":
                        front["telemetry"] = {"enabled": True}
                    # Each checkout names the tool by its own default (``mcp__fx__echo`` before issue 57, ``fx__echo``
                    # after): the settings say nothing of names, and the name is read off the listing.
                    config = write_settings(
                        Path(tmp) / f"{name}.toml", {"fx": server}, mcp_names=False, supervisor=front
                    )
                    if http:
                        sidecar = await stack.enter_async_context(
                            open_http_sidecar(config, token=FRONT_TOKEN, argv=argv_of)
                        )
                        opening = open_http_host(sidecar.url, FRONT_TOKEN, args.mode)
                        hosts[name], pids[name] = await stack.enter_async_context(opening), sidecar.process.pid
                    else:
                        hosts[name] = await stack.enter_async_context(open_host(argv_of(config), mode=args.mode))
                        pids[name] = hosts[name].pid
                    tools[name] = await _echo_name(hosts[name])
                    await _warm_up(hosts[name], tools[name])
                order = list(variants)
                for round_index in range(args.rounds):
                    for name in order[round_index % 2 :] + order[: round_index % 2]:
                        host = hosts[name]
                        before = cpu_sec(pids[name])
                        latencies = []
                        for _ in range(args.c1):
                            started = trio.current_time()
                            await host.session.call_tool(tools[name], {"text": "x"}, **options[name])
                            latencies.append(trio.current_time() - started)
                        p50[name].append(percentile(latencies, 0.5) * 1000)
                        rate = await _measure_concurrent(host, tools[name], args.c32, CONCURRENCY, options[name])
                        cps[name].append(rate)
                        cpu[name] += cpu_sec(pids[name]) - before
        finally:
            await reap_marked("ab_calls")
    calls = args.rounds * (args.c1 + args.c32)
    figures = {name: (median(p50[name]), median(cps[name]), cpu[name] / calls * 1e6) for name in variants}
    for name, (latency, rate, cpu_us) in figures.items():
        print(f"  {name:6}  c1 p50 {latency:.3f} ms   c32 {rate:.0f} calls/s   sidecar CPU {cpu_us:.1f} us/call")
    (la, ra, ca), (lb, rb, cb) = figures["after"], figures["before"]
    print(f"  after/before: c1 p50 {la / lb:.3f}   c32 {ra / rb:.3f}   CPU per call {ca / cb:.3f} ({ca - cb:+.1f} us)")


async def _echo_name(host: Any) -> str:
    """The fixture's echo tool as this sidecar names it (its checkout's default form)."""
    names = await host.tool_names()
    found = [name for name in names if name.endswith("__echo")]
    if len(found) != 1:
        raise RuntimeError(f"no single echo tool is listed: {names}")
    return found[0]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ab_calls", description=__doc__)
    parser.add_argument("--against", type=Path, required=True, help="the other checkout (the code before)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--c1", type=int, default=300)
    parser.add_argument("--c32", type=int, default=3200)
    parser.add_argument("--mode", choices=("auto", "legacy"), default="auto", help="the hosts' era")
    parser.add_argument("--legacy-upstream", action="store_true", help="the fixtures speak only the handshake era")
    parser.add_argument("--front", choices=("stdio", "http"), default="stdio", help="the sidecars' front")
    parser.add_argument("--upstream", choices=("stdio", "http"), default="stdio", help="the fixtures' transport")
    parser.add_argument("--telemetry-after", action="store_true", help="telemetry on in the after variant only")
    parser.add_argument("--progress-after", action="store_true", help="a progress token on the after variant's calls")
    trio.run(_main, parser.parse_args())


if __name__ == "__main__":
    main()
