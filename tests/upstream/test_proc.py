"""Process groups (DESIGN I11): liveness without needless /proc scans, zombies count as gone, group kills.

Real processes throughout. Zombies are made deterministic with ``waitid(WNOWAIT)``:
this test process is their parent and waits for their exit without reaping them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence

import pytest
import trio

from supervisor.upstream.process_group import (
    STDIN_EOF_GRACE_SEC,
    TERM_GRACE_SEC,
    _scan_children,
    begin_stop,
    find_live_member,
    group_alive,
    live_children,
    signal_group,
    terminate_group,
)
from tests.sidecar import pid_alive

pytestmark = pytest.mark.e2e  # every test here starts a process

BOUND_SEC = 15.0

# Spawns a grandchild that inherits (and so holds) the leader's pipes, prints its pid, exits on stdin EOF.
_LEADER_WITH_GRANDCHILD = (
    "import subprocess, sys\n"
    "grandchild = subprocess.Popen(['sleep', '600'])\n"
    "print(grandchild.pid, flush=True)\n"
    "sys.stdin.read()\n"
)
_IGNORES_EOF_AND_SIGTERM = (
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(600)\n"
)


async def _exited_unreaped(pid: int) -> None:
    """Wait until child ``pid`` has exited, leaving it a zombie (not reaped)."""
    await trio.to_thread.run_sync(os.waitid, os.P_PID, pid, os.WEXITED | os.WNOWAIT, abandon_on_cancel=True)


async def _open_group(code: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )


async def _first_line(proc: trio.Process) -> bytes:
    assert proc.stdout is not None
    data = b""
    while not data.endswith(b"\n"):
        chunk = await proc.stdout.receive_some()
        assert chunk, "the child closed stdout before its first line"
        data += chunk
    return data.strip()


def _messages(caplog: pytest.LogCaptureFixture) -> Sequence[str]:
    return [record.getMessage() for record in caplog.records if record.name == "supervisor.upstream.process_group"]


async def test_a_group_whose_only_member_is_a_zombie_counts_as_gone() -> None:
    with trio.fail_after(BOUND_SEC):
        zombie = await trio.lowlevel.open_process(["true"], start_new_session=True)
        try:
            await _exited_unreaped(zombie.pid)
            assert signal_group(zombie.pid, 0), "the kernel still counts the zombie as a group member"
            assert not group_alive(zombie.pid)
        finally:
            await zombie.wait()
        assert not group_alive(zombie.pid)


async def test_a_group_whose_leader_is_a_zombie_but_whose_grandchild_lives_is_alive() -> None:
    with trio.fail_after(BOUND_SEC):
        leader = await _open_group("import subprocess; print(subprocess.Popen(['sleep', '600']).pid, flush=True)")
        try:
            grandchild = int(await _first_line(leader))
            await _exited_unreaped(leader.pid)
            assert find_live_member(leader.pid) == grandchild
            assert find_live_member(leader.pid, hint=grandchild) == grandchild
            assert group_alive(leader.pid)
        finally:
            os.killpg(leader.pid, signal.SIGKILL)
            await leader.wait()


async def test_terminating_a_group_takes_its_pipe_holding_grandchild_down_with_sigterm_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(BOUND_SEC):
        leader = await _open_group(_LEADER_WITH_GRANDCHILD)
        grandchild = int(await _first_line(leader))
        assert pid_alive(grandchild)
        with trio.CancelScope(shield=True):
            await terminate_group("fx", leader)
        assert leader.returncode == 0, "the leader exits by itself once its stdin closes"
        assert not pid_alive(grandchild)
        assert not group_alive(leader.pid)
        # The escalation stopped once the group was gone: no SIGKILL, no give-up.
        assert _messages(caplog) == []


async def test_a_group_that_ignores_sigterm_is_sigkilled_and_the_escalation_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(BOUND_SEC):
        leader = await _open_group(_IGNORES_EOF_AND_SIGTERM)
        assert await _first_line(leader) == b"ready"
        with trio.CancelScope(shield=True):
            await terminate_group("stubborn", leader)
        assert leader.returncode == -signal.SIGKILL
        assert not group_alive(leader.pid)
        assert _messages(caplog) == [f"server=stubborn pgid={leader.pid} ignored SIGTERM; sending SIGKILL"]


async def test_once_the_sidecar_stops_a_group_gets_sigterm_with_its_stdin_close_and_sigkill_soon_after(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A host waits about 100 ms between its first signal and its second (issue 57, item 5).
    caplog.set_level("DEBUG", logger="supervisor.upstream.process_group")
    with trio.fail_after(BOUND_SEC):
        leader = await _open_group(_IGNORES_EOF_AND_SIGTERM)
        assert await _first_line(leader) == b"ready"
        begin_stop()
        started = trio.current_time()
        with trio.CancelScope(shield=True):
            await terminate_group("stubborn", leader)
        took = trio.current_time() - started
    assert leader.returncode == -signal.SIGKILL
    assert took < STDIN_EOF_GRACE_SEC + TERM_GRACE_SEC  # the escalation's long way would take all of that
    assert _messages(caplog) == [f"server=stubborn pgid={leader.pid} still running after SIGTERM; sending SIGKILL"]


async def test_a_stop_that_begins_during_an_escalation_cuts_its_sigterm_grace_short() -> None:
    with trio.fail_after(BOUND_SEC):
        leader = await _open_group(_IGNORES_EOF_AND_SIGTERM)
        assert await _first_line(leader) == b"ready"
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(terminate_group, "stubborn", leader)
            await trio.sleep(STDIN_EOF_GRACE_SEC + 0.1)  # into the SIGTERM grace (the escalation's own timeline)
            begin_stop()
        took = trio.current_time() - started
    assert leader.returncode == -signal.SIGKILL
    assert took < STDIN_EOF_GRACE_SEC + TERM_GRACE_SEC


async def test_live_children_counts_running_children_and_not_zombies() -> None:
    with trio.fail_after(BOUND_SEC):
        before = live_children()
        sleeper = await trio.lowlevel.open_process(["sleep", "600"])
        quick = await trio.lowlevel.open_process(["true"])
        try:
            await _exited_unreaped(quick.pid)
            assert live_children() == before + 1
            assert live_children() == _scan_children(os.getpid())
        finally:
            sleeper.kill()
            await sleeper.wait()
            await quick.wait()
        assert live_children() == before


async def test_a_gone_group_or_a_live_leader_is_answered_without_scanning_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[str] = []
    real_listdir = os.listdir

    def counting_listdir(path: str) -> list[str]:
        scans.append(path)
        return real_listdir(path)

    monkeypatch.setattr("supervisor.upstream.process_group.os.listdir", counting_listdir)
    with trio.fail_after(BOUND_SEC):
        leader = await _open_group(_IGNORES_EOF_AND_SIGTERM)
        assert await _first_line(leader) == b"ready"
        assert group_alive(leader.pid)
        leader.kill()
        await leader.wait()
        assert not group_alive(leader.pid)
    assert scans == []
