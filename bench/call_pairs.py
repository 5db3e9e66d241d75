"""p2 per era pair and front (issue 29): direct vs sidecar for every host x upstream set-up.

``bench.call_path`` measures the 2026-host x 2026-upstream stdio pair (with FastMCP and
the proving floor) under its own keys; this module measures the other pairs in the same
run, one after the other, with the same primitives (``bench.call_measure``):

===================== ==========  ==============  =====  ========  ===============================
pair                  host        upstream        front  upstream  direct
===================== ==========  ==============  =====  ========  ===============================
h2026_u2026           2026        2026            stdio  stdio     (``bench.call_path``)
h2026_u2025           2026        handshake       stdio  stdio     handshake host, stdio
h2025_u2026           handshake   2026            stdio  stdio     2026 host, stdio
h2025_u2025           handshake   handshake       stdio  stdio     handshake host, stdio
httpfront             2026        2026            http   stdio     2026 host, streamable HTTP
httpup                2026        2026            stdio  http      2026 host, streamable HTTP
httpfront_h2025       handshake   handshake       http   stdio     handshake host, streamable HTTP
httpfront_h2025_u2026 handshake   2026            http   stdio     2026 host, streamable HTTP
httpup_h2025          handshake   2026            stdio  http      2026 host, streamable HTTP
httpboth              2026        2026            http   http      2026 host, streamable HTTP
httpboth_h2025        handshake   2026            http   http      2026 host, streamable HTTP
===================== ==========  ==============  =====  ========  ===============================

The host's era is ``mcp.Client(mode=...)`` (``auto``: 2026, ``legacy``: handshake); the
upstream's is pinned by the fixture's ``--legacy-only``. The direct variant speaks the
era of the sidecar's upstream, over the upstream's transport, to a fixture of its own
(so that each variant's middle process, whose CPU is read, serves only its own calls).

Each round: c1 with direct and sidecar taking turns call by call, then c32 per variant
(the CPU window is c1 plus c32, as in ``call_path``), then 1 MB calls taking turns. The
pair's processes live in one ``AsyncExitStack`` inside a ``trio.fail_after`` bound, so a
pair that fails or hangs is reported (``p2_<pair>_error``) and the next one still runs;
marked leftovers are reaped after each pair.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import trio
from mcp.client.client import ConnectMode

from bench.call_measure import (
    CONCURRENCY,
    LARGE_TEXT,
    TOOL,
    _log_summary,
    _measure_c1_interleaved,
    _measure_concurrent,
    _warm_up,
)
from bench.harness import (
    BENCH_MARK_ENV,
    bench_mark,
    cpu_sec,
    fixture_argv,
    fixture_server,
    median,
    open_host,
    path_cpu_sec,
    percentile,
    reap_marked,
    sidecar_argv,
    write_settings,
)
from tests.sidecar import MARK_ENV, Host, http_supervisor_table, open_http_fixture, open_http_host, open_http_sidecar

Transport = Literal["stdio", "http"]
PAIR_BOUND_SEC: Final = 600.0
"""How long one pair may take, start to stop (a full run's slowest pair takes about a minute)."""
FRONT_TOKEN: Final = "bench-token"
"""The HTTP front's bearer token (a loopback port of this run only)."""


@dataclass(frozen=True, slots=True)
class Pair:
    """One set-up: the host's era, the upstream's era, and the transport on each side of the sidecar."""

    key: str
    label: str
    host_mode: ConnectMode
    upstream_legacy: bool
    front: Transport = "stdio"
    upstream: Transport = "stdio"

    @property
    def direct_mode(self) -> ConnectMode:
        """The direct host speaks the era of the sidecar's upstream."""
        return "legacy" if self.upstream_legacy else "auto"

    @property
    def fixture_args(self) -> list[str]:
        return ["--tools", "echo", *(["--legacy-only"] if self.upstream_legacy else [])]


TODAY: Final = Pair("h2026_u2026", "2026 x 2026", "auto", upstream_legacy=False)
"""The pair ``bench.call_path`` measures under its original keys."""
PAIRS: Final = (
    Pair("h2026_u2025", "2026 x handshake", "auto", upstream_legacy=True),
    Pair("h2025_u2026", "handshake x 2026", "legacy", upstream_legacy=False),
    Pair("h2025_u2025", "handshake x handshake", "legacy", upstream_legacy=True),
    Pair("httpfront", "HTTP front x stdio upstream", "auto", upstream_legacy=False, front="http"),
    Pair("httpup", "stdio front x HTTP upstream", "auto", upstream_legacy=False, upstream="http"),
    Pair("httpfront_h2025", "HTTP front x stdio, handshake", "legacy", upstream_legacy=True, front="http"),
    Pair("httpfront_h2025_u2026", "HTTP front, handshake x 2026", "legacy", upstream_legacy=False, front="http"),
    Pair("httpup_h2025", "stdio front, handshake x HTTP up", "legacy", upstream_legacy=False, upstream="http"),
    Pair("httpboth", "HTTP front x HTTP upstream", "auto", upstream_legacy=False, front="http", upstream="http"),
    Pair(
        "httpboth_h2025",
        "HTTP front, handshake x HTTP up",
        "legacy",
        upstream_legacy=False,
        front="http",
        upstream="http",
    ),
)
"""The pairs measured here, in order. ``httpfront_h2025`` (round 17): most HTTP hosts that ship
today speak the handshake era, whose stateful sessions the HTTP front served on the SDK's path
until round 18. ``httpfront_h2025_u2026`` (round 18): such a host, and a server that moved on.
``httpup_h2025`` (round 20): the stdio hosts that ship today speak the handshake era, and reach
remote servers through the sidecar."""
PAIRS_ENV: Final = "BENCH_P2_PAIRS"
TELEMETRY_ENV: Final = "BENCH_P2_TELEMETRY"
"""``1``: the sidecar of every pair runs with ``[supervisor.telemetry] enabled = true`` (issue 47: its cost per pair).

The exporters are what the environment names (``OTEL_TRACES_EXPORTER``, ``OTEL_METRICS_EXPORTER``, which
the sidecar inherits): ``none`` for traces measures making the spans; metrics ``none`` records no histograms
at all (nothing would read them), ``console`` records them as a deployment with metrics does; ``otlp`` with a
collector, exporting too."""
Upstreams = dict[str, int]
"""Per variant, the pid of its upstream when that is not a child of its middle process (an HTTP upstream's)."""
PATH_PARTS: Final = ("host", "middle", "upstream")


def telemetry_as_asked(supervisor: dict[str, Any]) -> dict[str, Any]:
    """A sidecar's ``[supervisor]`` table with telemetry on when ``BENCH_P2_TELEMETRY=1`` asks for it."""
    if os.environ.get(TELEMETRY_ENV) == "1":
        return {**supervisor, "telemetry": {"enabled": True}}
    return supervisor


async def open_pair(
    stack: AsyncExitStack, pair: Pair, workdir: Path
) -> tuple[dict[str, Host], dict[str, int], Upstreams]:
    """Start ``pair``'s direct and sidecar variants on ``stack``.

    Returns their warm hosts, their middle processes' pids, and the pid of each
    variant's upstream that is not its middle process's child (``Upstreams``).
    """
    # The HTTP helpers of tests/sidecar.py give their children the test's marker; here the
    # run's own marker is both, so that `reap_marked` finds whatever they start.
    os.environ.setdefault(MARK_ENV, bench_mark())
    hosts: dict[str, Host] = {}
    pids: dict[str, int] = {}
    upstreams: Upstreams = {}
    args = pair.fixture_args
    if pair.upstream == "http":
        fixture = await stack.enter_async_context(open_http_fixture(*args, log=workdir / "direct.jsonl"))
        assert fixture.process is not None
        hosts["direct"] = await stack.enter_async_context(open_http_host(fixture.url, "", pair.direct_mode))
        pids["direct"] = fixture.process.pid
        upstream_fixture = await stack.enter_async_context(open_http_fixture(*args, log=workdir / "sidecar.jsonl"))
        assert upstream_fixture.process is not None
        upstreams["sidecar"] = upstream_fixture.process.pid
        server: dict[str, Any] = {"url": upstream_fixture.url}
    else:
        if pair.front == "http":
            fixture = await stack.enter_async_context(open_http_fixture(*args, log=workdir / "direct.jsonl"))
            assert fixture.process is not None
            hosts["direct"] = await stack.enter_async_context(open_http_host(fixture.url, "", pair.direct_mode))
            pids["direct"] = fixture.process.pid
        else:
            argv = fixture_argv(*args, "--log", str(workdir / "direct.jsonl"))
            hosts["direct"] = await stack.enter_async_context(open_host(argv, mode=pair.direct_mode))
            pids["direct"] = hosts["direct"].pid
        server = fixture_server(*args, "--log", str(workdir / "sidecar.jsonl"), env={BENCH_MARK_ENV: bench_mark()})
    # An HTTP front announces its URL at level info (``open_http_sidecar`` reads that line).
    front = telemetry_as_asked(http_supervisor_table() if pair.front == "http" else {"log_level": "warning"})
    config = write_settings(workdir / "sidecar.toml", {"fx": server}, supervisor=front)
    if pair.front == "http":
        sidecar = await stack.enter_async_context(open_http_sidecar(config, token=FRONT_TOKEN))
        hosts["sidecar"] = await stack.enter_async_context(open_http_host(sidecar.url, FRONT_TOKEN, pair.host_mode))
        pids["sidecar"] = sidecar.process.pid
    else:
        hosts["sidecar"] = await stack.enter_async_context(open_host(sidecar_argv(config), mode=pair.host_mode))
        pids["sidecar"] = hosts["sidecar"].pid
    for variant, host in hosts.items():
        await _warm_up(host, TOOL[variant])
    return hosts, pids, upstreams


def _path_cpu(pid: int, upstream: int | None) -> tuple[float, float, float]:
    """CPU seconds so far of this host, the middle process ``pid``, and its upstream (children, or ``upstream``)."""
    host, middle, children = path_cpu_sec(pid)
    return host, middle, children + (cpu_sec(upstream) if upstream is not None else 0.0)


async def measure_pair(
    hosts: dict[str, Host],
    pids: dict[str, int],
    upstreams: Upstreams,
    *,
    rounds: int,
    c1_calls: int,
    c32_calls: int,
    large_calls: int,
) -> dict[str, Any]:
    """``rounds`` rounds of c1 (in turns), c32 (per variant) and 1 MB calls (in turns); medians over rounds.

    Around each variant's c32 window, the CPU of the three processes on its
    path (host, middle, upstream) is read too: at c32 on a small box they share
    the cores, so the ratio follows from these sums (``c32_cpu_us_per_call``).
    A direct variant's middle process is its upstream (its ``upstream`` is 0).
    """
    cps32: dict[str, list[float]] = {v: [] for v in hosts}
    p50: dict[str, list[float]] = {v: [] for v in hosts}
    cpu = dict.fromkeys(hosts, 0.0)
    cpu32 = {v: [0.0, 0.0, 0.0] for v in hosts}  # host, middle, upstream CPU-s in c32 windows
    added: list[float] = []  # sidecar minus direct latency of calls made one after the other (s)
    paired_large: list[float] = []  # direct / sidecar time of 1 MB calls made one after the other
    for _ in range(rounds):
        cpu_before = {v: cpu_sec(pids[v]) for v in hosts}
        c1_latencies = await _measure_c1_interleaved(hosts, c1_calls)
        added.extend(s - d for s, d in zip(c1_latencies["sidecar"], c1_latencies["direct"], strict=True))
        for variant, host in hosts.items():
            p50[variant].append(percentile(c1_latencies[variant], 0.5) * 1000)
            before32 = _path_cpu(pids[variant], upstreams.get(variant))
            cps32[variant].append(await _measure_concurrent(host, TOOL[variant], c32_calls, CONCURRENCY))
            after32 = _path_cpu(pids[variant], upstreams.get(variant))
            for part, (after, before) in enumerate(zip(after32, before32, strict=True)):
                cpu32[variant][part] += after - before
        for variant in hosts:
            cpu[variant] += cpu_sec(pids[variant]) - cpu_before[variant]
        large_times = await _measure_c1_interleaved(hosts, large_calls, text=LARGE_TEXT)
        paired_large.extend(d / s for s, d in zip(large_times["sidecar"], large_times["direct"], strict=True))
    calls = rounds * (c1_calls + c32_calls)
    c32 = {v: round(median(cps32[v]), 1) for v in hosts}
    cpu_us = {v: round(cpu[v] / calls * 1e6, 1) for v in hosts}
    calls32 = rounds * c32_calls
    path_us = {
        v: {part: round(x / calls32 * 1e6, 1) for part, x in zip(PATH_PARTS, cpu32[v], strict=True)} for v in hosts
    }
    return {
        "cps_c32": c32,
        "c32_ratio": round(c32["sidecar"] / c32["direct"], 3),
        "p50_ms_c1": {v: round(median(p50[v]), 3) for v in hosts},
        "added_latency_ms_paired_median_c1": round(median(added) * 1000, 3),
        "cpu_us_per_call": cpu_us,
        "sidecar_cpu_us_per_call": cpu_us["sidecar"],
        "1mb_ratio_paired_median": round(median(paired_large), 3),
        "c32_cpu_us_per_call": path_us,
        "c32_ratio_cpu_bound": cpu_bound_ratio(path_us),
    }


def cpu_bound_ratio(path_us: dict[str, dict[str, float]]) -> dict[str, float]:
    """What the CPU per call at c32 says the c32 ratio is, if the box's cores are the bound.

    ``all``: direct's path CPU over the sidecar's (the three processes share the
    cores; the measured ratio is near it when c32 is CPU-bound). ``free middle``:
    the same with the sidecar's own CPU left out, the ratio a proxy that cost
    nothing would reach: what the host's and upstream's own costs leave over.
    """
    direct = sum(path_us["direct"].values())
    sidecar = path_us["sidecar"]
    total = sum(sidecar.values())
    return {
        "all": round(direct / total, 3) if total else 0.0,
        "free middle": round(direct / (total - sidecar["middle"]), 3) if total > sidecar["middle"] else 0.0,
    }


async def _run_pair(pair: Pair, **counts: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        figures: dict[str, Any] = {"error": None}
        try:
            with trio.fail_after(PAIR_BOUND_SEC):
                async with AsyncExitStack() as stack:
                    hosts, pids, upstreams = await open_pair(stack, pair, workdir)
                    figures["eras"] = {v: str(h.session.protocol_version) for v, h in hosts.items()}
                    figures |= await measure_pair(hosts, pids, upstreams, **counts)
        except Exception as exc:
            figures["error"] = _leaves(exc)
        finally:
            await reap_marked(f"p2 {pair.key}")
        figures["upstream_saw"] = {v: _log_summary(workdir / f"{v}.jsonl") for v in ("direct", "sidecar")}
    return {f"p2_{pair.key}_{name}": value for name, value in figures.items()}


def _leaves(exc: BaseException) -> str:
    """``exc`` as its innermost exceptions (a nursery wraps what failed in groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_leaves(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def _cell(value: float | None, unit: str = "") -> str:
    return "failed" if value is None else f"{value:g}{unit}"


def table(result: dict[str, Any]) -> list[str]:
    """The markdown tables of every pair in ``result``: today's from ``call_path``'s keys, the others from theirs.

    The second table is each pair's CPU per call at c32 on the three processes
    of each path, and the c32 ratio those sums give (``cpu_bound_ratio``). A
    pair this run did not measure (``BENCH_P2_PAIRS``) has no row.
    """
    rows = [
        "| pair | c32 sidecar/direct | added c1 (paired) | sidecar CPU/call | 1 MB sidecar/direct |",
        "|---|---|---|---|---|",
        f"| {TODAY.label} (today's keys) | {_cell(result.get('p2_ratio_sidecar_vs_direct_c32'))}"
        f" | {_cell(result.get('p2_added_latency_ms_paired_median_c1'), ' ms')}"
        f" | {_cell(result.get('p2_sidecar_cpu_us_per_call'), ' us')}"
        f" | {_cell(result.get('p2_ratio_sidecar_vs_direct_1mb_paired_median'))}"
        f" (floor {_cell(result.get('p2_ratio_floor_vs_direct_1mb_paired_median'))}) |",
    ]
    measured = [pair for pair in PAIRS if f"p2_{pair.key}_error" in result]
    keyed = [(TODAY.label + " (today's keys)", "p2_")] if "p2_c32_cpu_us_per_call" in result else []
    keyed += [(pair.label, f"p2_{pair.key}_") for pair in measured]
    for pair in measured:
        key = f"p2_{pair.key}_"
        rows.append(
            f"| {pair.label} | {_cell(result.get(key + 'c32_ratio'))}"
            f" | {_cell(result.get(key + 'added_latency_ms_paired_median_c1'), ' ms')}"
            f" | {_cell(result.get(key + 'sidecar_cpu_us_per_call'), ' us')}"
            f" | {_cell(result.get(key + '1mb_ratio_paired_median'))} |"
        )
    rows += [
        "",
        "| pair | c32 CPU us/call direct (host + upstream) | sidecar (host + middle + upstream) "
        "| c32 ratio the CPU says | with a free middle |",
        "|---|---|---|---|---|",
    ]
    for label, key in keyed:
        path, bound = result.get(key + "c32_cpu_us_per_call"), result.get(key + "c32_ratio_cpu_bound")
        if path is None or bound is None:
            rows.append(f"| {label} | failed | failed | failed | failed |")
            continue
        direct, sidecar = path["direct"], path["sidecar"]
        rows.append(
            f"| {label} | {direct['host']:g} + {direct['middle']:g}"
            f" | {sidecar['host']:g} + {sidecar['middle']:g} + {sidecar['upstream']:g}"
            f" | {bound['all']:g} | {bound['free middle']:g} |"
        )
    return rows


async def run_pairs(*, rounds: int, c1_calls: int, c32_calls: int, large_calls: int) -> dict[str, Any]:
    """Measure every pair of ``PAIRS`` in turn; its figures under ``p2_<pair>_`` keys.

    ``BENCH_P2_PAIRS`` (comma-separated keys, e.g. ``h2025_u2025,httpfront``) measures only those.
    """
    result: dict[str, Any] = {}
    wanted = {key for key in os.environ.get(PAIRS_ENV, "").split(",") if key}
    for pair in PAIRS:
        if wanted and pair.key not in wanted:
            continue
        figures = await _run_pair(pair, rounds=rounds, c1_calls=c1_calls, c32_calls=c32_calls, large_calls=large_calls)
        key = f"p2_{pair.key}_"
        seen = f"eras {figures.get(key + 'eras')}   upstream saw {figures[key + 'upstream_saw']}"
        error = figures[key + "error"]
        print(f"  {pair.key:12} {pair.label:28} " + (f"FAILED: {error}; {seen}" if error else seen), flush=True)
        result |= figures
    return result
