"""p2: the call path: direct vs through the sidecar vs through FastMCP's proxy.

The same stdio fixture server (``--tools echo``) is called three ways, each by a
real `mcp.Client` host (``mode="auto"``) over the same small stdio transport:

* ``direct``: the host spawns the fixture itself;
* ``sidecar``: the host spawns ``python -m supervisor run`` configured with the fixture;
* ``fastmcp``: the host spawns a FastMCP proxy (``fastmcp`` pinned to ``FASTMCP_VERSION``,
  in its own virtual environment under ``bench/.venvs/fastmcp``, installed here if missing
  or at another version, so the anchor does not move between runs),
  built the way FastMCP's docs recommend for a stdio backend:
  ``create_proxy({"mcpServers": {...}})``, served over stdio.

All three stay connected for the whole benchmark; each round measures c1 (sequential
calls, direct and sidecar taking turns call by call so that they share the box's load,
then FastMCP alone), then every variant in turn (c32: 32 concurrent callers on one client
session, followed by a window of 1 MB calls of the same variant, the ``_windows`` keys),
then 1 MB calls (sequential calls whose argument and result are each a 1 MB text) taken
in turns like c1, and the reported numbers are medians over rounds. The added latency at
c1 is reported as the difference of the p50s and as the median of the differences of
adjacent calls; the 1 MB ratio as the ratio of the calls/s and as the median of the
ratios of adjacent calls.

Why the 1 MB calls take turns (issue 11): a 1 MB call is ~4-7 ms of three (direct: two)
processes' CPU on two cores, and what a call costs moves by 20-40% with where the
scheduler puts the processes (a 1 MB buffer read on the core that wrote it is cheap, on
the other one it is not; measured pinned: the sidecar's CPU per call 1.22-1.28 ms with
host, sidecar and fixture on one core, 1.44-1.61 ms with the sidecar alone on the other)
and with the host's and fixtures' heap state (0 to 250 fresh pages per call). Such a
state holds for a while and then changes: a window of 20 calls (0.1 s) per variant
catches one state per variant, so the ratio of two windows moved between 0.70 and 0.88
from run to run of the same code, with p1 before it or not (three pairs, alternating:
0.794 / 0.884 / 0.713 alone, 0.756 / 0.882 / 0.699 after p1). Calls that take turns
meet the same states: the median of the paired ratios was 0.770 / 0.764 / 0.766 in three
runs whose windows gave 0.801 / 0.803 / 0.727. The CPU
each variant's middle process spends per call (the sidecar, the FastMCP proxy; for
``direct``, the server itself) is read from its own ``/proc/<pid>/stat`` (user + system,
children excluded) around every measured window, and divided by the calls made in those
windows. Every process is stopped by closing its stdin (bounded), then its process group
is killed; leftovers carrying the run's marker are killed and reported.

That is the 2026-host x 2026-upstream stdio pair, under the keys its history uses; the
same run then measures the other era pairs and the HTTP front and upstream, direct vs
sidecar, under ``p2_<pair>_`` keys (``bench.call_pairs``), and prints one table of all.
The measuring primitives live in ``bench.call_measure`` (re-exported here).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Final

import trio

from bench.call_measure import (
    CONCURRENCY,
    LARGE_TEXT,
    TOOL,
    _log_summary,
    _measure_c1_interleaved,
    _measure_concurrent,
    _measure_large,
    _warm_up,
)
from bench.call_pairs import PATH_PARTS, cpu_bound_ratio, run_pairs, table, telemetry_as_asked
from bench.harness import (
    BENCH_MARK_ENV,
    REPO_ROOT,
    bench_mark,
    cpu_sec,
    fixture_argv,
    fixture_server,
    median,
    open_host,
    path_cpu_sec,
    percentile,
    quiet_host_heap,
    reap_marked,
    sidecar_argv,
    sidecar_argv_from,
    write_settings,
)
from tests.sidecar import Host

# Explicit, as the moved measuring primitives are imported from here (bench.call_io, after_p1, ...; tests).
__all__ = [
    "CHECKOUT_MARK",
    "CONCURRENCY",
    "FASTMCP_VERSION",
    "FLOOR",
    "LARGE_TEXT",
    "RELAY_MODES",
    "TOOL",
    "_argv",
    "_measure_c1_interleaved",
    "_measure_concurrent",
    "_measure_large",
    "_warm_up",
    "open_warm_hosts",
    "run",
    "tool_of",
]

FASTMCP_VERSION: Final = "4.2.3"
"""The FastMCP the proxy variant runs (the version the first published figures used)."""
FASTMCP_VENV: Final = REPO_ROOT / "bench" / ".venvs" / "fastmcp"
FASTMCP_PYTHON: Final = FASTMCP_VENV / "bin" / "python"
PROXY_SCRIPT: Final = FASTMCP_VENV / "bench_proxy.py"
INSTALL_BOUND_SEC: Final = 600.0
START_BOUND_SEC: Final = 60.0
VARIANTS: Final = ("direct", "sidecar", "fastmcp")
RELAY_MODES: Final = {"relay": [], "relay_checked": ["--check"], "relay_ahead": ["--ahead"]}
"""The variants that are a ``bench.relay_floor`` between the host and the fixture, and its flags."""
CHECKOUT_MARK: Final = "sidecar@"
"""Variant ``sidecar@<path>``: the sidecar of the checkout at ``<path>`` (``harness.sidecar_argv_from``), for A/Bs."""


def tool_of(variant: str) -> str:
    """The echo tool's name as ``variant`` lists it."""
    return TOOL["sidecar"] if variant.startswith(CHECKOUT_MARK) else TOOL[variant]


