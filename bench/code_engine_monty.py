"""Monty (pydantic-monty) driven from trio, two ways, for ``bench.code_engines``.

* :class:`MontyThreads`: the sync ``Monty`` pool and its snapshot API. Every
  blocking worker round trip (``feed_start``, ``resume``) runs in
  ``trio.to_thread.run_sync``; each external call is answered with a future at
  once and run as a task in the run's own nursery; a ``FutureSnapshot`` waits
  for at least one of its pending calls and resumes with all that are settled.
  Cancelling the run kills the worker process (the killer task runs beside the
  turn, as trio's ``run_process`` delivers a cancel), the turn's thread returns
  with ``MontyCrashedError`` and the pool replaces the worker at the next
  checkout. No thread is abandoned.
* :class:`MontyAsyncio`: ``AsyncMonty`` inside ``trio_asyncio.open_loop()``,
  entered with ``aio_as_trio``; the tools are coroutine functions in the
  ``ExternalModule`` that call back into trio with ``trio_as_aio``.

Concurrency: each ``run`` owns one nursery; every call task it starts is
cancelled before ``run`` returns, so nothing a program started outlives it
(DESIGN I21). The wall-time bound is the caller's (``trio.fail_after`` around
``run``): Monty's own duration limits count only the time the sandbox executes,
never the time it waits on the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, TypeVar

import pydantic_monty as pm
import trio
import trio_asyncio  # type: ignore[import-untyped]

T = TypeVar("T")

#: (server, tool, arguments) -> the tool's value; raises :class:`ToolFailed` for a tool error.
ToolCall = Callable[[str, str, dict[str, Any]], Awaitable[Any]]

#: The OS callbacks a program's imports make: answered from ``external_modules``. Every other
#: OS callback (open, Path.*, os.environ, os.getenv, os.urandom, ...) gets Monty's default refusal.
_IMPORT_CALLBACKS: Final = frozenset({"import", "import_stubs"})


class ToolFailed(Exception):
    """A tool's error, raised into the program as a ``RuntimeError`` it can catch."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a program gave back: its value, what it printed (bounded) and how many tool calls it made."""

    value: Any
    output: str
    calls: int


@dataclass(slots=True)
class _Output:
    """A print sink that keeps the first ``cap`` characters and counts the rest (never fails the run)."""

    cap: int
    parts: list[str] = field(default_factory=list)
    kept: int = 0
    dropped: int = 0

    def __call__(self, stream: str, text: str) -> None:
        room = self.cap - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))

    def text(self) -> str:
        tail = f"\n[... {self.dropped} more characters]" if self.dropped else ""
        return "".join(self.parts) + tail


def tools_module(stubs: Mapping[str, str], attrs: Mapping[str, Mapping[str, Any]] | None = None) -> pm.ExternalModule:
    """The ``tools`` package: one submodule per server, ``stubs[server]`` its ``.pyi`` source.

    A submodule must carry an attribute per tool (a stub alone gives ``AttributeError``
    at run time). Under the snapshot API the host answers every call itself, so a
    placeholder does; ``attrs`` gives real callables (``AsyncMonty`` calls them).
    """
    modules: dict[str, Any] = {}
    for server, stub in stubs.items():
        names = attrs[server] if attrs is not None else dict.fromkeys(_stub_functions(stub), _placeholder)
        modules[server] = pm.ExternalModule(dict(names), stubs=stub)
    return pm.ExternalModule(modules, stubs="")


def _placeholder(**kwargs: Any) -> None:
    raise AssertionError("the snapshot driver answers every call")


def _stub_functions(stub: str) -> list[str]:
    return [
        line.split("(")[0].removeprefix("async def ").strip()
        for line in stub.splitlines()
        if line.startswith("async def ")
    ]


def _split(function_name: str) -> tuple[str, str]:
    # "tools.demo.echo" -> ("demo", "echo")
    _, server, tool = function_name.split(".", 2)
    return server, tool


