"""The ``run`` command's lifecycle: Supervisor + Front over stdio, signals, graceful stop.

``serve`` owns the root nursery. It starts the Supervisor (every ServerActor),
the Front's change notifier, a signal watcher and the Front's stdio loop. The
first of these stop triggers ends the run: SIGTERM, SIGINT, or the host
closing stdin. Then the Front refuses new calls, in-flight calls get
``shutdown_grace_sec`` to finish, the host connection is closed on its own
(bounded), so the answers of calls that just finished are flushed to the
host, and then the nursery is cancelled; every stdio
child is terminated by its transport's shielded, bounded cleanup (I11).

Stdout carries only MCP frames: the stdio wire diverts fd 1 to stderr while it
serves, so a stray print cannot corrupt the protocol.
"""

from __future__ import annotations

import logging
import signal
from typing import Final

import anyio
import trio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.shared.message import SessionMessage

from supervisor._stdio_wire import WriteStream, open_stdio_wire
from supervisor.front import Front
from supervisor.root import Supervisor
from supervisor.settings import Settings

logger = logging.getLogger(__name__)

HOST_CLOSE_GRACE_SEC: Final = 5.0
"""How long closing the host connection (flushing the last answers) may take before it is cancelled."""


async def serve(settings: Settings) -> None:
    """Serve the host over stdio until it hangs up or a stop signal arrives."""
    supervisor = Supervisor(settings)
    front = Front(supervisor)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal, stop)
        await nursery.start(supervisor.run)
        nursery.start_soon(front.serve_change_notices)
        host_done = trio.Event()
        host_scope: trio.CancelScope = await nursery.start(_serve_host_over_stdio, front, stop, host_done)
        await stop.wait()
        front.begin_shutdown()
        grace = settings.supervisor.shutdown_grace_sec
        with trio.move_on_after(grace) as grace_scope:
            await front.wait_idle()
        if grace_scope.cancelled_caught:
            logger.warning("calls still running after %gs (shutdown_grace_sec); cancelling them", grace)
        # Close the host connection on its own first: the wire's writer is not
        # cancelled, so the answers of calls that just finished still reach the host.
        host_scope.cancel("mcp-supervisor is stopping")
        with trio.move_on_after(HOST_CLOSE_GRACE_SEC):
            await host_done.wait()
        nursery.cancel_scope.cancel("mcp-supervisor is stopping")
    logger.info("stopped")


async def _serve_host_over_stdio(
    front: Front,
    stop: trio.Event,
    done: trio.Event,
    *,
    task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED,
) -> None:
    try:
        async with open_stdio_wire() as (read_stream, wire_write), trio.open_nursery() as relay_nursery:
            # The relay lives outside the host scope: answers the server produced
            # before that scope was cancelled still reach the wire.
            write_stream, to_relay = anyio.create_memory_object_stream[SessionMessage](0)
            relay_nursery.start_soon(_relay_to_host, front, to_relay, wire_write)
            with trio.CancelScope() as scope:
                task_status.started(scope)
                await front.server.run(read_stream, write_stream, front.init_options)
            write_stream.close()  # the server closes it too; this ends the relay on every path
        if not scope.cancel_called:
            logger.info("host closed the connection; stopping")
    finally:
        stop.set()
        done.set()


async def _relay_to_host(front: Front, source: MemoryObjectReceiveStream[SessionMessage], wire: WriteStream) -> None:
    """Forward the server's messages to the wire, telling the Front which answers went out."""
    async with source, wire:
        async for message in source:
            try:
                await wire.send(message)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                logger.debug("host wire closed; dropping outgoing messages")
            front.note_sent(message)


async def _stop_on_signal(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s; stopping", signal.Signals(signum).name)
            stop.set()
            return
