"""The early start of stdio servers (``supervisor.upstream.spawn``, issue 11's cold start).

The sidecar starts its stdio servers before it imports the SDK, so their start-up
overlaps its own; the first generation of each takes its process. What must hold:
the module that does it imports no SDK (else there is no overlap); each enabled
stdio server gets one process, taken once, by unchanged settings only; nothing
untaken outlives the start (no orphans, I11); the CPU restriction during the
import is lifted afterwards without overriding a child's own choice. The e2e
test shows a real sidecar's first generation running on the early process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from supervisor import serve as serve_module
from supervisor.config.models import Settings, SupervisorSection
from supervisor.config.servers import ServerSettings
from supervisor.upstream.process_group import group_alive, terminate_group
from supervisor.upstream.spawn import EarlyServers, early_servers
from tests.sidecar import (
    MARK_ENV,
    REPO_ROOT,
    fixture_server,
    open_host,
    run_cli,
    scaled,
    sidecar_argv,
    sidecar_env,
    started_pids,
    write_settings,
)

pytestmark = pytest.mark.e2e  # every test here starts processes

BOUND_SEC = scaled(15)
# A server that waits on stdin: it pins itself to the CPUs named on its first line, then says so.
WAITER = (
    "import os, sys\n"
    "line = sys.stdin.readline()\n"
    "if line.strip():\n"
    "    os.sched_setaffinity(0, {int(c) for c in line.split()})\n"
    "    print('pinned', flush=True)\n"
    "sys.stdin.read()\n"
)


def _stdio(name: str, *, enabled: bool = True, args: list[str] | None = None) -> ServerSettings:
    return ServerSettings(
        name=name,
        command=sys.executable,
        args=args if args is not None else ["-c", WAITER],
        env={MARK_ENV: os.environ[MARK_ENV]},
        enabled=enabled,
    )


def _settings(*servers: ServerSettings, spawn_concurrency: int = 0) -> Settings:
    return Settings(
        supervisor=SupervisorSection(spawn_concurrency=spawn_concurrency),
        mcp_servers={server.name: server for server in servers},
    )


@asynccontextmanager
async def _reaped(*procs: trio.Process) -> AsyncIterator[None]:
    """Terminate and reap ``procs`` on the way out (a taken process is the test's to clean up)."""
    try:
        yield
    finally:
        with trio.CancelScope(shield=True):
            for proc in procs:
                await terminate_group("test", proc)


def _affinity(pid: int) -> frozenset[int]:
    return frozenset(os.sched_getaffinity(pid))


async def test_the_early_start_module_imports_no_sdk_so_its_children_start_during_the_sdk_import() -> None:
    heavy = ("mcp", "mcp_types", "anyio", "pydantic")
    probe = (
        f"import json, sys, supervisor.upstream.spawn; print(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    )
    with trio.fail_after(BOUND_SEC):
        done = await trio.run_process(
            [sys.executable, "-c", probe],
            capture_stdout=True,
            capture_stderr=True,
            cwd=str(REPO_ROOT),
            env=sidecar_env(),
        )
    assert json.loads(done.stdout) == []


async def test_each_enabled_stdio_server_gets_one_process_and_its_first_generation_takes_it_once() -> None:
    wanted, disabled = _stdio("wanted"), _stdio("off", enabled=False)
    remote = ServerSettings(name="remote", url="http://127.0.0.1:9/mcp")
    with trio.fail_after(BOUND_SEC):
        async with early_servers(_settings(wanted, disabled, remote)) as early:
            assert set(early.waiting) == {"wanted"}
            proc = early.take(wanted)
            assert proc is not None
            async with _reaped(proc):
                assert proc.poll() is None
                assert early.take(wanted) is None  # once
                assert early.waiting == {}
            assert early.take(disabled) is None


async def test_a_process_started_for_other_settings_is_not_taken_and_is_terminated_and_reaped() -> None:
    first = _stdio("srv")
    changed = _stdio("srv", args=["-c", WAITER, "changed"])
    early = EarlyServers()
    with trio.fail_after(BOUND_SEC):
        try:
            await early.start(_settings(first))
            proc = early.waiting["srv"]
            assert early.take(changed) is None  # a reload changed it before its first attempt
        finally:
            await early.discard_untaken()
    assert proc.returncode is not None  # reaped: no zombie left behind
    assert not group_alive(proc.pid)
    assert early.waiting == {}


async def test_leaving_the_early_start_terminates_whatever_nobody_took_even_on_an_error() -> None:
    with trio.fail_after(BOUND_SEC), pytest.raises(RuntimeError, match="the SDK import failed"):
        async with early_servers(_settings(_stdio("a"), _stdio("b"))) as early:
            procs = list(early.waiting.values())
            assert len(procs) == 2
            raise RuntimeError("the SDK import failed")
    for proc in procs:
        assert proc.returncode is not None
        assert not group_alive(proc.pid)


async def test_a_start_up_limit_leaves_every_start_to_it() -> None:
    with trio.fail_after(BOUND_SEC):
        async with early_servers(_settings(_stdio("a"), spawn_concurrency=2)) as early:
            assert early.waiting == {}


async def test_children_keep_off_the_importing_cpu_until_released_and_a_childs_own_choice_stands() -> None:
    ours = _affinity(0)
    with trio.fail_after(BOUND_SEC):
        async with early_servers(_settings(_stdio("left"), _stdio("chooser"))) as early:
            left, chooser = early.waiting["left"], early.waiting["chooser"]
            restricted = _affinity(left.pid)
            if len(ours) < 2:
                assert restricted == ours  # one CPU: nothing to keep off
                return
            assert restricted < ours and len(ours - restricted) == 1  # every CPU but the importer's
            assert _affinity(chooser.pid) == restricted
            # The chooser pins itself (to the importer's CPU) before the release.
            assert chooser.stdin is not None and chooser.stdout is not None
            await chooser.stdin.send_all(" ".join(map(str, sorted(ours - restricted))).encode() + b"\n")
            assert (await chooser.stdout.receive_some()).startswith(b"pinned")
            early.release_cpus()
            assert _affinity(left.pid) == ours
            assert _affinity(chooser.pid) == ours - restricted
            early.release_cpus()  # idempotent
            assert _affinity(left.pid) == ours


async def test_a_sidecars_first_generation_runs_on_the_process_it_started_before_the_sdk_import(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    config = write_settings(tmp_path, {"fx": fixture_server("--tools", "echo", "--log", str(log))})
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            names = await host.wait_tools(lambda names: "mcp__fx__echo" in names)
            assert names == ["mcp__fx__echo"]
            result = await host.session.call_tool("mcp__fx__echo", {"text": "hi"})
            assert not result.is_error
            taken = [
                m
                for line in host.log.lines
                if (m := re.search(r"server=fx: its first generation takes .* pid=(\d+)", line))
            ]
    assert started_pids(log) == [int(taken[0][1])]  # one process in all: the early one, taken
    assert len(taken) == 1


async def test_a_sidecar_terminates_the_early_processes_left_once_every_first_attempt_is_made() -> None:
    class FirstAttemptsMade:
        async def wait_first_attempts(self) -> None:
            await trio.lowlevel.checkpoint()

    early = EarlyServers()
    with trio.fail_after(BOUND_SEC):
        try:
            await early.start(_settings(_stdio("dropped")))
            proc = early.waiting["dropped"]
            await serve_module._discard_untaken(FirstAttemptsMade(), early)  # type: ignore[arg-type]
            assert proc.returncode is not None
            assert early.waiting == {}
        finally:
            await early.discard_untaken()


@pytest.mark.parametrize("command", ["tools", "call"])
async def test_the_one_shot_commands_use_the_process_started_before_the_sdk_import(
    tmp_path: Path, command: str
) -> None:
    log = tmp_path / "fx.log"
    config = write_settings(tmp_path, {"fx": fixture_server("--tools", "echo", "--log", str(log))})
    extra = ["mcp__fx__echo", '{"text": "hi"}'] if command == "call" else []
    result = await run_cli(command, "--config", str(config), "--verbose", *extra)
    assert result.code == 0, result.stderr
    assert ("mcp__fx__echo" if command == "tools" else '"hi"') in result.stdout
    taken = re.findall(r"server=fx: its first generation takes .* pid=(\d+)", result.stderr)
    assert started_pids(log) == [int(pid) for pid in taken]  # one process in all: the early one, taken
    assert len(taken) == 1


@pytest.mark.parametrize("sigint", ["default", "ignored"])
async def test_sigterm_before_the_sidecar_serves_still_reaps_what_it_started_early(tmp_path: Path, sigint: str) -> None:
    # "ignored": started as a shell starts a background job (``cmd &``): SIGINT ignored, inherited.
    # A server that ignores its stdin (EOF alone would not end it), tells a FIFO its pid once it runs,
    # then waits for a signal: only the sidecar's termination of its group ends it.
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    code = (
        f"import os, signal; os.write(os.open({str(fifo)!r}, os.O_WRONLY), str(os.getpid()).encode()); signal.pause()"
    )
    config = write_settings(tmp_path, {"stubborn": {"command": sys.executable, "args": ["-c", code]}})
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    argv = sidecar_argv(config)
    if sigint == "ignored":
        argv = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *argv]
    sidecar = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=sidecar_env(), cwd=str(REPO_ROOT)
    )
    try:
        with trio.fail_after(BOUND_SEC):
            await trio.lowlevel.wait_readable(reader)
            child = int(os.read(reader, 64))
            # The SDK import takes ~0.65 s from here: the signal lands in it, before serve listens.
            sidecar.send_signal(signal.SIGTERM)
            await sidecar.wait()
    finally:
        os.close(reader)
        with trio.CancelScope(shield=True):
            await terminate_group("sidecar", sidecar)
    assert not group_alive(child)  # terminated and reaped, not left to outlive the sidecar (I11)
