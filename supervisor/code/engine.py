"""The sandbox a program runs in: pydantic-monty's worker pool, driven from trio (issue 58).

Monty runs a Python subset in a pool of ``monty`` worker processes, with no
file system, network, environment or processes of its own. This module drives
its sync pool through the snapshot API, each worker round trip in
``trio.to_thread.run_sync`` (measured against ``AsyncMonty`` through
trio-asyncio and against Deno in ``bench.code_engines``: this is the faster
way, and the only one that cancels the calls a program never awaited):

* every tool call the program makes arrives as a snapshot and is answered
  with a future; the call runs as a task of the run's own nursery (at most
  ``max_concurrent_calls`` at once), through the caller's ``CallTool``; a
  ``FutureSnapshot`` waits for one of its pending calls and resumes with all
  that have settled. A call awaited at once, with nothing else runnable, is
  run first and answered in one thread hop (``allow_eager_await``);
* imports are answered from the ``tools`` package (``tools_module``); every
  other OS callback (``open``, ``Path.*``, ``os.environ``, ``os.getenv``,
  ``os.urandom``...) is refused: no mount and no ``os`` handler is ever given;
* the limits (``config.code.CodeLimits``): the wall time of the whole run,
  tool calls included (Monty's own clocks leave out the time it waits on us:
  ``trio.fail_after``, and the same figure for its own feed clock), memory,
  recursion, tool calls (ours: Monty's suspension budget is set above it, since
  its own error cannot be caught), concurrent calls, printed output (a sink
  that keeps the first bytes and counts the rest, so printing never fails a
  run);
* one checkout per program: a fresh session, fresh globals;
* a cancel (the host's, or the wall bound) kills the worker: a killer task
  beside the turn sends SIGKILL, the turn's thread returns at once with
  ``MontyCrashedError``, and the pool spawns a replacement at the next
  checkout. A worker that dies on its own fails its run (``RunFailed``,
  ``kind="crashed"``); the next run gets a new one.

Concurrency: ``serve`` holds the pool's lifetime (opened at the first run,
closed shielded when ``serve`` is cancelled). Each ``execute`` owns one
nursery; every call task it started is cancelled before it returns, so
nothing a program started outlives its run. Runs wait (cancellably) for one
of ``max_workers`` slots before they check a worker out, so a checkout never
blocks a thread.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Literal, TypeVar

import pydantic_monty as pm
import trio

from supervisor.code.stubs import ServerStubs
from supervisor.config.code import CodeLimits

T = TypeVar("T")
logger = logging.getLogger(__name__)

CallTool = Callable[[str, tuple[Any, ...], dict[str, Any]], Awaitable[Any]]
"""(``tools.<module>.<function>``, positional arguments, keyword arguments) -> the tool's value; raises
``ToolError`` for a tool's error (the program can catch it)."""

FailureKind = Literal["syntax", "type_check", "program", "limit", "crashed"]

SCRIPT_NAME: Final = "program.py"
_IMPORTS: Final = frozenset({"import", "import_stubs"})
"""The OS callbacks a program's imports make: answered from the ``tools`` package; every other one is refused."""
_TOP_LEVEL_RETURN: Final = "`return` statement outside of a function"
"""ty's diagnostic for a top-level ``return``, which the runtime accepts (the program's value)."""
_SUSPENSIONS_PER_CALL: Final = 2
"""Monty counts a call and its future's resolution; an import one more."""
_SHUTDOWN_BOUND_SEC: Final = 5.0
_NO_CAPABILITY_HINT: Final = (
    "\n(the sandbox has no file system, network, environment or processes: reach the world through `tools`)"
)


class ToolError(Exception):
    """A tool answered an error (or could not be called): raised in the program as a ``RuntimeError``."""


class RunFailed(Exception):
    """The program did not finish: its error, as the model reads it (``kind`` says whose)."""

    def __init__(self, kind: FailureKind, text: str, output: str = "") -> None:
        super().__init__(text)
        self.kind = kind
        self.text = text
        self.output = output
        """What the program printed before it stopped (bounded)."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a program gave back: its value, what it printed (bounded) and how many tool calls it made."""

    value: Any
    output: str
    calls: int


