"""The ``run`` command's lifecycle: Supervisor + Front over stdio or HTTP, admin endpoint, signals, graceful stop.

``serve`` owns the root nursery. It starts the Supervisor (every ServerActor),
the Front's change notifier, a signal watcher, the readiness announcement,
the admin endpoint (if enabled) and the host link: stdio (``StdioHostLink``,
here) or streamable HTTP (``front_http.HttpHostLink``), chosen by
``[supervisor.front] transport``. The first stop trigger ends the run:
SIGTERM, SIGINT, or (stdio) the host closing stdin. Then the link refuses new
requests and the Front new calls, in-flight calls get ``shutdown_grace_sec``
to finish, the host connection(s) are closed on their own (bounded), so the
answers of calls that just finished are flushed to the host(s), and then the
nursery is cancelled; every stdio child is terminated by its transport's
shielded, bounded cleanup (I11).

Over stdio, stdout carries only MCP frames: the stdio wire diverts fd 1 to
stderr while it serves, so a stray print cannot corrupt the protocol.
"""

from __future__ import annotations

import logging
import signal
from typing import Final, Protocol

import anyio
import trio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.shared.message import SessionMessage

from supervisor._stdio_wire import WriteStream, open_stdio_wire
from supervisor.admin import AdminEndpoint
from supervisor.errors import ConfigError, SupervisorError, first_leaf
from supervisor.front import Front
from supervisor.front_http import HttpHostLink
from supervisor.root import Supervisor
from supervisor.settings import Settings, interpolation_environ, load_settings

logger = logging.getLogger(__name__)

HOST_CLOSE_GRACE_SEC: Final = 5.0
"""How long closing the host connection (flushing the last answers) may take before it is cancelled."""


class HostLink(Protocol):
    """How hosts reach the Front: stdio or HTTP."""

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...

    def refuse_new(self) -> None: ...

    async def wait_idle(self) -> None: ...

    async def close(self) -> None: ...


async def serve(settings: Settings) -> None:
    """Serve the host(s) until a stop trigger; see the module docstring.

    Raises:
        SupervisorError: A listener could not be started (the first such error, unwrapped).
    """
    try:
        await _serve(settings)
    except* SupervisorError as group:
        raise first_leaf(group) from None


async def _serve(settings: Settings) -> None:
    supervisor = Supervisor(settings)
    http = settings.supervisor.front.transport == "http"
    front = Front(supervisor, delivery_reported=not http)
    stop = trio.Event()
    link: HostLink = HttpHostLink(front, settings.supervisor.front) if http else StdioHostLink(front, stop)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal, stop)
        await nursery.start(supervisor.run)
        nursery.start_soon(_reload_on_sighup, supervisor)
        nursery.start_soon(front.serve_change_notices)
        nursery.start_soon(_announce_ready, supervisor)
        if settings.supervisor.admin.enabled:
            await nursery.start(AdminEndpoint(supervisor, settings.supervisor).run)
        await nursery.start(link.run)
        await stop.wait()
        link.refuse_new()
        front.begin_shutdown()
        grace = settings.supervisor.shutdown_grace_sec
        with trio.move_on_after(grace) as grace_scope:
            await link.wait_idle()
        if grace_scope.cancelled_caught:
            logger.warning("calls still running after %gs (shutdown_grace_sec); cancelling them", grace)
        # Close the host connection(s) on their own first, so the answers of calls
        # that just finished still reach the hosts; then everything else.
        await link.close()
        nursery.cancel_scope.cancel("mcp-supervisor is stopping")
    logger.info("stopped")


async def _announce_ready(supervisor: Supervisor) -> None:
    """Log one ``ready`` line (an ``"event": "ready"`` JSON line in JSON mode) once every first attempt ended."""
    await supervisor.wait_first_attempts()
    statuses = supervisor.statuses()
    ready = [s.name for s in statuses if s.state == "ready"]
    not_ready = [s.name for s in statuses if s.state not in ("ready", "disabled")]
    tools = len(supervisor.registry)
    detail = f"; not ready: {', '.join(not_ready)}" if not_ready else ""
    extra = {"event": "ready", "tools": tools, "servers_ready": ready, "servers_not_ready": not_ready}
    logger.info("ready: %d tools from %d servers%s", tools, len(ready), detail, extra=extra)


class StdioHostLink:
    """The one host that started us, over our stdin/stdout."""

    def __init__(self, front: Front, stop: trio.Event) -> None:
        self._front = front
        self._stop = stop
        self._scope = trio.CancelScope()
        self._done = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the host until it hangs up or ``close``; either way, set the stop event."""
        front = self._front
        try:
            async with open_stdio_wire() as (read_stream, wire_write), trio.open_nursery() as relay_nursery:
                # The relay lives outside the host scope: answers the server produced
                # before that scope was cancelled still reach the wire.
                write_stream, to_relay = anyio.create_memory_object_stream[SessionMessage](0)
                relay_nursery.start_soon(_relay_to_host, front, to_relay, wire_write)
                with self._scope:
                    task_status.started()
                    await front.server.run(read_stream, write_stream, front.init_options)
                write_stream.close()  # the server closes it too; this ends the relay on every path
            if not self._scope.cancel_called:
                logger.info("host closed the connection; stopping")
        finally:
            self._stop.set()
            self._done.set()

    def refuse_new(self) -> None:
        """Nothing to do: there is one host, and the Front refuses its new calls."""

    async def wait_idle(self) -> None:
        await self._front.wait_idle()

    async def close(self) -> None:
        self._scope.cancel("mcp-supervisor is stopping")
        with trio.move_on_after(HOST_CLOSE_GRACE_SEC):
            await self._done.wait()


async def _relay_to_host(front: Front, source: MemoryObjectReceiveStream[SessionMessage], wire: WriteStream) -> None:
    """Forward the server's messages to the wire, telling the Front which answers went out."""
    async with source, wire:
        async for message in source:
            try:
                await wire.send(message)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                logger.debug("host wire closed; dropping outgoing messages")
            front.note_sent(message)


async def _reload_on_sighup(supervisor: Supervisor) -> None:
    """SIGHUP: re-read the settings file and apply it; a bad file is logged and changes nothing."""
    path = supervisor.settings.source_path
    with trio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            try:
                new = load_settings(path, environ=interpolation_environ())
            except ConfigError as exc:
                logger.error("reload refused, the running configuration stays: %s", exc)
                continue
            changes = await supervisor.reload(new)
            logger.info("configuration reloaded from %s: %s", path, "; ".join(changes) or "nothing changed")


async def _stop_on_signal(stop: trio.Event) -> None:
    # Keeps receiving until the run ends: a second signal during the (bounded) graceful
    # stop must not fall back to the default action and kill us mid-cleanup (I11).
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            if stop.is_set():
                logger.info("received %s; already stopping (bounded by shutdown_grace_sec)", name)
            else:
                logger.info("received %s; stopping", name)
                stop.set()
