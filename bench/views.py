"""p8: what views and tool transforms cost, shown (issue 26).

``python -m bench.views [--quick]`` (or ``python -m bench p8``). Two parts, one run:

* **Listing tokens: a view of every tool against a search view.** One settings file
  holds the real third-party servers of ``bench.search.SERVERS`` (installed by
  ``tests/interop/install.sh``; a server not installed is named and left out) and the
  fixture server with generated echo tools (``--extra-tools``), enough that the catalog
  has at least ``MIN_TOOLS``. Two views over all of them: ``everything_listed``
  (``catalog = "all"``) and ``searchable`` (``catalog = "search"``, ``always_visible``
  naming ``ALWAYS_VISIBLE``). A real `mcp.Client` host connects to ``python -m
  supervisor run --view NAME`` once per view and per host era (``mode="auto"``, which
  gets 2026-07-28, and ``mode="legacy"``, the initialize handshake), lists every page
  once the catalog has settled, and the listing it received is estimated with the
  project's estimator (``catalog.token_estimate.estimate_tokens`` over the ``Tool``
  models the host parsed). ``python -m supervisor tools --tokens`` over the same file
  is run too: its output is printed, its per-view rows are checked against each era's
  figures, and the fields one era's host gets and the other's does not are counted.
  The unsuffixed keys (``p8_tokens_all``) are the 2026 host's.
* **The call path of a transformed tool against an untransformed one.** One sidecar
  runs the fixture twice, ``plain`` and ``shaped``, each ``--tools tag``. ``tag``
  (``text``, ``seconds``: sleep, then answer ``fx:<text>``) is the fixture tool with a
  spare argument, so ``shaped`` can carry every kind of transform at once: a new
  ``name`` and ``description``, ``text`` renamed to ``message`` and re-described, and
  ``seconds`` hidden with the default 0. The host calls ``mcp__plain__tag`` with
  ``{"text": "x", "seconds": 0}`` and ``mcp__shaped__say`` with ``{"message": "x"}``,
  so the upstream gets the same arguments either way; every answer is checked
  (``fx:x``), which proves the rename and the injected default on every call. Per
  round: c1 (sequential calls, the two tools taking turns call by call, who goes first
  alternating, as p2's paired c1), then ``C32_PAIRS`` pairs of c32 windows (32
  concurrent callers on one session, one tool per window, which goes first
  alternating); the sidecar's CPU (its threads' ``schedstat``) is read around each
  c32 window. Reported: each tool's per-call p50 µs (median over rounds), the median of
  the paired c1 ratios shaped / plain, each tool's c32 calls/s (median over windows),
  their ratio and the median of the paired windows' ratios, and the sidecar's CPU per
  c32 call. Done once per host era, each on a sidecar of its own: a 2026 stdio host's
  calls take the splice, a handshake-era host's the SDK path (``host.pipeline.adapters``).

Concurrency: this process is every host; each sidecar is started by
``harness.open_host`` (stopped by closing its stdin, bounded, then its process group is
killed), its servers carry the run's marker, and ``reap_marked`` kills whatever is left
at the end of each part. The two views' listing sidecars of one era run side by side
(nothing of them is timed); every wait on them is bounded by ``LIST_BOUND_SEC``, the
calls by ``CALL_BOUND_SEC`` a round.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any, Final

import mcp_types as types
import trio
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from bench.harness import (
    BENCH_MARK_ENV,
    REPO_ROOT,
    bench_mark,
    fixture_server,
    marked_env,
    median,
    open_host,
    percentile,
    quiet_host_heap,
    reap_marked,
    sidecar_argv,
    write_settings,
)
from bench.search import SERVERS, RealServer
from supervisor.catalog.token_estimate import estimate_tokens
from tests.sidecar import Host

MIN_TOOLS: Final = 150
FIXTURE_MIN_TOOLS: Final = 24
EXPECTED_TOOLS: Final = {
    "everything": 17,
    "fs": 14,
    "memory": 9,
    "thinking": 1,
    "github": 26,
    "playwright": 25,
    "notion": 24,
    "time": 2,
    "git": 12,
    "fetch": 1,
}
"""What each real server listed through the sidecar at its pinned version: the fixture pads the catalog past
``MIN_TOOLS`` when some are not installed."""
ALWAYS_VISIBLE: Final = ("mcp__fs__read_text_file", "mcp__git__git_status", "mcp__time__get_current_time")
VIEW_ALL: Final = "everything_listed"
VIEW_SEARCH: Final = "searchable"
SEARCH_TARGET: Final = 0.05
LIST_BOUND_SEC: Final = 90.0
SETTLE_SEC: Final = 1.0
"""A listing counts as settled when it is unchanged this long after it looked complete."""
POLL_SEC: Final = 0.5

START_BOUND_SEC: Final = 60.0
CALL_BOUND_SEC: Final = 120.0
CONCURRENCY: Final = 32
WARM_CALLS: Final = 100
C32_PAIRS: Final = 2
"""Pairs of c32 windows (plain then shaped, or the other way round, alternating) per round."""
PLAIN: Final = ("mcp__plain__tag", {"text": "x", "seconds": 0})
SHAPED: Final = ("mcp__shaped__say", {"message": "x"})
TAG_TRANSFORM: Final = {
    "name": "say",
    "description": "Say the message back, prefixed with the server's name.",
    "arguments": {
        "text": {"rename": "message", "description": "What to say back."},
        "seconds": {"hide": True, "default": 0},
    },
}
ERAS: Final = {"2026": "auto", "handshake": "legacy"}
"""Each host era's key suffix and the ``mode=`` of ``mcp.Client`` that gives it."""
ERA_OF: Final = {mode: era for era, mode in ERAS.items()}
PRIMARY_ERA: Final = "2026"
"""The era of the unsuffixed listing keys (``p8_tokens_all``): a host in ``mode="auto"``."""