@dataclass(slots=True)
class _Output:
    """A print sink that keeps the first ``cap`` bytes and counts the rest (printing never fails a run)."""

    cap: int
    parts: list[str] = field(default_factory=list)
    kept: int = 0
    dropped: int = 0

    def __call__(self, stream: str, text: str) -> None:
        size = len(text.encode())
        room = self.cap - self.kept
        if size <= room:
            self.parts.append(text)
            self.kept += size
            return
        if room > 0:
            self.parts.append(text.encode()[:room].decode(errors="ignore"))
            self.kept = self.cap
        self.dropped += size - max(room, 0)

    def text(self) -> str:
        tail = f"\n[{self.dropped:,} more bytes of output cut by max_output_bytes]" if self.dropped else ""
        return "".join(self.parts) + tail


def tools_module(modules: Mapping[str, ServerStubs]) -> pm.ExternalModule:
    """The ``tools`` package: one submodule per server, its stubs for the type check.

    Each submodule needs an attribute per tool (a stub alone is an
    ``AttributeError`` at run time); the driver answers every call itself, so a
    placeholder does. Made once per view generation (``host.code_mode``).
    """
    return pm.ExternalModule(
        {
            name: pm.ExternalModule(dict.fromkeys(stubs.tools, _answered_by_the_driver), stubs=stubs.source)
            for name, stubs in modules.items()
        },
        stubs="",
    )


def _answered_by_the_driver(**_: Any) -> None:  # pragma: no cover  (the snapshot driver answers every call)
    raise AssertionError("the snapshot driver answers every call")


def monty_limits(limits: CodeLimits) -> pm.ResourceLimits:
    """The limits Monty enforces itself (the wall bound and the calls are ours)."""
    return {
        "max_feed_duration_secs": limits.timeout_sec,
        "max_memory": limits.max_memory_mb * 2**20,
        "max_recursion_depth": limits.max_recursion,
        "max_suspensions": _SUSPENSIONS_PER_CALL * limits.max_calls + 64,
        "max_total_sleep_secs": limits.timeout_sec,
    }


