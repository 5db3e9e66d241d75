"""The ``run`` command's lifecycle: Supervisor + Front over stdio, signals, graceful stop.

``serve`` owns the root nursery. It starts the Supervisor (every ServerActor),
the Front's change notifier, a signal watcher and the Front's stdio loop. The
first of these stop triggers ends the run: SIGTERM, SIGINT, or the host
closing stdin. Then the Front refuses new calls, in-flight calls get
``shutdown_grace_sec`` to finish, and the nursery is cancelled; every stdio
child is terminated by its transport's shielded, bounded cleanup (I11).

Stdout carries only MCP frames: the stdio wire diverts fd 1 to stderr while it
serves, so a stray print cannot corrupt the protocol.
"""

from __future__ import annotations

import logging
import signal

import trio

from supervisor._stdio_wire import open_stdio_wire
from supervisor.front import Front
from supervisor.root import Supervisor
from supervisor.settings import Settings

logger = logging.getLogger(__name__)


async def serve(settings: Settings) -> None:
    """Serve the host over stdio until it hangs up or a stop signal arrives."""
    supervisor = Supervisor(settings)
    front = Front(supervisor)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal, stop)
        await nursery.start(supervisor.run)
        nursery.start_soon(front.serve_change_notices)
        nursery.start_soon(_serve_host_over_stdio, front, stop)
        await stop.wait()
        front.begin_shutdown()
        grace = settings.supervisor.shutdown_grace_sec
        with trio.move_on_after(grace) as grace_scope:
            await front.wait_idle()
        if grace_scope.cancelled_caught:
            logger.warning("calls still running after %gs (shutdown_grace_sec); cancelling them", grace)
        nursery.cancel_scope.cancel("mcp-supervisor is stopping")
    logger.info("stopped")


async def _serve_host_over_stdio(front: Front, stop: trio.Event) -> None:
    async with open_stdio_wire() as (read_stream, write_stream):
        await front.server.run(read_stream, write_stream, front.init_options)
    logger.info("host closed the connection; stopping")
    stop.set()


async def _stop_on_signal(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s; stopping", signal.Signals(signum).name)
            stop.set()
            return
