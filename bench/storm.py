"""p4: a ``list_changed`` storm, and the latency of one isolated change.

One fixture server (``--tools echo,add_tool,storm``) sits behind ``python -m supervisor
run``; the host (``mode="auto"``, holding a ``subscriptions/listen`` stream) calls
``mcp__fx__storm`` with 1,000 changes over 1 s: the fixture adds ``storm_<i>`` and
announces ``list_changed`` each time. Counted: the ``tools/list`` requests the fixture
logged after the initial sync (the burst's fetches, after the catalog settled), and
whether the host's final catalog equals the server's final list.

Separately (before the storm, on the small catalog), ``mcp__fx__add_tool`` is called a
few times, spaced out; measured from the call's return to the host receiving the
sidecar's change notice. The same is repeated after the storm with ~1,000 tools listed.

The sidecar is stopped by closing its stdin; leftovers carrying the run's marker are
killed and reported.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Final

import trio

from bench.harness import (
    BENCH_MARK_ENV,
    Host,
    bench_mark,
    fixture_server,
    median,
    open_host,
    reap_marked,
    sidecar_argv,
    write_settings,
)

STORM_COUNT: Final = 1000
STORM_SEC: Final = 1.0
SETTLE_BOUND_SEC: Final = 15.0
QUIET_SEC: Final = 1.0
"""After the catalog matches, wait this long for any straggling fetch before counting."""
NOTICE_BOUND_SEC: Final = 5.0
PREFIX: Final = "mcp__fx__"


def _tools_lists(log: Path) -> int:
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return sum(1 for e in events if e["event"] == "request" and e.get("method") == "tools/list")


async def _storm(host: Host, log: Path) -> tuple[int, bool, float]:
    initial = await host.wait_tools(lambda n: f"{PREFIX}storm" in n, bound_sec=SETTLE_BOUND_SEC)
    await trio.sleep(QUIET_SEC)  # let the initial sync's fetches land before taking the baseline
    baseline = _tools_lists(log)
    expected = {n.removeprefix(PREFIX) for n in initial} | {f"storm_{i}" for i in range(STORM_COUNT)}
    result = await host.session.call_tool(f"{PREFIX}storm", {"count": STORM_COUNT, "seconds": STORM_SEC})
    if result.is_error:
        raise RuntimeError(f"storm failed: {result}")
    final: list[str] | None
    try:
        final = await host.wait_tools(
            lambda n: {x.removeprefix(PREFIX) for x in n} == expected, bound_sec=SETTLE_BOUND_SEC
        )
    except AssertionError:  # never settled on the server's list: reported, not raised
        final = None
    await trio.sleep(QUIET_SEC)
    names = await host.tool_names()
    exact = final is not None and len(names) == len(expected) and {x.removeprefix(PREFIX) for x in names} == expected
    return _tools_lists(log) - baseline, exact, (len(names))


async def _single_changes(host: Host, repeats: int, *, tag: str) -> list[float]:
    samples: list[float] = []
    for k in range(repeats):
        await trio.sleep(0.4)  # let any debounce window from the previous change close
        seen = host.notices
        result = await host.session.call_tool(f"{PREFIX}add_tool", {"name": f"single_{tag}_{k}"})
        returned = trio.current_time()
        if result.is_error:
            raise RuntimeError(f"add_tool failed: {result}")
        with trio.move_on_after(NOTICE_BOUND_SEC):
            await host.wait_notice(after=seen)
        if host.notices > seen:
            samples.append((host.notice_times[seen] - returned) * 1000)
    return samples


async def run(*, quick: bool) -> dict[str, Any]:
    repeats = 3 if quick else 10
    big_repeats = 1 if quick else 3
    print(f"p4 storm: {STORM_COUNT} list_changed over {STORM_SEC:g} s; then {repeats} isolated changes")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        log = workdir / "fx.jsonl"
        server = fixture_server("--tools", "echo,add_tool,storm", "--log", str(log), env={BENCH_MARK_ENV: bench_mark()})
        config = write_settings(workdir / "p4.toml", {"fx": server}, supervisor={"log_level": "warning"})
        try:
            async with open_host(sidecar_argv(config), mode="auto") as host:
                era = host.session.protocol_version
                singles = await _single_changes(host, repeats, tag="small")
                fetches, exact, final_count = await _storm(host, log)
                singles_big = await _single_changes(host, big_repeats, tag="big")
        finally:
            await reap_marked("p4")
    single_ms = median(singles)
    print(f"  host era {era}; burst fetches (tools/list after the initial sync): {fetches} (target <= 3)")
    print(f"  final catalog exact: {exact} ({final_count} tools)")
    print(
        f"  single change, call return -> host notice: median {single_ms:.1f} ms over {len(singles)}/{repeats}"
        f" (target <= 200); samples {[round(s, 1) for s in singles]}"
    )
    print(f"  the same with ~1,000 tools listed (after the storm): {[round(s, 1) for s in singles_big]} ms")
    return {
        "p4_fetches": fetches,
        "p4_final_catalog_exact": exact,
        "p4_single_change_to_host_ms": round(single_ms, 1),
        "p4_single_change_notices": f"{len(singles)}/{repeats}",
        "p4_single_change_to_host_ms_1000_tools": round(median(singles_big), 1),
    }
