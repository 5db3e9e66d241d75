"""The ``run`` command's lifecycle: Supervisor + Front over stdio or HTTP, admin endpoint, signals, graceful stop.

``serve`` owns the root nursery. It starts the Supervisor (every ServerActor),
the Front's own tasks (change notices, exchanges, host warnings), a signal
watcher, the readiness announcement, the admin endpoint (if enabled) and the
host link: stdio (``host.stdio.link.StdioHostLink``) or streamable HTTP
(``host.http.link.HttpHostLink``), chosen by ``[supervisor.front] transport``. The
Relay connects the two sides: upstream generations hand it what belongs to a
host, the Front serves hosts through it. The first stop trigger ends the run:
SIGTERM, SIGINT, or (stdio) the host closing stdin. Then the link refuses new
requests and the Front new calls, and in-flight calls are drained by the
rules of each trigger (``_drain_bound_sec``): over HTTP they get
``shutdown_grace_sec`` to finish (a second signal ends the wait); a stdio host
that closed stdin had the requests it sent answered already (the stdio wire
waits for them, within the same grace); a stdio host that signals us is going
away and reads no more answers, so its calls are cancelled at once. Then the
host connection(s) are closed on their own (bounded), so the answers of calls
that just finished are flushed to the host(s), and the nursery is cancelled;
every stdio child is terminated by its transport's shielded, bounded cleanup;
behind a stdio front, the short way (``upstream.process_group.begin_stop``:
SIGTERM 20 ms after stdin closes, SIGKILL 50 ms later), so an idle sidecar is
gone within about 100 ms of a host's first signal, before its second (I11).
Behind the HTTP front, a service's manager waits seconds, and each child gets
the long way (0.5 s after stdin closes, 2 s after SIGTERM) to finish the
requests it was cancelling.

Before anything starts, ``serve`` freezes the heap (``gc.freeze``): what is
alive then (the imported SDK, pydantic's schemas, the settings) lives as long
as the process, and a cold start's allocations (a hundred tool definitions
per server) otherwise trigger collections that rescan all of it, about a
quarter of the CPU per server connected (issue 11). Until every first
attempt has ended, full collections wait too, and what the cold start kept is
then frozen as well (``ops.startup_heap``).

Telemetry (``[supervisor.telemetry]``, ``telemetry.setup``) starts first when
it is on, with every configured secret value handed to the span exporter's
redaction, and is flushed last (in a thread, bounded, shielded).

It also fixes glibc's heap thresholds (``wire.heap``), so the few 1 MB buffers
a large spliced call allocates and frees reuse warm pages, with a bounded RSS.

Over stdio, stdout carries only MCP frames: the stdio wire diverts fd 1 to
stderr while it serves, so a stray print cannot corrupt the protocol.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Final, Protocol

import trio
from mcp_types import LoggingLevel

from supervisor.catalog.disk import catalog_files, snapshot_key
from supervisor.config.loader import interpolation_environ, load_settings
from supervisor.config.models import Settings
from supervisor.errors import ConfigError, SupervisorError, first_leaf
from supervisor.host.front import Front
from supervisor.host.relay import Relay
from supervisor.host.stdio.link import StdioHostLink
from supervisor.host.stdio.prelude import Prelude
from supervisor.host.stdio.snapshots import SnapshotWriter
from supervisor.ops.startup_heap import HeapSettler, defer_full_collections
from supervisor.root import Supervisor
from supervisor.telemetry.setup import Running, add_secrets
from supervisor.telemetry.setup import start as start_telemetry
from supervisor.upstream.process_group import begin_stop
from supervisor.upstream.spawn import EarlyServers
from supervisor.wire import heap as _malloc

logger = logging.getLogger(__name__)

TELEMETRY_STOP_BOUND_SEC: Final = 5.0
"""How long the last spans and metrics may take to leave once the run has ended."""
_MASKED_ENV_MIN_LEN: Final = 8
"""A stdio server's ``env`` values this long or longer are masked in spans (shorter ones are flags, not secrets)."""

_HOST_LOG_LEVELS: Final[dict[int, LoggingLevel]] = {
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}