class Sandbox:
    """Monty's pool and the runs on it (module docstring)."""

    def __init__(self, max_workers: int | None = None) -> None:
        self._max_workers = max_workers or max(2, min(8, os.cpu_count() or 2))
        self._slots = trio.Semaphore(self._max_workers)
        self._pool: pm.Monty | None = None
        self._opening = trio.Lock()
        self._closed = False

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the pool until cancelled, then close it (its workers are killed; shielded, bounded)."""
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            self._closed = True
            pool, self._pool = self._pool, None
            if pool is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(_SHUTDOWN_BOUND_SEC):
                    await trio.to_thread.run_sync(pool.__exit__, None, None, None)

    async def _opened(self) -> pm.Monty:
        async with self._opening:
            if self._closed:
                raise RunFailed("crashed", "the sandbox is closed: mcp-supervisor is stopping")
            if self._pool is None:
                pool = pm.Monty(min_processes=1, max_processes=self._max_workers, checkout_timeout=_SHUTDOWN_BOUND_SEC)
                with trio.CancelScope(shield=True):  # entered, or it would never be exited
                    await trio.to_thread.run_sync(pool.__enter__)
                self._pool = pool
            return self._pool

    async def execute(self, source: str, tools: pm.ExternalModule, call: CallTool, limits: CodeLimits) -> RunResult:
        """Run ``source`` with ``tools`` importable, every call through ``call``, within ``limits``.

        Raises:
            RunFailed: It did not finish: a syntax or type error (no tool was called), an uncaught
                exception, a limit, or its worker died.
        """
        try:
            with trio.fail_after(limits.timeout_sec):
                async with self._slots:
                    pool = await self._opened()
                    return await self._checked_out(pool, source, tools, call, limits)
        except trio.TooSlowError:
            raise RunFailed(
                "limit", f"the program ran past timeout_sec = {limits.timeout_sec:g} s (wall time, tool calls included)"
            ) from None

    async def _checked_out(
        self, pool: pm.Monty, source: str, tools: pm.ExternalModule, call: CallTool, limits: CodeLimits
    ) -> RunResult:
        session = pool.checkout(
            script_name=SCRIPT_NAME,
            limits=monty_limits(limits),
            type_check=limits.type_check,
            type_check_format="concise",
            external_modules={"tools": tools},
        )
        with trio.CancelScope(shield=True):  # a free slot: a worker is idle or may be spawned at once
            await trio.to_thread.run_sync(session.__enter__)
        try:
            return await _Run(session, source, call, limits).drive()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(_SHUTDOWN_BOUND_SEC):
                await trio.to_thread.run_sync(session.__exit__, None, None, None)


class _Run:
    """One program on one checked-out session (``Sandbox.execute``)."""

    def __init__(self, session: pm.MontySession, source: str, call: CallTool, limits: CodeLimits) -> None:
        self._session = session
        self._source = source
        self._call = call
        self._limits = limits
        self._pid = session.worker_pid  # None while a turn is in flight on another thread: read it now
        self._output = _Output(limits.max_output_bytes)
        self._settled: dict[int, pm.ExternalSettledResult] = {}
        self._ready_send, self._ready = trio.open_memory_channel[int](math.inf)
        self._limiter = trio.CapacityLimiter(limits.max_concurrent_calls)
        self._calls = 0
        self._finished = False

    async def drive(self) -> RunResult:
        failure: BaseException | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._kill_on_cancel)
            try:
                done = await self._program(nursery)
            except (pm.MontyError, RunFailed) as exc:
                failure = exc  # raised after the nursery: not in a group
            self._finished = True
            nursery.cancel_scope.cancel()  # the calls the program never awaited, and the killer
        if failure is not None:
            failed = _failed(failure, self._limits)
            failed.output = self._output.text()
            raise failed from None
        return RunResult(done.output, self._output.text(), self._calls)

    async def _program(self, nursery: trio.Nursery) -> pm.MontyComplete:
        snap = await self._start(skip_type_check=False)
        while not isinstance(snap, pm.MontyComplete):
            try:
                snap = await self._answer(snap, nursery)
            except pm.MontyTypingError as exc:
                if _only_top_level_return(exc.display()):  # ty's rule, not the runtime's: run it unchecked
                    snap = await self._start(skip_type_check=True)
                    continue
                raise
        return snap

    async def _start(self, *, skip_type_check: bool) -> pm.SyncSnapshot:
        session, source, output = self._session, self._source, self._output
        return await self._turn(
            partial(session.feed_start, source, print_callback=output, skip_type_check=skip_type_check)
        )

    async def _answer(self, snap: pm.SyncSnapshot, nursery: trio.Nursery) -> pm.SyncSnapshot:
        if isinstance(snap, pm.FunctionSnapshot):
            if snap.is_os_function:
                return await self._turn(snap.resume_auto if snap.function_name in _IMPORTS else snap.resume_not_handled)
            self._count_call()
            if snap.allow_eager_await:  # awaited at once, nothing else runnable: call, then answer both in one hop
                result = await self._settle(str(snap.function_name), snap.args, snap.kwargs)
                after, used = await self._turn(partial(_resume_eagerly, snap, result))
                if not used:
                    self._settled[snap.call_id] = result
                return after
            nursery.start_soon(self._one, snap.call_id, str(snap.function_name), snap.args, snap.kwargs)
            return await self._turn(partial(snap.resume, {"future": ...}))
        if isinstance(snap, pm.FutureSnapshot):
            pending = snap.pending_call_ids
            ready = {i: self._settled.pop(i) for i in pending if i in self._settled}
            while not ready:
                await self._ready.receive()
                ready = {i: self._settled.pop(i) for i in pending if i in self._settled}
            return await self._turn(partial(snap.resume, ready))
        assert isinstance(snap, pm.NameLookupSnapshot)  # drive() stops at MontyComplete
        return await self._turn(snap.resume)  # a name nothing defines: NameError in the program

    def _count_call(self) -> None:
        self._calls += 1
        if self._calls > self._limits.max_calls:
            raise RunFailed(
                "limit", f"the program made more than max_calls = {self._limits.max_calls} tool calls; it was stopped"
            )

    async def _settle(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> pm.ExternalSettledResult:
        async with self._limiter:
            try:
                return {"return_value": await self._call(name, args, kwargs)}
            except ToolError as exc:
                return {"exc_type": "RuntimeError", "message": str(exc)}
            except Exception as exc:  # the caller's own failure: the program's call failed, the run goes on
                logger.exception("run_code: the call %s failed in the sidecar", name)
                return {"exc_type": "RuntimeError", "message": f"{name.removeprefix('tools.')}: {exc!r}"}

    async def _one(self, call_id: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._settled[call_id] = await self._settle(name, args, kwargs)
        self._ready_send.send_nowait(call_id)

    async def _kill_on_cancel(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            if not self._finished and self._pid is not None:
                # The worker is the pool's child, not reaped while its session is checked out: the pid is its own.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._pid, signal.SIGKILL)

    async def _turn(self, fn: Callable[[], T]) -> T:
        try:
            return await trio.to_thread.run_sync(fn)
        except pm.MontyCrashedError:
            if trio.current_effective_deadline() == -math.inf:
                await trio.lowlevel.checkpoint()  # the killer ended it: this is our cancel
            raise


def _resume_eagerly(snap: pm.FunctionSnapshot, result: pm.ExternalSettledResult) -> tuple[pm.SyncSnapshot, bool]:
    after = snap.resume({"future": ...})
    if isinstance(after, pm.FutureSnapshot) and snap.call_id in after.pending_call_ids:
        return after.resume({snap.call_id: result}), True
    return after, False


def _only_top_level_return(diagnostics: str) -> bool:
    errors = [line for line in diagnostics.splitlines() if "error[" in line]
    return bool(errors) and all(_TOP_LEVEL_RETURN in line for line in errors)


def _failed(exc: BaseException, limits: CodeLimits) -> RunFailed:
    """The model's reading of why a program stopped."""
    if isinstance(exc, RunFailed):
        return exc
    if isinstance(exc, pm.MontyCrashedError):
        return RunFailed("crashed", f"the sandbox's worker died ({exc}); this run failed, the next gets a new worker")
    if isinstance(exc, pm.MontyTypingError):
        text = "\n".join(line for line in exc.display().splitlines() if _TOP_LEVEL_RETURN not in line).strip()
        hint = _NO_CAPABILITY_HINT if "Cannot resolve imported module" in text or "Name `open`" in text else ""
        return RunFailed(
            "type_check",
            f"the program does not type-check against the tools' stubs (no tool was called):\n{text}{hint}",
        )
    if isinstance(exc, pm.MontySyntaxError):
        return RunFailed("syntax", exc.display())
    if isinstance(exc, pm.MontyRuntimeError):
        inner, text, short = exc.exception(), exc.display(), exc.display("type-msg")
        if isinstance(inner, TimeoutError) and "limit exceeded" in str(inner):
            return RunFailed("limit", f"{short}: the program ran past timeout_sec = {limits.timeout_sec:g} s")
        if isinstance(inner, MemoryError) and "limit exceeded" in str(inner):
            return RunFailed("limit", f"{short} (max_memory_mb = {limits.max_memory_mb})")
        if isinstance(inner, RecursionError):
            return RunFailed("limit", f"{short} (max_recursion = {limits.max_recursion})")
        if isinstance(inner, PermissionError | ModuleNotFoundError) or "not supported in this environment" in text:
            return RunFailed("program", text + _NO_CAPABILITY_HINT)
        return RunFailed("program", text)
    return RunFailed("program", str(exc))
