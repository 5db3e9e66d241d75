"""Suite-wide fixtures: every test proves it left no process behind (DESIGN I11).

Each test gets a fresh marker in ``MCP_SUPERVISOR_TEST_MARK``. The e2e helpers
put it into the environment of every sidecar, CLI run and HTTP fixture they
start, and into every stdio server's ``env`` table, so the sidecar's children
and their grandchildren carry it too. After the test, ``/proc/*/environ`` is
scanned for the marker; a live process that still carries it is an orphan. The
scan tolerates processes vanishing mid-read, ignores zombies (PID 1 here does
not reap orphans) and this pytest process, and allows a short bounded grace
before it kills the leftovers and fails the test.

The fast lane (``pytest -m "not e2e"``) must start no process: a test without
the ``e2e`` marker that tries to spawn one fails at once, naming the marker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from tests.sidecar import MARK_ENV, scaled

ORPHAN_GRACE_SEC = scaled(3.0)


def _state(pid: str) -> bytes | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[0] if fields else None


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def marked_processes(mark: str) -> dict[int, str]:
    """Live processes whose environment carries ``MARK_ENV=mark``: pid -> command line."""
    needle = f"{MARK_ENV}={mark}".encode()
    found: dict[int, str] = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:  # vanished, or not ours to read
            continue
        if needle not in environ.split(b"\0"):
            continue
        state = _state(entry)
        if state is None or state in (b"Z", b"X"):
            continue
        found[int(entry)] = _cmdline(entry)
    return found


@pytest.fixture(autouse=True)
def private_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$XDG_STATE_HOME`` of this test alone: pins and tokens it writes by default never reach the real home.

    Sidecars, CLI runs and fixtures started by the test inherit it, so they share it.
    """
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


@pytest.fixture(autouse=True)
def no_orphans(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Give the test a marker; after it, fail if any marked process is still alive."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK_ENV, mark)
    yield mark
    deadline = time.monotonic() + ORPHAN_GRACE_SEC
    leftovers = marked_processes(mark)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.05)
        leftovers = marked_processes(mark)
    if not leftovers:
        return
    for pid in leftovers:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    listing = "\n".join(f"  pid {pid}: {cmdline}" for pid, cmdline in sorted(leftovers.items()))
    pytest.fail(f"I11: {len(leftovers)} process(es) outlived the test:\n{listing}", pytrace=False)


@pytest.fixture(autouse=True)
def fast_lane_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test without the ``e2e`` marker fails if it starts a process (every spawn goes through ``Popen``)."""
    if request.node.get_closest_marker("e2e") is not None:
        return

    def refuse(self: subprocess.Popen[bytes], *args: object, **kwargs: object) -> None:
        raise AssertionError(
            f"{request.node.nodeid} starts a process but is not marked e2e, so the fast lane "
            '(pytest -m "not e2e") would run it: add pytestmark = pytest.mark.e2e'
        )

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The conformance lane runs only when asked for by name (``-m conformance``): the README's command stays fast."""
    if "conformance" in (config.option.markexpr or ""):
        return
    kept = [item for item in items if item.get_closest_marker("conformance") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
