"""Process groups of stdio children: signal them, see whether they live, take them down (DESIGN I11).

Every stdio upstream leads its own process group (``start_new_session=True``),
so its pid is the group id and whatever it spawns shares the group. This module
is the one place that reads ``/proc``:

* ``group_alive`` asks the kernel first: ``killpg(pgid, 0)`` failing with ESRCH
  means no member at all, and no ``/proc`` scan happens. Only while the group
  has members is ``/proc`` read, to rule out zombies: PID 1 here does not reap
  orphans, so a group whose members are all zombies counts as gone. The likely
  members (a hint, then the leader) are checked before any full scan.
* ``wait_group_gone`` sleeps on a pidfd of one live member, which the kernel
  makes readable when that member exits, and rescans only then; it polls (every
  ``POLL_INTERVAL_SEC``) only where pidfds are missing.
* ``terminate_group`` races the kill escalation (close stdin, grace, SIGTERM the
  group, grace, SIGKILL the group, grace) against the group ending, as
  ``trio.run_process``'s ``deliver_cancel`` races its killer against
  ``proc.wait()``: the killer stops the moment the leader is reaped and no live
  member is left. Once a stdio front stops (``begin_stop``), every escalation,
  running or new, is the short one: ``STOP_EOF_GRACE_SEC`` after stdin closes,
  SIGTERM, ``STOP_TERM_GRACE_SEC`` later SIGKILL. A stdio host gives its server
  about 100 ms between its first signal and its second (Claude Code: SIGINT,
  SIGTERM 100 ms later, SIGKILL 400 ms after that), and a child still running
  when we are killed is an orphan.
* ``live_children`` counts this process's live children (``/metrics``).

Concurrency: ``terminate_group`` owns one nursery, holding the escalation task
beside the waits. Its every path is bounded by the escalation's own timeline
(at most ``STDIN_EOF_GRACE_SEC + TERM_GRACE_SEC + KILL_REAP_SEC``), after which
it gives up loudly; callers shield it so a cancelled caller cannot cut it short.
Nothing else here awaits.
"""

from __future__ import annotations

import logging
import os
import signal
from contextlib import suppress
from typing import Final

import trio

logger = logging.getLogger(__name__)

STDIN_EOF_GRACE_SEC: Final = 0.5
"""How long a live server gets to exit by itself after its stdin closes."""
TERM_GRACE_SEC: Final = 2.0
"""How long the group gets between SIGTERM and SIGKILL."""
KILL_REAP_SEC: Final = 2.0
"""How long to wait for the kernel to deliver a SIGKILL before giving up loudly."""
POLL_INTERVAL_SEC: Final = 0.02
"""Re-check interval of ``wait_group_gone`` where no pidfd can be had."""
STOP_EOF_GRACE_SEC: Final = 0.02
"""Once a stdio front stops: how long a live server gets to exit by itself after its stdin closes."""
STOP_TERM_GRACE_SEC: Final = 0.05
"""Once a stdio front stops: how long the group gets between SIGTERM and SIGKILL."""

_STOPPING: Final[trio.lowlevel.RunVar[trio.Event]] = trio.lowlevel.RunVar("mcp_supervisor_stopping")


def _stopping() -> trio.Event:
    try:
        return _STOPPING.get()
    except LookupError:
        event = trio.Event()
        _STOPPING.set(event)
        return event


def begin_stop() -> None:
    """A stdio front is stopping: every group's escalation, running or to come, is the short one (module docstring)."""
    _stopping().set()