class MontyThreads:
    """The sync pool, each worker round trip in a trio worker thread."""

    def __init__(self, pool: pm.Monty, *, stubs: Mapping[str, str], output_cap: int = 64 * 1024) -> None:
        self._pool = pool
        self._modules = {"tools": tools_module(stubs)}
        self._output_cap = output_cap

    async def run(
        self,
        code: str,
        call: ToolCall,
        *,
        limits: pm.ResourceLimits | None = None,
        type_check: bool = False,
    ) -> RunResult:
        """Run one program in a fresh session; raise ``MontyError`` subclasses as the program fails."""
        session = self._pool.checkout(
            limits=limits, type_check=type_check, type_check_format="concise", external_modules=self._modules
        )
        # Checkout waits for a free worker (bounded by the pool's checkout_timeout): not abandonable,
        # or a session entered late would never be exited.
        await trio.to_thread.run_sync(session.__enter__)
        try:
            return await self._drive(session, code, call)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await trio.to_thread.run_sync(session.__exit__, None, None, None)

    async def _drive(self, session: pm.MontySession, code: str, call: ToolCall) -> RunResult:
        # worker_pid is None while a turn is in flight on another thread: read it now.
        pid = session.worker_pid
        output = _Output(self._output_cap)
        settled: dict[int, pm.ExternalSettledResult] = {}
        send, receive = trio.open_memory_channel[int](64)
        calls = 0
        finished = False

        async def settle(name: str, kwargs: dict[str, Any]) -> pm.ExternalSettledResult:
            server, tool = _split(name)
            try:
                return {"return_value": await call(server, tool, kwargs)}
            except ToolFailed as exc:
                return {"exc_type": "RuntimeError", "message": str(exc)}

        async def one(call_id: int, name: str, kwargs: dict[str, Any]) -> None:
            settled[call_id] = await settle(name, kwargs)
            await send.send(call_id)

        async def kill_on_cancel() -> None:
            try:
                await trio.sleep_forever()
            finally:
                if not finished and pid is not None:
                    _kill(pid)

        async def turn(fn: Callable[[], T]) -> T:
            try:
                return await trio.to_thread.run_sync(fn)
            except pm.MontyCrashedError:
                if trio.current_effective_deadline() == -math.inf:
                    await trio.lowlevel.checkpoint()  # the killer ended it: this is our cancel
                raise

        async def drive(nursery: trio.Nursery) -> pm.MontyComplete:
            nonlocal calls
            snap = await turn(lambda: session.feed_start(code, print_callback=output))
            while not isinstance(snap, pm.MontyComplete):
                if isinstance(snap, pm.FunctionSnapshot):
                    fs = snap
                    if fs.is_os_function:
                        # Imports are answered from external_modules; every other OS call is refused.
                        snap = await turn(
                            fs.resume_auto if fs.function_name in _IMPORT_CALLBACKS else fs.resume_not_handled
                        )
                    elif fs.allow_eager_await:
                        # Awaited at once with no other sandbox task runnable: run the call here, then
                        # answer the call and its future in one thread hop (two worker round trips).
                        calls += 1
                        result = await settle(fs.function_name, fs.kwargs)
                        snap, used = await turn(partial(_resume_eagerly, fs, result))
                        if not used:
                            settled[fs.call_id] = result
                    else:
                        calls += 1
                        nursery.start_soon(one, fs.call_id, fs.function_name, fs.kwargs)
                        snap = await turn(partial(fs.resume, {"future": ...}))
                elif isinstance(snap, pm.FutureSnapshot):
                    fut = snap
                    ready = {i: settled.pop(i) for i in fut.pending_call_ids if i in settled}
                    while not ready:
                        await receive.receive()
                        ready = {i: settled.pop(i) for i in fut.pending_call_ids if i in settled}
                    snap = await turn(partial(fut.resume, ready))
                else:
                    snap = await turn(snap.resume)  # an undefined name: NameError
            return snap

        failure: BaseException | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(kill_on_cancel)
            try:
                done = await drive(nursery)
            except trio.Cancelled:
                raise
            except Exception as exc:
                failure = exc  # the program failed, its worker is sound: raised below, not in a group
            finished = True
            nursery.cancel_scope.cancel()  # calls the program never awaited, and the killer
        if failure is not None:
            raise failure
        return RunResult(done.output, output.text(), calls)


def _resume_eagerly(fs: pm.FunctionSnapshot, result: pm.ExternalSettledResult) -> tuple[pm.SyncSnapshot, bool]:
    after = fs.resume({"future": ...})
    if isinstance(after, pm.FutureSnapshot) and fs.call_id in after.pending_call_ids:
        return after.resume({fs.call_id: result}), True
    return after, False


def _kill(pid: int) -> None:
    # The worker is the pool's child and not yet reaped while its session is checked out,
    # so the pid cannot have been reused.
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@dataclass(slots=True)
class _AioRun:
    call: ToolCall
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)


_RUN: contextvars.ContextVar[_AioRun] = contextvars.ContextVar("_RUN")


class MontyAsyncio:
    """``AsyncMonty`` on trio-asyncio's loop. Use inside ``trio_asyncio.open_loop()``."""

    def __init__(self, pool: pm.AsyncMonty, *, stubs: Mapping[str, str], output_cap: int = 64 * 1024) -> None:
        self._pool = pool
        attrs = {
            server: {name: self._tool(server, name) for name in _stub_functions(stub)} for server, stub in stubs.items()
        }
        self._modules = {"tools": tools_module(stubs, attrs)}
        self._output_cap = output_cap

    @staticmethod
    def _tool(server: str, tool: str) -> Callable[..., Awaitable[Any]]:
        async def call_tool(**kwargs: Any) -> Any:
            # Host callbacks run in copies of the feeding task's context: the run is there.
            run = _RUN.get()
            task = asyncio.current_task()
            if task is not None:
                run.tasks.add(task)
            try:
                return await trio_asyncio.trio_as_aio(run.call)(server, tool, kwargs)
            except ToolFailed as exc:
                raise RuntimeError(str(exc)) from None
            finally:
                if task is not None:
                    run.tasks.discard(task)

        return call_tool

    async def run(
        self,
        code: str,
        call: ToolCall,
        *,
        limits: pm.ResourceLimits | None = None,
        type_check: bool = False,
    ) -> RunResult:
        result: RunResult = await trio_asyncio.aio_as_trio(self._run)(code, call, limits, type_check)
        return result

    async def _run(self, code: str, call: ToolCall, limits: pm.ResourceLimits | None, type_check: bool) -> RunResult:
        output = _Output(self._output_cap)
        run = _AioRun(call)
        _RUN.set(run)
        try:
            async with self._pool.checkout(
                limits=limits, type_check=type_check, type_check_format="concise", external_modules=self._modules
            ) as session:
                value = await session.feed_run(code, print_callback=output)
        finally:
            # AsyncMonty leaves the coroutines of calls the program never awaited running: end them.
            for task in list(run.tasks):
                task.cancel()
        return RunResult(value, output.text(), -1)


async def open_asyncio_pool(**kwargs: Any) -> pm.AsyncMonty:
    """Enter an ``AsyncMonty`` pool from trio (inside ``trio_asyncio.open_loop()``)."""
    pool = pm.AsyncMonty(**kwargs)
    await trio_asyncio.aio_as_trio(pool.__aenter__)()
    return pool


async def close_asyncio_pool(pool: pm.AsyncMonty) -> None:
    await trio_asyncio.aio_as_trio(pool.__aexit__)(None, None, None)