class _HostWarnings(logging.Handler):
    """Hands the ServerActors' warnings (reconnecting, gave up, conflicts) to the Relay for hosts."""

    def __init__(self, relay: Relay) -> None:
        super().__init__(logging.WARNING)
        self._relay = relay

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "supervisor.server_actor":
            level = _HOST_LOG_LEVELS.get(record.levelno, "critical" if record.levelno > logging.ERROR else "warning")
            server = getattr(record, "server", None)
            self._relay.publish_own_warning(level, record.getMessage(), server if isinstance(server, str) else None)


class HostLink(Protocol):
    """How hosts reach the Front: stdio or HTTP."""

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...

    def refuse_new(self) -> None: ...

    async def wait_idle(self) -> None: ...

    async def close(self) -> None: ...


async def serve(
    settings: Settings, early: EarlyServers | None = None, *, view: str | None = None, prelude: Prelude | None = None
) -> None:
    """Serve the host(s) until a stop trigger; see the module docstring.

    ``early``: stdio servers already started (``upstream.spawn``); each first
    generation takes its own, and what is left once every first attempt is
    made is terminated. ``view``: the stdio host sees this view
    (``[views.<name>]``) only; the HTTP front serves every view at its own path.
    ``prelude``: what answered the stdio host while the sidecar started
    (``host.stdio.prelude``); the stdio link takes its wire over.

    Raises:
        SupervisorError: A listener could not be started (the first such error, unwrapped).
    """
    _malloc.keep_large_buffers_warm()  # 1 MB messages reuse warm heap, within a bound (_malloc)
    telemetry = start_telemetry(settings.supervisor.telemetry, secrets=secret_values(settings))
    gc.freeze()  # start-up's objects live as long as we do: keep them out of every collection (module docstring)
    try:
        with defer_full_collections() as heap:
            try:
                await _serve(settings, heap, early, view, prelude)
            except* SupervisorError as group:
                raise first_leaf(group) from None
    finally:
        if telemetry is not None:
            await _stop_telemetry(telemetry)


async def _stop_telemetry(telemetry: Running) -> None:
    """Flush the last spans and metrics (in a thread: the exporters block), bounded, even when cancelled."""
    with trio.CancelScope(shield=True), trio.move_on_after(TELEMETRY_STOP_BOUND_SEC) as bound:
        await trio.to_thread.run_sync(telemetry.shutdown, abandon_on_cancel=True)
    if bound.cancelled_caught:
        logger.warning("telemetry did not flush within %gs; the last spans may be lost", TELEMETRY_STOP_BOUND_SEC)


def secret_values(settings: Settings) -> list[str]:
    """Every configured value the span exporter must mask, wherever it might turn up (``telemetry.sdk``)."""
    found: list[str] = []
    for server in settings.mcp_servers.values():
        found.extend(server.secret_values())
        found.extend(value for value in server.env.values() if len(value) >= _MASKED_ENV_MIN_LEN)
        if server.bearer_token_env_var is not None and (token := os.environ.get(server.bearer_token_env_var)):
            found.append(token)
    front, admin = settings.supervisor.front, settings.supervisor.admin
    for secret in (front.token, admin.token, settings.supervisor.catalog_store.url):
        if secret is not None:
            found.append(secret.get_secret_value())
    found.extend(token.secret.get_secret_value() for token in front.tokens)
    return [value for value in found if value]


class _Stop:
    """What ends the run: the first signal or (stdio) the host's hang-up; a second signal ends the drain too."""

    def __init__(self) -> None:
        self.event = trio.Event()
        """Set by the first trigger (the stdio link sets it when the host hangs up)."""
        self.signalled = False
        """Whether a signal set it (not the host closing stdin)."""
        self.again = trio.Event()
        """A second signal: whatever is still draining is cancelled now."""

    def on_signal(self, name: str) -> None:
        if self.event.is_set():
            logger.info("received %s; stopping now", name)
            self.again.set()
            return
        logger.info("received %s; stopping", name)
        self.signalled = True
        self.event.set()


