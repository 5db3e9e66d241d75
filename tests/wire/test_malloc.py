"""glibc's heap thresholds (``supervisor.wire.heap``, issue 11): 1 MB buffers freed in a burst are reused warm.

A child process allocates three 1 MB buffers at once and frees them, again and
again, as a spliced 1 MB call does per direction; its minor page faults say
whether the next burst found warm pages or fresh ones. With glibc's defaults the
freed heap top (3 MB, above its adaptive ~2 MB trim threshold) goes back to the
kernel after every burst and is faulted in again (~700 faults a burst).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from supervisor import serve as serve_module
from supervisor.config.loader import load_settings
from supervisor.wire import heap as _malloc
from tests.sidecar import fixture_server, scaled, write_settings

BOUND_SEC = scaled(30.0)
BURSTS = 20
CHILD = """
import sys
from supervisor.wire.heap import keep_large_buffers_warm

def minor_faults():
    with open("/proc/self/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[7])

def burst():
    held = [bytes([n]) * 1_000_000 for n in range(3)]  # malloc'ed and written, like a line cut or a join
    del held

if sys.argv[1] == "warm":
    assert keep_large_buffers_warm()
burst(); burst()
before = minor_faults()
for _ in range(int(sys.argv[2])):
    burst()
print(minor_faults() - before)
"""


def _faults_per_burst(mode: str) -> float:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(BURSTS)],
        capture_output=True, text=True, check=True, timeout=BOUND_SEC, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    return int(child.stdout) / BURSTS


@pytest.mark.e2e
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and /proc")
def test_three_1_mb_buffers_freed_together_are_reused_warm_by_the_next_burst() -> None:
    warm = _faults_per_burst("warm")
    assert warm < 25, f"{warm:.0f} minor faults per burst: the freed heap was given back and faulted in again"


async def test_serve_keeps_large_buffers_warm_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(write_settings(tmp_path, {"fx": fixture_server("--tools", "echo")}))
    calls: list[str] = []

    async def run_nothing(*args: object, **kwargs: object) -> None:
        calls.append("run")
        await trio.lowlevel.checkpoint()

    def warm() -> bool:
        calls.append("warm")
        return True

    monkeypatch.setattr(_malloc, "keep_large_buffers_warm", warm)
    monkeypatch.setattr(serve_module, "_run", run_nothing)
    with trio.fail_after(BOUND_SEC):
        await serve_module.serve(settings)
    assert calls == ["warm", "run"]