PAIRED_C1: Final = ("direct", "sidecar")
"""The variants whose c1 calls take turns (the added latency is the difference of theirs)."""
FLOOR: Final = "relay_checked"
"""The 1 MB figure's floor: a proxy that only copies and proves each line (``bench.relay_floor --check``)."""

# The docs' recommended shape: `create_proxy` over an `mcpServers` config dict, run over stdio.
_PROXY_SOURCE: Final = '''"""FastMCP stdio proxy for bench p2 (written by bench/call_path.py)."""
import json
import sys

from fastmcp.server import create_proxy

create_proxy(json.loads(sys.argv[1]), name="bench-fastmcp-proxy").run(transport="stdio", show_banner=False)
'''


def _fastmcp_version() -> str | None:
    if not FASTMCP_PYTHON.exists():
        return None
    done = subprocess.run(
        [str(FASTMCP_PYTHON), "-c", "import fastmcp, mcp; print(fastmcp.__version__)"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_fastmcp() -> tuple[str | None, str]:
    """Make sure the FastMCP venv holds ``FASTMCP_VERSION``; return (version or None, a note for the report)."""
    version = _fastmcp_version()
    note = "already installed"
    if version != FASTMCP_VERSION:
        print(
            f"  installing fastmcp=={FASTMCP_VERSION} into {FASTMCP_VENV.relative_to(REPO_ROOT)} (found {version}) ...",
            flush=True,
        )
        try:
            if not FASTMCP_PYTHON.exists():
                subprocess.run(["python3", "-m", "venv", str(FASTMCP_VENV)], check=True, timeout=INSTALL_BOUND_SEC)
            subprocess.run(
                [str(FASTMCP_VENV / "bin" / "pip"), "install", "-q", f"fastmcp=={FASTMCP_VERSION}"],
                check=True,
                timeout=INSTALL_BOUND_SEC,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"could not install fastmcp: {exc}"
        version = _fastmcp_version()
        note = "installed by this run"
        if version != FASTMCP_VERSION:
            return None, f"fastmcp=={FASTMCP_VERSION} installed but {version} imports"
    PROXY_SCRIPT.write_text(_PROXY_SOURCE, encoding="utf-8")
    return version, note


async def open_warm_hosts(
    stack: AsyncExitStack, variants: list[str], workdir: Path, *, large_calls: int = 0
) -> dict[str, Host]:
    """One host per variant on ``stack``, each warmed up by its first calls (then ``large_calls`` 1 MB calls).

    The host is this process; each variant's middle process logs to ``workdir/<variant>.jsonl``
    (``sidecar@<path>``: ``workdir/sidecar@<n>.jsonl``, the n-th variant).
    """
    hosts: dict[str, Host] = {}
    for variant in variants:
        name = f"{CHECKOUT_MARK}{len(hosts)}" if variant.startswith(CHECKOUT_MARK) else variant
        argv = _argv(variant, workdir, workdir / f"{name}.jsonl")
        # Not bounded by a scope here (it would misnest with the stack); the SDK bounds
        # the handshake, and the warm-up below is bounded.
        hosts[variant] = await stack.enter_async_context(open_host(argv, mode="auto"))
        with trio.fail_after(START_BOUND_SEC):
            await _warm_up(hosts[variant], tool_of(variant))
            if large_calls:
                await _measure_large(hosts[variant], tool_of(variant), large_calls)
    return hosts


def _argv(variant: str, workdir: Path, log: Path) -> list[str]:
    fixture_args = ["--tools", "echo", "--log", str(log)]
    if variant == "direct":
        return fixture_argv(*fixture_args)
    if variant in RELAY_MODES:
        return [sys.executable, "-m", "bench.relay_floor", *RELAY_MODES[variant], "--", *fixture_argv(*fixture_args)]
    if variant == "sidecar" or variant.startswith(CHECKOUT_MARK):
        server = fixture_server(*fixture_args, env={BENCH_MARK_ENV: bench_mark()})
        supervisor = telemetry_as_asked({"log_level": "warning"})
        config = write_settings(workdir / f"{log.stem}.toml", {"fx": server}, supervisor=supervisor)
        if variant == "sidecar":
            return sidecar_argv(config)
        return sidecar_argv_from(Path(variant.removeprefix(CHECKOUT_MARK)))(config)
    backend = fixture_server(*fixture_args, env={BENCH_MARK_ENV: bench_mark()})
    return [str(FASTMCP_PYTHON), str(PROXY_SCRIPT), json.dumps({"mcpServers": {"fx": backend}})]


async def run(*, quick: bool) -> dict[str, Any]:
    rounds, c1_calls, c32_calls = (1, 100, 480) if quick else (5, 300, 3200)
    large_calls = 5 if quick else 20
    print(f"p2 call path: fixture --tools echo; {rounds} rounds, c1 x {c1_calls} calls, c32 x {c32_calls} calls")
    fastmcp_version, fastmcp_note = await trio.to_thread.run_sync(ensure_fastmcp)
    variants = [v for v in VARIANTS if v != "fastmcp" or fastmcp_version is not None]
    if fastmcp_version is None:
        print(f"  FastMCP: UNAVAILABLE ({fastmcp_note}); its keys are null")
    else:
        print(f"  FastMCP {fastmcp_version} ({fastmcp_note}), create_proxy(mcpServers config), host mode=auto")
    cps1: dict[str, list[float]] = {v: [] for v in variants}
    cps32: dict[str, list[float]] = {v: [] for v in variants}
    cps_large: dict[str, list[float]] = {v: [] for v in variants}
    cps_large_windows: dict[str, list[float]] = {v: [] for v in variants}
    paired_large: list[float] = []  # direct / sidecar time of 1 MB calls made one after the other
    paired_floor: list[float] = []  # direct / floor time of the same turns
    cps_floor: list[float] = []
    p50: dict[str, list[float]] = {v: [] for v in variants}
    added: list[float] = []  # sidecar minus direct latency of calls made one after the other (s)
    cpu: dict[str, float] = dict.fromkeys(variants, 0.0)  # the middle process's CPU-s in measured windows
    cpu_large: dict[str, list[float]] = {v: [0.0, 0.0, 0.0] for v in variants}  # host, middle, upstream CPU-s
    cpu32: dict[str, list[float]] = {v: [0.0, 0.0, 0.0] for v in variants}  # the same, in c32 windows
    eras: dict[str, str] = {}
    logs: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        try:
            async with AsyncExitStack() as stack:
                hosts = await open_warm_hosts(stack, [*variants, FLOOR], workdir)
                floor_host = hosts.pop(FLOOR)
                eras = {variant: str(host.session.protocol_version) for variant, host in hosts.items()}
                quiet_host_heap()  # the host is this process: earlier benchmarks' heap is not the sidecar's cost
                for _ in range(rounds):
                    pids = {v: hosts[v].pid for v in variants}
                    cpu_before = {v: cpu_sec(pids[v]) for v in variants}
                    # FastMCP's proxy burns ~2.4 ms of CPU per call on the shared cores: it takes its
                    # c1 turn alone, so that it does not slow the calls the added latency compares.
                    c1_latencies = await _measure_c1_interleaved({v: hosts[v] for v in PAIRED_C1}, c1_calls)
                    for variant in variants:
                        if variant not in PAIRED_C1:
                            c1_latencies.update(await _measure_c1_interleaved({variant: hosts[variant]}, c1_calls))
                    for variant in variants:
                        cpu[variant] += cpu_sec(pids[variant]) - cpu_before[variant]
                        cps1[variant].append(c1_calls / sum(c1_latencies[variant]))
                        p50[variant].append(percentile(c1_latencies[variant], 0.5) * 1000)
                    added.extend(s - d for s, d in zip(c1_latencies["sidecar"], c1_latencies["direct"], strict=True))
                    for variant in variants:
                        before32 = path_cpu_sec(pids[variant])
                        cps32[variant].append(
                            await _measure_concurrent(hosts[variant], TOOL[variant], c32_calls, CONCURRENCY)
                        )
                        after32 = path_cpu_sec(pids[variant])
                        for i, (a, b) in enumerate(zip(after32, before32, strict=True)):
                            cpu32[variant][i] += a - b
                        cpu[variant] += after32[1] - before32[1]
                        cps_large_windows[variant].append(
                            await _measure_large(hosts[variant], TOOL[variant], large_calls)
                        )
                    # The 1 MB figure: direct, sidecar and the floor take turns call by call (as at c1),
                    # FastMCP alone.
                    before_large = {v: path_cpu_sec(pids[v]) for v in variants}
                    large_times = await _measure_c1_interleaved(
                        {**{v: hosts[v] for v in PAIRED_C1}, FLOOR: floor_host}, large_calls, text=LARGE_TEXT
                    )
                    cps_floor.append(large_calls / sum(large_times[FLOOR]))
                    paired_floor.extend(d / f for f, d in zip(large_times[FLOOR], large_times["direct"], strict=True))
                    for variant in variants:
                        if variant not in PAIRED_C1:
                            before_large[variant] = path_cpu_sec(pids[variant])
                            large_times.update(
                                await _measure_c1_interleaved({variant: hosts[variant]}, large_calls, text=LARGE_TEXT)
                            )
                        after_large = path_cpu_sec(pids[variant])
                        for i, (a, b) in enumerate(zip(after_large, before_large[variant], strict=True)):
                            # The host served the paired variants and the floor in one window: a third each.
                            shared = i == 0 and variant in PAIRED_C1
                            cpu_large[variant][i] += (a - b) / (len(PAIRED_C1) + 1) if shared else a - b
                        cps_large[variant].append(large_calls / sum(large_times[variant]))
                    paired_large.extend(
                        d / s for s, d in zip(large_times["sidecar"], large_times["direct"], strict=True)
                    )
        finally:
            await reap_marked("p2")
        logs = {v: _log_summary(workdir / f"{v}.jsonl") for v in variants}

    def med(samples: dict[str, list[float]], variant: str) -> float | None:
        return round(median(samples[variant]), 1) if variant in samples else None

    result: dict[str, Any] = {}
    for variant in VARIANTS:
        result[f"p2_{variant}_cps_c1"] = med(cps1, variant)
        result[f"p2_{variant}_cps_c{CONCURRENCY}"] = med(cps32, variant)
        result[f"p2_{variant}_cps_1mb"] = med(cps_large, variant)
        result[f"p2_{variant}_cps_1mb_windows"] = med(cps_large_windows, variant)
    direct32, sidecar32, fast32 = (result[f"p2_{v}_cps_c{CONCURRENCY}"] for v in VARIANTS)
    result["p2_ratio_sidecar_vs_direct_1mb"] = round(result["p2_sidecar_cps_1mb"] / result["p2_direct_cps_1mb"], 3)
    result["p2_ratio_sidecar_vs_direct_1mb_paired_median"] = round(median(paired_large), 3)
    result["p2_floor_cps_1mb"] = round(median(cps_floor), 1)
    result["p2_ratio_floor_vs_direct_1mb"] = round(result["p2_floor_cps_1mb"] / result["p2_direct_cps_1mb"], 3)
    result["p2_ratio_floor_vs_direct_1mb_paired_median"] = round(median(paired_floor), 3)
    result["p2_ratio_sidecar_vs_direct_1mb_windows"] = round(
        result["p2_sidecar_cps_1mb_windows"] / result["p2_direct_cps_1mb_windows"], 3
    )
    result["p2_ratio_sidecar_vs_direct_c32"] = round(sidecar32 / direct32, 3)
    result["p2_ratio_sidecar_vs_fastmcp_c32"] = round(sidecar32 / fast32, 3) if fast32 else None
    result["p2_added_latency_ms_p50_c1"] = round(median(p50["sidecar"]) - median(p50["direct"]), 3)
    result["p2_added_latency_ms_paired_median_c1"] = round(median(added) * 1000, 3)
    result["p2_p50_ms_c1"] = {v: round(median(p50[v]), 3) for v in variants}
    calls = rounds * (c1_calls + c32_calls)
    result["p2_cpu_us_per_call"] = {v: round(cpu[v] / calls * 1e6, 1) for v in variants}
    result["p2_sidecar_cpu_us_per_call"] = result["p2_cpu_us_per_call"]["sidecar"]
    # Who spends the 1 MB call's time: host (this process), middle process, its upstream (none for direct).
    per_large = rounds * large_calls / 1e3
    result["p2_1mb_cpu_ms_per_call"] = {
        v: dict(zip(("host", "middle", "upstream"), (round(x / per_large, 2) for x in t), strict=True))
        for v, t in cpu_large.items()
    }
    per32 = rounds * c32_calls / 1e6
    result["p2_c32_cpu_us_per_call"] = {
        v: dict(zip(PATH_PARTS, (round(x / per32, 1) for x in cpu32[v]), strict=True)) for v in variants
    }
    result["p2_c32_ratio_cpu_bound"] = cpu_bound_ratio(result["p2_c32_cpu_us_per_call"])
    result["p2_fastmcp_version"] = fastmcp_version
    for variant in variants:
        print(
            f"  {variant:8} c1 {result[f'p2_{variant}_cps_c1']:8.1f} calls/s (p50 {median(p50[variant]):6.2f} ms)"
            f"   c{CONCURRENCY} {result[f'p2_{variant}_cps_c{CONCURRENCY}']:8.1f} calls/s"
            f"   1MB {result[f'p2_{variant}_cps_1mb']:6.1f} calls/s"
            f"   cpu {result['p2_cpu_us_per_call'][variant]:7.1f} us/call"
            f"   era {eras[variant]}   upstream saw {logs[variant]}"
        )
    print(f"  sidecar/direct c32 {result['p2_ratio_sidecar_vs_direct_c32']} (target >= 0.8)")
    print(f"  sidecar/fastmcp c32 {result['p2_ratio_sidecar_vs_fastmcp_c32']} (target >= 5)")
    print(
        f"  sidecar/direct with 1 MB results {result['p2_ratio_sidecar_vs_direct_1mb']} (target >= 0.8);"
        f" median of paired ratios {result['p2_ratio_sidecar_vs_direct_1mb_paired_median']};"
        f" in separate windows {result['p2_ratio_sidecar_vs_direct_1mb_windows']}"
    )
    print(
        f"  the floor (a relay that copies and proves each line) / direct with 1 MB results"
        f" {result['p2_ratio_floor_vs_direct_1mb']}; median of paired ratios"
        f" {result['p2_ratio_floor_vs_direct_1mb_paired_median']}"
    )
    print(f"  CPU ms per 1 MB call (host, middle, upstream): {result['p2_1mb_cpu_ms_per_call']}")
    print(
        f"  CPU us per c32 call (host, middle, upstream): {result['p2_c32_cpu_us_per_call']};"
        f" the c32 ratio they say: {result['p2_c32_ratio_cpu_bound']}"
    )
    print(
        f"  added p50 latency at c1: {result['p2_added_latency_ms_p50_c1']} ms (target <= 0.3);"
        f" median of paired differences {result['p2_added_latency_ms_paired_median_c1']} ms"
    )
    print(f"  sidecar CPU per call: {result['p2_sidecar_cpu_us_per_call']} us (target <= 150)")
    print("p2 per era pair and front (bench.call_pairs): direct vs sidecar", flush=True)
    result |= await run_pairs(rounds=rounds, c1_calls=c1_calls, c32_calls=c32_calls, large_calls=large_calls)
    print("\n".join(f"  {row}" for row in table(result)))
    sys.stdout.flush()
    return result
