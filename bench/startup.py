"""``python -m bench.startup``: what a real host meets at a start and a stop, beside the server alone (issue 57).

On the bundled ``settings.toml`` (two demo servers), beside the bundled demo
server started directly, rounds taking turns (direct, cold, warm), each a fresh
process spawned by a host that speaks raw JSON-RPC lines over pipes:

* **initialize** and the **first tools/list**, from the spawn to each answer:
  the demo alone; the sidecar **cold** (a fresh state directory: nothing on
  disk) and **warm** (a state directory one earlier start filled: the catalogs
  and the view's snapshot are on disk);
* **list_changed at start**: the notices the host gets from its first answer
  until the sidecar is idle (bounded), which is to be none;
* **the stop**: SIGINT, SIGTERM and the end of stdin, from the trigger to the
  exit, an idle warm sidecar; and whether a process of its servers is left;
* **the cold floor**: two demo servers and an import of ``supervisor.serve``
  (the SDK and the sidecar's parts) started at once, to the last of the three:
  what a cold start of this configuration costs this box before the sidecar
  does any work of its own (2 cores, 3 processes importing pydantic models).

Medians, in ms, and each as a fraction of the demo alone's. A benchmark: it
prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Final

from bench.harness import REPO_ROOT, box_speed

ROUND_BOUND_SEC: Final = 30.0
QUIET_SEC: Final = 1.5
"""How long the host keeps reading for notices after the sidecar is ready (the bench's window, not a wait for a
condition: a notice that never comes has nothing to wait on)."""
PY: Final = sys.executable
INITIALIZE: Final = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}
DIRECT: Final = [PY, "-m", "supervisor.demo"]
SIDECAR: Final = [PY, "-m", "supervisor", "run", "--config", str(REPO_ROOT / "settings.toml")]


class _Host:
    """A host over pipes: writes JSON-RPC lines, reads them with a deadline."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO_ROOT, env=env,
            start_new_session=True,
        )  # fmt: skip
        self._buffer = b""
        self.notices = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, until: float) -> dict[str, Any] | None:
        """The next message, or None at the deadline (``time.perf_counter()``)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = until - time.perf_counter()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise RuntimeError(f"{self.proc.args}: stdout closed")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        if message.get("method") == "notifications/tools/list_changed":
            self.notices += 1
        return message

    def answer(self, request_id: int) -> float:
        """Seconds from the spawn to the answer to ``request_id``."""
        until = time.perf_counter() + ROUND_BOUND_SEC
        while (message := self.read(until)) is not None:
            if message.get("id") == request_id:
                return time.perf_counter() - self.started
        raise RuntimeError(f"{self.proc.args}: no answer to {request_id}")

    def linger(self, seconds: float) -> None:
        until = time.perf_counter() + seconds
        while self.read(until) is not None:
            pass

    def stop(self, how: str) -> float:
        """Stop it (``eof`` or a signal's name); seconds to its exit."""
        started = time.perf_counter()
        if how == "eof":
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        else:
            os.kill(self.proc.pid, getattr(signal, how))
        self.proc.wait(ROUND_BOUND_SEC)
        return time.perf_counter() - started


def _children_of(pid: int) -> set[int]:
    """Every process whose parent is ``pid`` (its servers run in sessions of their own, not in its group)."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
                found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] not in "ZX"


def _start(argv: list[str], env: dict[str, str]) -> tuple[_Host, float, float]:
    host = _Host(argv, env)
    host.send(INITIALIZE)
    initialized = host.answer(1)
    host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    host.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    listed = host.answer(2)
    return host, initialized, listed


def _floor_sec(env: dict[str, str]) -> float:
    """Two demo servers and ``import supervisor.serve`` started at once: when the last of them is done."""
    done: list[float] = []
    started = time.perf_counter()

    def demo() -> None:
        host, _, _ = _start(DIRECT, env)
        done.append(time.perf_counter())
        host.stop("eof")

    def importing() -> None:
        subprocess.run([PY, "-c", "import supervisor.serve"], cwd=REPO_ROOT, env=env, check=True)
        done.append(time.perf_counter())

    threads = [threading.Thread(target=demo), threading.Thread(target=demo), threading.Thread(target=importing)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return max(done) - started


def measure(rounds: int) -> dict[str, Any]:
    env = {**os.environ, "SUPERVISOR_PYTHON": PY}
    warm_state = tempfile.mkdtemp(prefix="bench-startup-")
    figures: dict[str, list[float]] = {}

    def note(key: str, value: float) -> None:
        figures.setdefault(key, []).append(value)

    try:
        host, _, _ = _start(SIDECAR, {**env, "XDG_STATE_HOME": warm_state})  # fills the warm state
        host.linger(QUIET_SEC)
        host.stop("eof")
        for _ in range(rounds):
            host, initialized, listed = _start(DIRECT, env)
            note("direct initialize", initialized)
            note("direct tools/list", listed)
            host.stop("eof")
            for state in ("cold", "warm"):
                directory = tempfile.mkdtemp(prefix="bench-cold-") if state == "cold" else warm_state
                host, initialized, listed = _start(SIDECAR, {**env, "XDG_STATE_HOME": directory})
                note(f"{state} initialize", initialized)
                note(f"{state} tools/list", listed)
                host.linger(QUIET_SEC)
                note(f"{state} list_changed at start", host.notices)
                host.stop("eof")
                if state == "cold":
                    shutil.rmtree(directory)
            for how in ("SIGINT", "SIGTERM", "eof"):
                host, _, _ = _start(SIDECAR, {**env, "XDG_STATE_HOME": warm_state})
                host.linger(QUIET_SEC)  # idle: its servers are up
                children = _children_of(host.proc.pid)
                note(f"stop on {how}", host.stop(how))
                note(f"processes left after {how}", sum(_alive(pid) for pid in children))
            note("cold floor", _floor_sec(env))
    finally:
        shutil.rmtree(warm_state, ignore_errors=True)
    return {key: statistics.median(values) for key, values in figures.items()}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds, taking turns (default 5)")
    parser.add_argument("--json", action="store_true", help="one JSON object on the last line")
    args = parser.parse_args()
    speed = box_speed()
    medians = measure(args.rounds)
    direct = {"initialize": medians["direct initialize"], "tools/list": medians["direct tools/list"]}
    print(f"box: {speed}; {args.rounds} rounds; medians")
    for key, value in medians.items():
        if key == "cold floor":
            print(f"  {key:<28} {value * 1000:7.0f} ms   {value / direct['tools/list']:5.2f} x the server alone's list")
        elif key.startswith(("direct", "cold ", "warm ")) and not key.endswith("at start"):
            base = direct[key.split(" ", 1)[1]]
            print(f"  {key:<28} {value * 1000:7.0f} ms   {value / base:5.2f} x the server alone")
        elif key.startswith("stop"):
            print(f"  {key:<28} {value * 1000:7.0f} ms")
        else:
            print(f"  {key:<28} {value:7.0f}")
    if args.json:
        print(json.dumps({"box": speed, "rounds": args.rounds, **{k: round(v, 4) for k, v in medians.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
