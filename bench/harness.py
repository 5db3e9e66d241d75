"""Shared benchmark plumbing: alternating rounds, medians, fixture servers, settings files, hosts."""

from __future__ import annotations

import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final

import trio
from mcp import Client
from mcp.client.client import ConnectMode

from tests.sidecar import Host, hold_listen_stream, line_transport

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
FIXTURE_MODULE: Final = "tests.fixtures.fixture_server"


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fixture_server(*args: str, **table: Any) -> dict[str, Any]:
    """A stdio server table running the test fixture server with ``args``."""
    return {"command": sys.executable, "args": ["-m", FIXTURE_MODULE, *args], "cwd": str(REPO_ROOT), **table}


def write_settings(
    path: Path, servers: Mapping[str, Mapping[str, Any]], *, mcp_names: bool = True, **sections: Any
) -> Path:
    """Write a settings file from plain dicts (JSON values are valid TOML values).

    ``mcp_names``: the sidecar names tools ``mcp__<server>__<tool>`` (``[supervisor.names] form = "mcp"``), the
    form every benchmark was written in and its figures compare across rounds; the default form since issue 57
    is the short one. False: the settings say nothing of names (a checkout from before issue 57 knows no such key).
    """
    if mcp_names:
        supervisor = dict(sections.get("supervisor") or {})
        supervisor.setdefault("names", {"form": "mcp"})
        sections["supervisor"] = supervisor
    lines: list[str] = []

    def emit(prefix: str, table: Mapping[str, Any]) -> None:
        if prefix:
            lines.append(f"[{prefix}]")
        lines.extend(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in table.items() if not isinstance(v, Mapping))
        lines.append("")
        for key, value in table.items():
            if isinstance(value, Mapping):
                emit(f"{prefix}.{json.dumps(key)}" if prefix else json.dumps(key), value)

    emit("", {**sections, "mcp_servers": dict(servers)})
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def cores() -> int:
    return os.cpu_count() or 1


# -- processes and hosts (shared by p2..p4) ---------------------------------------------
#
# The host side is a real `mcp.Client` over a small newline-delimited JSON-RPC transport
# of our own (the same approach as tests/sidecar.py), used for every variant so the
# comparison holds the client side constant. Every process starts in its own session
# and carries `BENCH_MARK_ENV` in its environment; `reap_marked` SIGKILLs anything
# still carrying the mark at the end of a benchmark, so no run leaves orphans.

BENCH_MARK_ENV: Final = "MCP_SUPERVISOR_BENCH_MARK"
EXIT_BOUND_SEC: Final = 10.0
"""How long a stdio server may take to exit once its stdin is closed."""