_GONE_STATES: Final = (b"Z", b"X")


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` (0: only probe) to the process group; return False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # The group id was reused by someone we may not signal: ours is gone.
        return False
    return True


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The ``/proc/<pid>/stat`` fields after the parenthesised command (state ppid pgrp ...), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            stat = stat_file.read()
    except OSError:  # gone meanwhile, or no /proc
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields if len(fields) > 2 else None


def _is_live_member(fields: list[bytes] | None, pgid: int) -> bool:
    return fields is not None and int(fields[2]) == pgid and fields[0] not in _GONE_STATES


def find_live_member(pgid: int, hint: int | None = None) -> int | None:
    """The pid of a live (non-zombie) process in group ``pgid``, or None when none is left.

    ``hint`` (a member found before) and the leader are checked before a full
    ``/proc`` scan, so repeated calls while a member lives cost one file read.
    Without ``/proc`` a group that still has members is taken to be alive, and
    its leader's pid is returned.
    """
    if not signal_group(pgid, 0):
        return None  # no member at all, not even a zombie: no scan needed
    for pid in (hint, pgid):
        if pid is not None and _is_live_member(_stat_fields(pid), pgid):
            return pid
    try:
        pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return pgid
    # Members are forked after their leader, so (barring pid wrap-around) their pids are above it: look there first.
    for pid in (*(pid for pid in pids if pid > pgid), *(pid for pid in pids if pid < pgid)):
        if pid != hint and _is_live_member(_stat_fields(pid), pgid):
            return pid
    return None


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in the process group.

    Zombies count as gone: an orphaned grandchild is reparented to PID 1, and
    where PID 1 does not reap (containers), its zombie would otherwise look
    alive forever.
    """
    return find_live_member(pgid) is not None


async def _wait_member_exit(pid: int, pgid: int) -> None:
    """Return once ``pid`` has exited, or at once if it is no longer a live member of ``pgid``."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        # No pidfd here (old kernel, not Linux), or the pid was reaped already: poll.
        await trio.sleep(POLL_INTERVAL_SEC)
        return
    try:
        # Checked after the open: a pid reused between the scan and the open is not ours to wait for.
        fields = _stat_fields(pid)
        if fields is None:
            await trio.sleep(POLL_INTERVAL_SEC)  # no /proc to tell: do not spin
        elif _is_live_member(fields, pgid):
            await trio.lowlevel.wait_readable(pidfd)  # readable once the process has exited
    finally:
        trio.lowlevel.notify_closing(pidfd)
        os.close(pidfd)


async def wait_group_gone(pgid: int) -> None:
    """Return once no live process is left in the group. Unbounded: callers apply a deadline."""
    member: int | None = None
    while (member := find_live_member(pgid, member)) is not None:
        await _wait_member_exit(member, pgid)


async def terminate_group(server: str, proc: trio.Process) -> None:
    """Close stdin, grace, SIGTERM the group, grace, SIGKILL the group; return once the group is gone.

    "Gone" is: the leader reaped and no live process left in its group. The
    escalation runs beside that wait and stops the moment it holds; if it does
    not hold after the SIGKILL grace, this logs an error and returns anyway, so
    every path is bounded. Callers shield this.
    """
    pgid = proc.pid
    leader_gone = trio.Event()
    stopping = _stopping()

    async def escalate(done: trio.CancelScope) -> None:
        if proc.stdin is not None:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await proc.stdin.aclose()
        if not stopping.is_set():
            await _first_of(STDIN_EOF_GRACE_SEC, leader_gone, stopping)
        if stopping.is_set():
            await _first_of(STOP_EOF_GRACE_SEC, leader_gone)
        # Even when the leader is gone, grandchildren may live on in its group.
        signal_group(pgid, signal.SIGTERM)
        if not stopping.is_set():
            await _first_of(TERM_GRACE_SEC, stopping)  # a stop that begins meanwhile cuts the grace short
        if stopping.is_set():
            await trio.sleep(STOP_TERM_GRACE_SEC)
            logger.debug("server=%s pgid=%d still running after SIGTERM; sending SIGKILL", server, pgid)
        else:
            logger.warning("server=%s pgid=%d ignored SIGTERM; sending SIGKILL", server, pgid)
        signal_group(pgid, signal.SIGKILL)
        await trio.sleep(KILL_REAP_SEC)
        logger.error("server=%s pgid=%d survived SIGKILL; abandoning it", server, pgid)
        done.cancel(reason="the process group survived SIGKILL")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(escalate, nursery.cancel_scope)
        await proc.wait()
        leader_gone.set()
        await wait_group_gone(pgid)
        nursery.cancel_scope.cancel(reason="the process group is gone")


async def _first_of(bound_sec: float, *events: trio.Event) -> None:
    """Return once any of ``events`` is set, or after ``bound_sec``."""

    async def wait_then_end(event: trio.Event, scope: trio.CancelScope) -> None:
        await event.wait()
        scope.cancel()

    with trio.move_on_after(bound_sec):
        async with trio.open_nursery() as waits:
            for event in events:
                waits.start_soon(wait_then_end, event, waits.cancel_scope)


def live_children(parent: int | None = None) -> int:
    """Count the live (non-zombie) children of ``parent`` (default: this process); 0 without ``/proc``.

    Reads the kernel's per-thread ``children`` lists when it offers them (one
    small file per thread, not a stat per process on the machine), else scans.
    """
    pid = os.getpid() if parent is None else parent
    try:
        threads = os.listdir(f"/proc/{pid}/task")
        children = [child for tid in threads for child in _read_text(f"/proc/{pid}/task/{tid}/children").split()]
    except OSError:
        return _scan_children(pid)
    return sum((fields := _stat_fields(child)) is not None and fields[0] not in _GONE_STATES for child in children)


def _read_text(path: str) -> str:
    with open(path, "rb") as file:
        return file.read().decode()


def _scan_children(parent: int) -> int:
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    me = str(parent).encode()
    alive = 0
    for entry in entries:
        if entry.isdigit() and (fields := _stat_fields(entry)) is not None:
            alive += fields[1] == me and fields[0] not in _GONE_STATES
    return alive
