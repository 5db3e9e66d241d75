"""The start of the commands that connect: early servers, the stdio prelude, and signals until ``serve`` listens.

``cli`` parses, loads the settings and calls ``trio.run(start_early_then, ...)``;
this module is what runs first in it, before the SDK is imported:

* the stdio servers start (``upstream.spawn``'s early start), so their own
  start-up overlaps ours;
* for ``run`` on the stdio front, the prelude (``host.stdio.prelude``) takes
  the host wire and answers the host while the rest of the sidecar is imported
  in a worker thread (``_run``); a signal, or a host that leaves owing nothing,
  stops us before the Front even exists;
* SIGTERM unwinds like SIGINT until ``serve`` listens for both itself, an
  interrupt takes the early servers down the short way
  (``upstream.process_group.begin_stop``), and once the command is done both
  signals are ignored for the bounded cleanup left.

Concurrency: everything runs in the one trio thread but the import, which runs
in a worker thread the start abandons if it is stopped first. Nothing here
imports the SDK at module level.
"""

from __future__ import annotations

import importlib
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, Final

import trio

from supervisor.errors import EXIT_OK

if TYPE_CHECKING:
    from supervisor.config.models import Settings
    from supervisor.upstream.spawn import EarlyServers

IMPORT_SWITCH_INTERVAL_SEC: Final = 0.0005
"""The GIL's switch interval while the rest of the sidecar is imported in a thread beside the prelude (default 5 ms)."""


async def start_early_then(settings: Settings, command: str, *args: Any) -> int:
    """``run``, ``tools``, ``call``: start the stdio servers, import the SDK while they start, then the command.

    The early start is ``upstream.spawn``'s: the first connection attempt of each
    server takes its process. ``run`` serves until stopped; ``tools`` and
    ``call`` connect once (``oneshot``).
    """
    from supervisor.upstream.spawn import early_servers  # noqa: PLC0415  (trio and the settings only: no SDK)

    with _terminate_unwinds_like_interrupt():
        async with early_servers(settings) as early, _stopping_quickly_on_interrupt():
            if command == "run":
                await _run(settings, early, args[0])
                _leaving()
                return EXIT_OK
            from supervisor.commands import oneshot  # noqa: PLC0415  (~0.65 s of one CPU: the servers start meanwhile)

            early.release_cpus()
            if command == "tools":
                return await oneshot.tools(settings, *args, early=early)
            if command == "tokens":
                return await oneshot.tokens(settings, *args, early=early)
            if command == "pins":
                from supervisor.commands.pins import pins  # noqa: PLC0415  (the same import)

                return await pins(settings, *args, early=early)
            return await oneshot.call(settings, *args, early=early)


@asynccontextmanager
async def _stopping_quickly_on_interrupt() -> AsyncIterator[None]:
    """An interrupt (SIGINT, or SIGTERM before ``serve`` listens) takes the early servers down the short way.

    The one who signals us waits about 100 ms before it signals again (``upstream.process_group``).
    """
    from supervisor.upstream.process_group import begin_stop  # noqa: PLC0415  (trio only)

    try:
        yield
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt) or (
            isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is not None
        )
        if interrupted:
            begin_stop()
        raise


