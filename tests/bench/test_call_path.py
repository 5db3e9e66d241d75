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

from bench.call_path import LARGE_TEXT, TOOL, _child_pids, _measure_c1_interleaved
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
            assert child.pid in _child_pids(os.getpid())
        finally:
            child.communicate(b"\n", timeout=BOUND_SEC)
    finally:
        release.set()
        thread.join(BOUND_SEC)