# -- part 1: listing tokens ---------------------------------------------------------------


def _real_table(server: RealServer, tmp: str) -> dict[str, Any]:
    argv = [arg.replace("{tmp}", tmp) for arg in server.argv]
    return {"command": argv[0], "args": argv[1:], "cwd": tmp, "env": {BENCH_MARK_ENV: bench_mark()}}


def listing_settings(path: Path, tmp: str, present: list[RealServer]) -> tuple[Path, int]:
    """The settings of part 1 at ``path``; and how many tools the fixture lists."""
    expected = sum(EXPECTED_TOOLS.get(server.name, 0) for server in present)
    fixture_tools = max(FIXTURE_MIN_TOOLS, MIN_TOOLS + 4 - expected)
    servers = {server.name: _real_table(server, tmp) for server in present}
    servers["fx"] = fixture_server(
        "--tools", "echo", "--extra-tools", str(fixture_tools - 1), env={BENCH_MARK_ENV: bench_mark()}
    )
    views = {
        VIEW_ALL: {"catalog": "all"},
        VIEW_SEARCH: {"catalog": "search", "always_visible": list(ALWAYS_VISIBLE)},
    }
    return write_settings(path, servers, supervisor={"log_level": "warning"}, views=views), fixture_tools


async def _list_all(host: Host) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        page = await host.session.list_tools(cursor=cursor, cache_mode="bypass")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


async def settled_listing(host: Host, complete: Callable[[list[types.Tool]], bool]) -> list[types.Tool]:
    """The host's listing once ``complete`` holds and it stays the same for ``SETTLE_SEC``; the caller bounds this."""
    while True:
        seen = host.notices
        tools = await _list_all(host)
        if complete(tools):
            await trio.sleep(SETTLE_SEC)
            again = await _list_all(host)
            if [t.name for t in again] == [t.name for t in tools]:
                return again
            continue
        with trio.move_on_after(POLL_SEC):
            await host.wait_notice(after=seen)


def _owners(tools: list[types.Tool]) -> set[str]:
    return {tool.name.removeprefix("mcp__").split("__", 1)[0] for tool in tools if tool.name.startswith("mcp__")}


async def _measure_view(
    config: Path,
    view: str,
    mode: str,
    complete: Callable[[list[types.Tool]], bool],
    into: dict[tuple[str, str], list[types.Tool]],
) -> None:
    async with open_host([*sidecar_argv(config), "--view", view], mode=mode) as host:
        with trio.fail_after(LIST_BOUND_SEC):
            into[ERA_OF[mode], view] = await settled_listing(host, complete)


def parse_tokens_output(text: str) -> dict[str, dict[str, tuple[int, int]]]:
    """The rows of ``tools --tokens`` (servers and views alike): era → name → (tools, tokens).

    The command prints one tokens column per era: the 2026 host's, then the handshake-era host's.
    """
    rows: dict[str, dict[str, tuple[int, int]]] = {"2026": {}, "handshake": {}}
    for line in text.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        numbers = [cell.replace(",", "") for cell in cells[1:4]]
        if len(cells) >= 4 and all(number.isdigit() for number in numbers):
            rows["2026"][cells[0]] = (int(numbers[0]), int(numbers[1]))
            rows["handshake"][cells[0]] = (int(numbers[0]), int(numbers[2]))
    return rows