async def _run(settings: Settings, early: EarlyServers, view: str | None) -> None:
    """``run``: on the stdio front, the prelude answers the host while the rest of the sidecar is imported.

    The import (the SDK, pydantic's models of both protocol eras, the Front: ~0.7 s of a CPU) runs in a worker
    thread, so the prelude's task (``host.stdio.prelude``) answers ``initialize`` and, from the view's snapshot on
    disk, the first lists meanwhile; ``serve`` then hands its wire to the Front. Over HTTP nothing is listening yet,
    and the import simply runs.
    """
    if settings.supervisor.front.transport != "stdio":
        from supervisor.serve import serve  # noqa: PLC0415  (the servers start meanwhile)

        early.release_cpus()
        await serve(settings, early, view=view)
        return

    from supervisor.catalog.disk import catalog_files, snapshot_key  # noqa: PLC0415  (no SDK)
    from supervisor.host.capabilities import instructions  # noqa: PLC0415
    from supervisor.host.stdio.prelude import open_prelude  # noqa: PLC0415
    from supervisor.upstream.process_group import begin_stop  # noqa: PLC0415

    text = instructions(settings.supervisor.names.prefix)
    async with open_prelude(catalog_files(settings), view or "", snapshot_key(settings, view or ""), text) as prelude:
        serving: list[ModuleType] = []
        async with trio.open_nursery() as starting:

            async def import_serve() -> None:
                # The importing thread holds the GIL most of the time: hand it over more often than every 5 ms,
                # so that the prelude answers (and a stop is seen) without waiting out the thread's turns.
                switch = sys.getswitchinterval()
                sys.setswitchinterval(IMPORT_SWITCH_INTERVAL_SEC)
                try:
                    module = await trio.to_thread.run_sync(
                        importlib.import_module, "supervisor.serve", abandon_on_cancel=True
                    )
                finally:
                    sys.setswitchinterval(switch)
                serving.append(module)
                starting.cancel_scope.cancel()

            async def until_stopped() -> None:
                # A signal, or a host that left owing nothing, before the Front exists: stop without starting it.
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async with trio.open_nursery() as either:
                        either.start_soon(_first_signal, signals, either.cancel_scope)
                        await prelude.host_gone.wait()
                        either.cancel_scope.cancel()
                starting.cancel_scope.cancel()

            starting.start_soon(import_serve)
            starting.start_soon(until_stopped)
        if not serving:
            begin_stop()  # the early servers go the short way (``upstream.process_group``)
            return
        early.release_cpus()
        await serving[0].serve(settings, early, view=view, prelude=prelude)


async def _first_signal(signals: AsyncIterator[int], scope: Any) -> None:
    async for _ in signals:
        scope.cancel()
        return


_interrupts_ignored = False
"""Whether SIGINT was ignored when we started (``let_trio_take_interrupts``)."""


def let_trio_take_interrupts() -> None:
    """Let ``trio.run`` install its SIGINT handler even if the harness left SIGINT ignored.

    A process started in the background by a shell (``cmd &`` without job
    control) inherits SIGINT ignored; trio then installs no handler of its own,
    so ``_terminate_unwinds_like_interrupt`` would have none to give SIGTERM, and
    a SIGTERM during the start would end us at once, leaving the servers started
    early behind (I11). ``_terminate_unwinds_like_interrupt`` ignores SIGINT
    again once it holds trio's handler: the harness's choice stands.
    """
    global _interrupts_ignored  # noqa: PLW0603  (one process, one start: set once, before trio.run)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        _interrupts_ignored = True
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def _terminate_unwinds_like_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like SIGINT (trio's ``KeyboardInterrupt``) until ``serve`` listens for it itself.

    The early start has children running before ``serve``'s own handler
    (``serve._stop_on_signal``) exists; SIGTERM's default action would end the
    process at once and leave behind every child that does not exit on EOF
    (I11). Unwinding instead runs ``early_servers``' exit, which terminates and
    reaps them. Only where trio installed its SIGINT handler (the main thread):
    that handler raises only where trio can take it, else delivers it at the
    next checkpoint. It takes SIGINT only (it asserts so), so SIGTERM reaches it
    as SIGINT.

    Once the command is done (``_leaving``), both signals are ignored: what is
    left is the bounded cleanup and the exit, and a host's second signal (Claude
    Code sends SIGTERM 100 ms after SIGINT) must not cut the cleanup short.
    """
    interrupt = signal.getsignal(signal.SIGINT)
    if not callable(interrupt) or interrupt is signal.default_int_handler:
        yield
        return
    handler = interrupt

    def as_interrupt(signum: int, frame: FrameType | None) -> None:
        handler(signal.SIGINT, frame)

    previous = signal.signal(signal.SIGTERM, as_interrupt)
    if _interrupts_ignored:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is as_interrupt:
            signal.signal(signal.SIGTERM, previous)


def _leaving() -> None:
    """The command is done: ignore SIGINT and SIGTERM for the bounded cleanup and exit that are left."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
