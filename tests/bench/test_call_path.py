"""p2's measurement plumbing (``bench.call_path``, issue 11): paired 1 MB calls, the processes on a path."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
import trio

from bench.call_measure import LARGE_TEXT, TOOL, _measure_c1_interleaved
from bench.call_pairs import PAIRS, TODAY, cpu_bound_ratio, measure_pair, table
from bench.harness import child_pids
from tests.sidecar import Host, scaled

BOUND_SEC = scaled(10.0)


@dataclass
class _Result:
    is_error: bool = False


@dataclass
class _Session:
    variant: str
    calls: list[tuple[str, str, int]]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> _Result:
        self.calls.append((self.variant, name, len(arguments["text"])))
        await trio.lowlevel.checkpoint()
        return _Result()


@dataclass
class _Host:
    session: _Session
    calls: list[tuple[str, str, int]] = field(default_factory=list)


async def test_paired_1mb_calls_take_turns_call_by_call_rotating_who_goes_first_each_with_the_1mb_text() -> None:
    calls: list[tuple[str, str, int]] = []
    hosts = {v: cast(Host, _Host(_Session(v, calls))) for v in ("direct", "sidecar")}
    with trio.fail_after(BOUND_SEC):
        times = await _measure_c1_interleaved(hosts, 3, text=LARGE_TEXT)
    assert [variant for variant, _, _ in calls] == ["direct", "sidecar", "sidecar", "direct", "direct", "sidecar"]
    assert {(variant, name) for variant, name, _ in calls} == {("direct", TOOL["direct"]), ("sidecar", TOOL["sidecar"])}
    assert {size for _, _, size in calls} == {1_000_000}
    assert {v: len(t) for v, t in times.items()} == {"direct": 3, "sidecar": 3}


def test_p2_measures_every_era_pair_and_both_http_sides_with_direct_speaking_the_upstreams_era() -> None:
    eras = {(pair.host_mode, pair.upstream_legacy) for pair in (TODAY, *PAIRS) if pair.front == pair.upstream}
    assert eras == {("auto", False), ("auto", True), ("legacy", False), ("legacy", True)}
    sides = {(pair.front, pair.upstream) for pair in PAIRS}
    assert sides == {("stdio", "stdio"), ("http", "stdio"), ("stdio", "http"), ("http", "http")}
    for front, upstream in sides - {("stdio", "stdio")}:  # both hosts' eras wherever HTTP is on a side
        assert {p.host_mode for p in PAIRS if (p.front, p.upstream) == (front, upstream)} == {"auto", "legacy"}
    assert len({pair.key for pair in (TODAY, *PAIRS)}) == len(PAIRS) + 1
    for pair in (TODAY, *PAIRS):
        assert pair.direct_mode == ("legacy" if pair.upstream_legacy else "auto")
        assert ("--legacy-only" in pair.fixture_args) == pair.upstream_legacy


async def test_a_pair_is_measured_in_turns_at_c1_and_1mb_and_alone_at_c32_and_reported_as_ratios() -> None:
    calls: list[tuple[str, str, int]] = []
    hosts = {v: cast(Host, _Host(_Session(v, calls))) for v in ("direct", "sidecar")}
    with trio.fail_after(BOUND_SEC):
        figures = await measure_pair(
            hosts, dict.fromkeys(hosts, os.getpid()), {}, rounds=2, c1_calls=3, c32_calls=40, large_calls=2
        )
    assert sum(size == len(LARGE_TEXT) for _, _, size in calls) == 2 * 2 * 2
    assert len(calls) == 2 * (2 * 3 + 2 * 40 + 2 * 2)
    assert set(figures["cps_c32"]) == set(figures["cpu_us_per_call"]) == {"direct", "sidecar"}
    for name in (
        "c32_ratio",
        "added_latency_ms_paired_median_c1",
        "sidecar_cpu_us_per_call",
        "1mb_ratio_paired_median",
    ):
        assert isinstance(figures[name], float), name
    # The c32 windows' CPU of each path's three processes (here all this one process: the same reading thrice).
    assert set(figures["c32_cpu_us_per_call"]) == {"direct", "sidecar"}
    assert set(figures["c32_cpu_us_per_call"]["sidecar"]) == {"host", "middle", "upstream"}
    assert set(figures["c32_ratio_cpu_bound"]) == {"all", "free middle"}


def test_the_cpu_bound_ratio_is_direct_path_cpu_over_the_sidecars_with_and_without_its_own() -> None:
    path = {
        "direct": {"host": 300.0, "middle": 200.0, "upstream": 0.0},
        "sidecar": {"host": 400.0, "middle": 100.0, "upstream": 200.0},
    }
    assert cpu_bound_ratio(path) == {"all": round(500 / 700, 3), "free middle": round(500 / 600, 3)}


def test_the_pair_table_has_a_row_per_measured_pair_today_from_its_own_keys_and_a_failed_pair_says_so() -> None:
    rows = table({"p2_ratio_sidecar_vs_direct_c32": 0.5, "p2_h2026_u2025_error": "RuntimeError: boom"})
    assert rows[2].startswith(f"| {TODAY.label} (today's keys) | 0.5 |")
    assert rows[3] == f"| {PAIRS[0].label} | failed | failed | failed | failed |"
    assert not any(pair.label in row for pair in PAIRS[1:] for row in rows)  # not measured in this run: no row
    assert rows[-1] == f"| {PAIRS[0].label} | failed | failed | failed | failed |"
    path = {
        "direct": {"host": 1.0, "middle": 2.0, "upstream": 0.0},
        "sidecar": {"host": 1.0, "middle": 0.5, "upstream": 2.0},
    }
    measured = {
        "p2_httpup_error": None,
        "p2_httpup_c32_cpu_us_per_call": path,
        "p2_httpup_c32_ratio_cpu_bound": cpu_bound_ratio(path),
    }
    assert table(measured)[-1] == "| stdio front x HTTP upstream | 1 + 2 | 1 + 0.5 + 2 | 0.857 | 1 |"


@pytest.mark.e2e
def test_the_children_of_a_process_include_one_forked_from_another_of_its_live_threads() -> None:
    # The sidecar forks its upstreams from a worker thread that stays alive (trio's thread cache):
    # /proc/<pid>/task/<pid>/children misses them. (A thread's children move to the main thread when it exits.)
    started: list[subprocess.Popen[bytes]] = []
    spawned, release = threading.Event(), threading.Event()

    def spawn() -> None:
        started.append(subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE))
        spawned.set()
        release.wait(BOUND_SEC)

    thread = threading.Thread(target=spawn)
    thread.start()
    try:
        assert spawned.wait(BOUND_SEC)
        (child,) = started
        try:
            assert child.pid in child_pids(os.getpid())
        finally:
            child.communicate(b"\n", timeout=BOUND_SEC)
    finally:
        release.set()
        thread.join(BOUND_SEC)