async def _serve(
    settings: Settings, heap: HeapSettler, early: EarlyServers | None, view: str | None, prelude: Prelude | None
) -> None:
    relay = Relay()
    supervisor = Supervisor(settings, host=relay, early=early)
    stop = _Stop()
    grace = settings.supervisor.shutdown_grace_sec
    link: HostLink
    front_settings = settings.supervisor.front
    if front_settings.transport == "http":
        # One Front per view, each at its own path; they share the Supervisor and the Relay.
        fronts = {name: Front(supervisor, relay, catalog) for name, catalog in supervisor.views.items()}
        front = fronts[""]
        if not front_settings.has_token:
            logger.warning(
                "the HTTP front on %s accepts hosts WITHOUT a token (allow_unauthenticated_loopback = true): "
                "any process on this machine can use every configured server",
                front_settings.host,
            )
        from supervisor.host.http.link import HttpHostLink  # noqa: PLC0415  (starlette and the SDK's HTTP server: HTTP only)

        link = HttpHostLink(fronts, front_settings)
    else:
        fronts = {view or "": Front(supervisor, relay, supervisor.views[view or ""])}
        front = fronts[view or ""]
        files = catalog_files(settings)
        key = partial(snapshot_key, settings, view or "")
        snapshots = SnapshotWriter(front, files, key) if files is not None else None
        link = StdioHostLink(front, stop.event, grace_sec=grace, prelude=prelude, snapshots=snapshots)
    host_warnings = _HostWarnings(relay)
    logging.getLogger("supervisor").addHandler(host_warnings)
    try:
        await _run(settings, supervisor, list(fronts.values()), link, stop, heap=heap, early=early)
    finally:
        logging.getLogger("supervisor").removeHandler(host_warnings)
    logger.info("stopped")


async def _run(
    settings: Settings,
    supervisor: Supervisor,
    fronts: list[Front],
    link: HostLink,
    stop: _Stop,
    *,
    heap: HeapSettler,
    early: EarlyServers | None = None,
) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal, stop)
        await nursery.start(supervisor.run)
        if early is not None:
            nursery.start_soon(_discard_untaken, supervisor, early)
        nursery.start_soon(heap.settle_after, supervisor.wait_first_attempts, supervisor.startup_bound_sec)
        nursery.start_soon(_reload_on_sighup, supervisor)
        for front in fronts:
            await nursery.start(front.run)
        nursery.start_soon(_announce_ready, supervisor)
        if settings.supervisor.admin.enabled:
            from supervisor.ops.admin import AdminEndpoint  # noqa: PLC0415  (hypercorn and starlette: admin only)

            await nursery.start(AdminEndpoint(supervisor, settings.supervisor).run)
        await nursery.start(link.run)
        await stop.event.wait()
        link.refuse_new()
        for front in fronts:
            front.begin_shutdown()
        bound = _drain_bound_sec(settings, stop)
        with trio.move_on_after(bound) as grace_scope:
            async with trio.open_nursery() as drain:  # the first of: idle, the bound, a second signal
                drain.start_soon(_then_cancel, link.wait_idle, drain.cancel_scope)
                drain.start_soon(_then_cancel, stop.again.wait, drain.cancel_scope)
        if grace_scope.cancelled_caught and bound > 0:
            logger.warning("calls still running after %gs (shutdown_grace_sec); cancelling them", bound)
        # Close the host connection(s) on their own first, so the answers of calls
        # that just finished still reach the hosts; then everything else.
        await link.close()
        if settings.supervisor.front.transport == "stdio":
            begin_stop()  # every child the short way now: the stdio host that stops us waits about 100 ms
        nursery.cancel_scope.cancel("mcp-supervisor is stopping")


def _drain_bound_sec(settings: Settings, stop: _Stop) -> float:
    """How long in-flight calls may run on after the stop trigger (the module docstring's rules)."""
    if settings.supervisor.front.transport == "stdio" and stop.signalled:
        return 0.0  # a stdio host that signals us is going away: it reads no more answers
    return settings.supervisor.shutdown_grace_sec


async def _then_cancel(wait: Callable[[], Awaitable[object]], scope: trio.CancelScope) -> None:
    await wait()
    scope.cancel()


async def _discard_untaken(supervisor: Supervisor, early: EarlyServers) -> None:
    """Terminate the early processes no first generation took (a reload dropped or changed their server)."""
    await supervisor.wait_first_attempts()
    await early.discard_untaken()


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
            add_secrets(secret_values(new))  # a reloaded server's headers are masked in spans too
            logger.info("configuration reloaded from %s: %s", path, "; ".join(changes) or "nothing changed")


async def _stop_on_signal(stop: _Stop) -> None:
    # Keeps receiving until the run ends: a second signal during the (bounded) graceful
    # stop must not fall back to the default action and kill us mid-cleanup (I11); it
    # ends the drain instead.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            stop.on_signal(signal.Signals(signum).name)
