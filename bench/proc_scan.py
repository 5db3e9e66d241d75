"""Cost of the process-group checks behind I11 (issue 9).

``python -m bench.proc_scan [N]`` (default 500) prints:

* ``group_alive``: mean wall time of one call, N calls each, for a group that is
  gone, a group whose only member is a zombie, and a live group whose leader is
  alive (and one whose leader exited, leaving a pipe-holding grandchild).
* ``terminate``: wall and CPU seconds of the full group termination of a child
  that ignores both stdin EOF and SIGTERM (so it runs the whole TERM grace, then
  SIGKILL), and of a child that exits as soon as its stdin closes.
* how many processes ``/proc`` listed, since a full scan costs in proportion.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import trio

try:  # before issue 9 the helpers lived in upstream_stdio: this measures the old code on an old checkout
    from supervisor.upstream.stdio import _terminate_group as terminate_group  # type: ignore[attr-defined]
    from supervisor.upstream.stdio import group_alive  # type: ignore[attr-defined]
except ImportError:
    from supervisor.upstream.process_group import group_alive, terminate_group

_IGNORE_ALL = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
_EXIT_ON_EOF = "import sys; sys.stdin.read()"
_WITH_GRANDCHILD = "import subprocess, sys; subprocess.Popen(['sleep', '60']); sys.stdin.read()"


def _mean_call_us(n: int, call: Callable[[], object]) -> float:
    started = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - started) / n * 1e6


def _spawn(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, start_new_session=True)


def bench_group_alive(n: int) -> None:
    leader = _spawn(_EXIT_ON_EOF)
    time.sleep(0.2)
    print(f"group_alive, live leader:        {_mean_call_us(n, lambda: group_alive(leader.pid)):9.1f} us/call")
    leader.kill()
    leader.wait()
    print(f"group_alive, group gone:         {_mean_call_us(n, lambda: group_alive(leader.pid)):9.1f} us/call")

    holder = _spawn(_WITH_GRANDCHILD)
    time.sleep(0.3)
    holder.kill()
    holder.wait()
    print(f"group_alive, orphan grandchild:  {_mean_call_us(n, lambda: group_alive(holder.pid)):9.1f} us/call")
    os.killpg(holder.pid, signal.SIGKILL)
    time.sleep(0.2)  # a bench, not a test: let the kernel deliver the kill
    print(f"group_alive, zombie-only group:  {_mean_call_us(n, lambda: group_alive(holder.pid)):9.1f} us/call")


async def _terminate(code: str) -> tuple[float, float]:
    proc = await trio.lowlevel.open_process([sys.executable, "-c", code], stdin=subprocess.PIPE, start_new_session=True)
    await trio.sleep(0.3)
    wall, cpu = time.perf_counter(), time.process_time()
    with trio.CancelScope(shield=True):
        await terminate_group("bench", proc)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    logging.basicConfig(level=logging.CRITICAL)
    print(f"/proc lists {sum(entry.isdigit() for entry in os.listdir('/proc'))} processes")
    bench_group_alive(n)
    for label, code in (("ignores EOF and SIGTERM", _IGNORE_ALL), ("exits on stdin EOF", _EXIT_ON_EOF)):
        wall, cpu = trio.run(_terminate, code)
        print(f"terminate, child {label:24s} {wall:6.3f} s wall {cpu:6.3f} s CPU")


if __name__ == "__main__":
    main()