def bench_mark() -> str:
    """This benchmark run's marker (one per process of `python -m bench`)."""
    return os.environ.setdefault(BENCH_MARK_ENV, f"bench-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def marked_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, BENCH_MARK_ENV: bench_mark(), **(extra or {})}


def marked_pids() -> list[int]:
    """Pids of live processes (other than us) whose environment carries this run's marker."""
    needle = f"{BENCH_MARK_ENV}={bench_mark()}".encode()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


async def reap_marked(what: str, *, grace_sec: float = 3.0) -> int:
    """Wait (bounded) for marked processes to exit, then SIGKILL survivors; return how many were killed."""
    with trio.move_on_after(grace_sec):
        # Polling: there is no event for "some other process exited".
        while marked_pids():  # noqa: ASYNC110
            await trio.sleep(0.05)
    survivors = marked_pids()
    for pid in survivors:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if survivors:
        print(f"  WARNING: {what}: killed {len(survivors)} leftover process(es) {survivors}", file=sys.stderr)
    return len(survivors)


_CLOCK_TICKS_PER_SEC: Final = os.sysconf("SC_CLK_TCK")


def cpu_sec(pid: int) -> float:
    """User plus system CPU seconds one process has used so far (children excluded), from /proc/<pid>/stat."""
    user, system = cpu_split_sec(pid)
    return user + system


def cpu_split_sec(pid: int) -> tuple[float, float]:
    """The user and the system CPU seconds one process has used so far (children excluded), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    fields = stat[stat.rfind(b")") + 2 :].split()
    # After the command name: state is field 3, so utime (14) and stime (15) are at 11 and 12 here.
    return int(fields[11]) / _CLOCK_TICKS_PER_SEC, int(fields[12]) / _CLOCK_TICKS_PER_SEC


def child_pids(pid: int) -> list[int]:
    """The children of ``pid`` (a child belongs to the thread that forked it: every thread's list is read)."""
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


def path_cpu_sec(pid: int) -> tuple[float, float, float]:
    """CPU seconds so far of the three processes on a variant's path: this host, ``pid``, and ``pid``'s children."""
    return cpu_sec(os.getpid()), cpu_sec(pid), sum(cpu_sec(child) for child in child_pids(pid))


def versions() -> dict[str, str]:
    """The versions a run measured: this Python and the packages on the call path."""
    return {
        "python": sys.version.split()[0],
        "mcp": version("mcp"),
        "trio": version("trio"),
        "anyio": version("anyio"),
        "pydantic": version("pydantic"),
    }


_ECHO_SCRIPT: Final = """
import os
while os.read(0, 1):
    os.write(1, b"x")
"""
_PIPE_ROUND_TRIPS: Final = 5000
_LOOP_ADDITIONS: Final = 2_000_000


def box_speed() -> dict[str, float]:
    """How fast this box is right now, so runs on different (or drifting) boxes can be told apart.

    ``python_loop_ms``: one thread's CPU for a fixed pure-Python loop; ``pipe_round_trip_us``:
    a one-byte write and its one-byte answer through two pipes to another process (two
    wake-ups, what every proxied message pays twice). Medians of three. Shared boxes move
    both by a quarter or more from one minute to the next: ratios measured side by side
    are the figures to compare, these only say how the box stood.
    """
    loops: list[float] = []
    for _ in range(3):
        start, total = time.thread_time(), 0
        for index in range(_LOOP_ADDITIONS):
            total += index
        loops.append((time.thread_time() - start) * 1000)
    trips: list[float] = []
    with subprocess.Popen(
        [sys.executable, "-S", "-c", _ECHO_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    ) as echo:
        assert echo.stdin is not None and echo.stdout is not None
        write_fd, read_fd = echo.stdin.fileno(), echo.stdout.fileno()
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(_PIPE_ROUND_TRIPS):
                os.write(write_fd, b"x")
                os.read(read_fd, 1)
            trips.append((time.perf_counter() - start) / _PIPE_ROUND_TRIPS * 1e6)
        echo.stdin.close()
    return {
        "python_loop_ms": round(statistics.median(loops), 1),
        "pipe_round_trip_us": round(statistics.median(trips), 1),
    }


def rss_mb(pid: int) -> float:
    """VmRSS of one process (children excluded), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sidecar_argv(config: Path) -> list[str]:
    return [sys.executable, "-m", "supervisor", "run", "--config", str(config)]


def sidecar_argv_from(checkout: Path) -> Callable[[Path], list[str]]:
    """The ``run`` command of ``checkout``'s sidecar, importing nothing of any other checkout (``python -P``)."""
    boot = (
        f"import runpy, sys; sys.path.insert(0, {str(checkout)!r}); runpy.run_module('supervisor', run_name='__main__')"
    )
    return lambda config: [sys.executable, "-P", "-c", boot, "run", "--config", str(config)]


def fixture_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", FIXTURE_MODULE, *args]


async def stop_process(proc: trio.Process) -> None:
    """Close stdin (the host hanging up), wait bounded, then SIGKILL the whole process group."""
    with trio.CancelScope(shield=True):
        if proc.stdin is not None:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await proc.stdin.aclose()
        with trio.move_on_after(EXIT_BOUND_SEC):
            await proc.wait()
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: pgid == pid
        await proc.wait()


@asynccontextmanager
async def open_host(
    argv: Sequence[str], *, mode: ConnectMode = "auto", env: Mapping[str, str] | None = None, listen: bool = True
) -> AsyncIterator[Host]:
    """Spawn a stdio MCP server (``argv``) and connect an `mcp.Client` to it as a host.

    The server's stderr goes to /dev/null. On exit its stdin is closed and it gets a
    bounded grace to exit before its process group is killed.
    """
    proc = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=str(REPO_ROOT),
        env=marked_env(env),
        start_new_session=True,
    )
    host = Host(process=proc)
    try:
        async with Client(line_transport(proc), mode=mode, message_handler=host.on_message) as client:
            host.client = client
            async with trio.open_nursery() as nursery:
                if listen and host.modern:
                    await nursery.start(hold_listen_stream, host)
                yield host
                nursery.cancel_scope.cancel()
    finally:
        await stop_process(proc)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values`` by nearest rank; nan if empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summarize_samples(path: Path, interest: Mapping[str, Sequence[str]], *, top: int = 15) -> None:
    """Print the share of py-spy's raw samples whose stack holds each frame of ``interest``, and the top leaves."""
    total = 0
    shares: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue  # the rest of a frame whose name py-spy wrote with a line break in it
        count = int(count_text)
        total += count
        for label, needles in interest.items():
            if any(needle in stack for needle in needles):
                shares[label] += count
        leaves[stack.rsplit(";", 1)[-1]] += count
    print(f"samples {total}")
    for label, count in shares.most_common():
        print(f"  {count / max(total, 1):6.1%}  {label}")
    print("top leaf frames:")
    for leaf, count in leaves.most_common(top):
        print(f"  {count / max(total, 1):6.1%}  {leaf}")


def quiet_host_heap() -> None:
    """Keep the host's own garbage collector from scanning this benchmark process's heap while it measures.

    The host is this long-lived bench process: its SDK imports and earlier
    benchmarks make its heap large, and collections triggered while it parses
    answers rescan all of it. That cost is the measuring client's, not the
    sidecar's, and it does not fall on every variant alike: p3 measured p50 183
    ms per direct 5,000-tool list, 105 ms with the heap frozen, 86 ms with the
    collector off; p2 after p1 in one process gave 1 MB sidecar / direct 0.671
    unfrozen and 0.803 frozen (one run each, issue 11 round 3). Collect once,
    then freeze what is left, as the sidecar does at start (``serve``).
    """
    gc.collect()
    gc.freeze()