async def _tokens_command(config: Path) -> str:
    argv = [*sidecar_argv(config)[:3], "tools", "--tokens", "--config", str(config)]
    with trio.fail_after(LIST_BOUND_SEC):
        done = await trio.run_process(
            argv, capture_stdout=True, stderr=subprocess.DEVNULL, cwd=str(REPO_ROOT), env=marked_env(), check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}")
    return done.stdout.decode()


def fields_only_in(first: list[types.Tool], second: list[types.Tool]) -> Counter[str]:
    """How many tools of ``first`` carry each top-level field that the same tool of ``second`` lacks."""
    others = {tool.name: tool.model_dump(by_alias=True, exclude_none=True) for tool in second}
    found: Counter[str] = Counter()
    for tool in first:
        found.update(set(tool.model_dump(by_alias=True, exclude_none=True)) - set(others.get(tool.name, {})))
    return found


async def listing_tokens() -> dict[str, Any]:
    present = [server for server in SERVERS if server.installed]
    for server in SERVERS:
        if not server.installed:
            print(f"  {server.name} ({server.package}) is not installed: run tests/interop/install.sh")
    names = {server.name for server in present} | {"fx"}
    # The always-visible tools of the servers that are here: the search view's listing is complete with them.
    wanted = {name for name in ALWAYS_VISIBLE if name.split("__")[1] in names}
    complete: dict[str, Callable[[list[types.Tool]], bool]] = {
        VIEW_ALL: lambda tools: _owners(tools) >= names,
        VIEW_SEARCH: lambda tools: wanted <= {tool.name for tool in tools},
    }
    listed: dict[tuple[str, str], list[types.Tool]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        config, fixture_tools = listing_settings(Path(tmp) / "settings.toml", tmp, present)
        try:
            for mode in ERAS.values():  # one era at a time: 22 servers starting at once is enough for 2 cores
                async with trio.open_nursery() as nursery:
                    for view, done in complete.items():
                        nursery.start_soon(_measure_view, config, view, mode, done, listed)
            cli = await _tokens_command(config)
        finally:
            await reap_marked("p8 listing")
    rows = parse_tokens_output(cli)
    versions = {"2026": LATEST_MODERN_VERSION, "handshake": LATEST_HANDSHAKE_VERSION}
    measured = {key: (len(tools), estimate_tokens(tools, versions[key[0]])) for key, tools in listed.items()}
    print(f"  {len(present)} real servers + fx ({fixture_tools} generated tools); `tools --tokens` printed:")
    for line in cli.rstrip().splitlines():
        print(f"    | {line}")
    print("  as the host received it (`run --view NAME`; estimate_tokens over the Tool models it parsed):")
    out: dict[str, Any] = {"p8_real_servers": len(present), "p8_fixture_tools": fixture_tools}
    for era, mode in ERAS.items():
        suffix = "" if era == PRIMARY_ERA else f"_{era}"
        (count_all, tokens_all), (count_search, tokens_search) = measured[era, VIEW_ALL], measured[era, VIEW_SEARCH]
        ratio = tokens_search / tokens_all
        agrees = all(rows[era].get(view) == measured[era, view] for view in complete)
        for view in complete:
            count, tokens = measured[era, view]
            print(f"    host mode={mode:6} {view:18} {count:4} tools {tokens:8,} tokens")
        print(
            f"    host mode={mode:6} search / all: {ratio:.2%} of the tokens (target <= {SEARCH_TARGET:.0%}:"
            f" {'met' if ratio <= SEARCH_TARGET else 'MISSED'}); tools --tokens {'agrees' if agrees else 'DISAGREES'}"
        )
        out |= {
            f"p8_tools_all{suffix}": count_all,
            f"p8_tools_search{suffix}": count_search,
            f"p8_tokens_all{suffix}": tokens_all,
            f"p8_tokens_search{suffix}": tokens_search,
            f"p8_search_over_all{suffix}": round(ratio, 4),
            f"p8_cli_agrees_{era}": agrees,
        }
    print(f"    the search view lists: {', '.join(tool.name for tool in listed[PRIMARY_ERA, VIEW_SEARCH])}")
    for view in complete:
        extra = fields_only_in(listed["handshake", view], listed[PRIMARY_ERA, view])
        if extra:
            print(f"    {view}: fields the handshake-era host gets and the 2026 host does not (tools): {dict(extra)}")
    if out["p8_tools_all"] < MIN_TOOLS:
        print(f"  WARNING: the catalog has {out['p8_tools_all']} tools, fewer than {MIN_TOOLS}")
    modern = rows[PRIMARY_ERA]
    out["p8_cli_tokens"] = {view: list(modern[view]) for view in complete if view in modern}
    out["p8_cli_servers"] = {name: list(row) for name, row in modern.items() if name in names}
    return out


# -- part 2: a transformed tool on the call path --------------------------------------------


def call_settings(path: Path) -> Path:
    mark = {BENCH_MARK_ENV: bench_mark()}
    servers = {
        "plain": fixture_server("--name", "fx", "--tools", "tag", env=mark),
        "shaped": fixture_server("--name", "fx", "--tools", "tag", env=mark, tools={"tag": TAG_TRANSFORM}),
    }
    return write_settings(path, servers, supervisor={"log_level": "warning"})


async def _call(host: Host, tool: str, arguments: Mapping[str, Any], expect: str = "fx:x") -> None:
    result = await host.session.call_tool(tool, dict(arguments))
    content = result.content[0] if result.content else None
    if result.is_error or not isinstance(content, types.TextContent) or content.text != expect:
        raise RuntimeError(f"{tool} {dict(arguments)} answered {result}")


async def _check_shapes(host: Host) -> None:
    """The shaped tool is listed as the transform says and both tools answer what the upstream's ``tag`` does."""
    listed = {tool.name: tool for tool in await _list_all(host)}
    if set(listed) != {PLAIN[0], SHAPED[0]}:
        raise RuntimeError(f"listed {sorted(listed)}, not {PLAIN[0]} and {SHAPED[0]}")
    schema = listed[SHAPED[0]].input_schema
    if set(schema.get("properties", {})) != {"message"} or schema.get("required") != ["message"]:
        raise RuntimeError(f"{SHAPED[0]}'s schema is {schema}")
    for tool, arguments in (PLAIN, SHAPED):
        for _ in range(WARM_CALLS):
            await _call(host, tool, arguments)


def thread_cpu_sec(pid: int) -> float:
    """CPU seconds so far of ``pid``'s live threads, from ``schedstat`` (ns).

    ``harness.cpu_sec`` reads ``/proc/<pid>/stat``, which counts 10 ms ticks: a c32
    window of a few hundred calls at ~50 µs each is only a few ticks.
    """
    total_ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with suppress(FileNotFoundError, ProcessLookupError):  # a thread that ended since the listing
            total_ns += int((task / "schedstat").read_text().split()[0])
    return total_ns / 1e9


async def _c1_turns(host: Host, calls: int) -> tuple[list[float], list[float]]:
    """``calls`` sequential calls of each tool, taking turns call by call (who goes first alternates)."""
    plain: list[float] = []
    shaped: list[float] = []
    for i in range(calls):
        for tool, arguments, into in ((*PLAIN, plain), (*SHAPED, shaped))[:: 1 if i % 2 else -1]:
            started = trio.current_time()
            await _call(host, tool, arguments)
            into.append(trio.current_time() - started)
    return plain, shaped


async def _c32(host: Host, tool: str, arguments: Mapping[str, Any], calls: int) -> float:
    remaining = calls

    async def caller() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1  # no await between check and decrement: atomic under trio
            await _call(host, tool, arguments)

    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(CONCURRENCY):
            nursery.start_soon(caller)
    return calls / (trio.current_time() - started)


async def transform_cost(era: str, rounds: int, c1_calls: int, c32_calls: int) -> dict[str, Any]:
    """Part 2 for one host era (``ERAS``): c1 in turns, then ``C32_PAIRS`` pairs of c32 windows, per round."""
    p50_us: dict[str, list[float]] = {"plain": [], "shaped": []}
    cps: dict[str, list[float]] = {"plain": [], "shaped": []}
    cpu: dict[str, float] = {"plain": 0.0, "shaped": 0.0}
    paired_c1: list[float] = []  # shaped / plain time of calls made one after the other
    paired_c32: list[float] = []  # shaped / plain calls/s of windows run one after the other
    with tempfile.TemporaryDirectory() as tmp:
        config = call_settings(Path(tmp) / "settings.toml")
        try:
            async with open_host(sidecar_argv(config), mode=ERAS[era]) as host:
                with trio.fail_after(START_BOUND_SEC):
                    await host.wait_tools(lambda names: {PLAIN[0], SHAPED[0]} <= set(names), bound_sec=START_BOUND_SEC)
                    await _check_shapes(host)
                protocol = str(host.session.protocol_version)
                quiet_host_heap()  # the host is this process: earlier benchmarks' heap is not the sidecar's cost
                with trio.fail_after(CALL_BOUND_SEC * rounds):
                    for round_number in range(rounds):
                        plain, shaped = await _c1_turns(host, c1_calls)
                        p50_us["plain"].append(percentile(plain, 0.5) * 1e6)
                        p50_us["shaped"].append(percentile(shaped, 0.5) * 1e6)
                        paired_c1.extend(s / p for p, s in zip(plain, shaped, strict=True))
                        for pair in range(C32_PAIRS):
                            window: dict[str, float] = {}
                            turn = (round_number * C32_PAIRS + pair) % 2
                            for name, (tool, arguments) in (("plain", PLAIN), ("shaped", SHAPED))[:: -1 if turn else 1]:
                                before = thread_cpu_sec(host.pid)
                                window[name] = await _c32(host, tool, arguments, c32_calls)
                                cpu[name] += thread_cpu_sec(host.pid) - before
                                cps[name].append(window[name])
                            paired_c32.append(window["shaped"] / window["plain"])
        finally:
            await reap_marked(f"p8 transform {era}")
    plain_us, shaped_us = median(p50_us["plain"]), median(p50_us["shaped"])
    ratio_c1, ratio_c32 = median(paired_c1), median(cps["shaped"]) / median(cps["plain"])
    cpu_us = {name: cpu[name] / len(cps[name]) / c32_calls * 1e6 for name in cpu}
    print(
        f"  host mode={ERAS[era]} (era {protocol}): c1 p50 plain {plain_us:.0f} µs, shaped {shaped_us:.0f} µs,"
        f" paired median shaped/plain {ratio_c1:.3f}; c{CONCURRENCY} plain {median(cps['plain']):.0f},"
        f" shaped {median(cps['shaped']):.0f} calls/s, shaped/plain {ratio_c32:.3f}"
        f" (paired windows {median(paired_c32):.3f});"
        f" sidecar CPU per c{CONCURRENCY} call plain {cpu_us['plain']:.1f}, shaped {cpu_us['shaped']:.1f} µs"
    )
    return {
        f"p8_protocol_{era}": protocol,
        f"p8_plain_c1_p50_us_{era}": round(plain_us, 1),
        f"p8_shaped_c1_p50_us_{era}": round(shaped_us, 1),
        f"p8_transform_c1_ratio_{era}": round(ratio_c1, 3),
        f"p8_plain_cps_c{CONCURRENCY}_{era}": round(median(cps["plain"]), 1),
        f"p8_shaped_cps_c{CONCURRENCY}_{era}": round(median(cps["shaped"]), 1),
        f"p8_transform_c{CONCURRENCY}_ratio_{era}": round(ratio_c32, 3),
        f"p8_transform_c{CONCURRENCY}_ratio_paired_{era}": round(median(paired_c32), 3),
        f"p8_sidecar_cpu_us_per_call_c{CONCURRENCY}_{era}": {name: round(value, 1) for name, value in cpu_us.items()},
    }


async def run(*, quick: bool = False) -> dict[str, Any]:
    rounds, c1_calls, c32_calls = (2, 100, 320) if quick else (5, 300, 1000)
    started = trio.current_time()
    print(f"p8 views and transforms: a view of >= {MIN_TOOLS} tools, listed and searched")
    out = await listing_tokens()
    out["p8_listing_sec"] = round(trio.current_time() - started, 1)
    print(
        f"p8 transformed vs untransformed tool: fixture --tools tag twice; {rounds} rounds,"
        f" c1 x {c1_calls} calls each in turns, {C32_PAIRS} pairs of c{CONCURRENCY} x {c32_calls} calls per round"
    )
    for era in ERAS:
        out |= await transform_cost(era, rounds, c1_calls, c32_calls)
    out["p8_sec"] = round(trio.current_time() - started, 1)
    print(f"  p8 took {out['p8_sec']} s (the listing part {out['p8_listing_sec']} s)")
    sys.stdout.flush()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.views", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (under a minute)")
    print(json.dumps(trio.run(lambda: run(quick=parser.parse_args().quick))))
