"""The Supervisor: the root actor that owns the Registry and one ServerActor per server.

``Supervisor.run`` opens the nursery every ServerActor lives in and starts them
all concurrently, so one slow or broken server never delays another's
readiness (I12). It reports itself started once the actors are scheduled, not
once each has run its first step: awaiting fifty starts one by one let the
earlier actors spawn and handshake in between, and the host link (started
after the Supervisor) read the host's ``initialize`` only when the fleet was
nearly up (issue 11), too late for the Front to make the catalog's wire forms
while servers swap in. It ends only when cancelled; cancellation unwinds every
actor, and each actor's transport terminates its child process group in a
shielded, bounded cleanup (I11).

Who changes what: only ServerActors mutate the Registry (through their
mailboxes); the Front and the CLI only read it and route calls through
``route``. ``catalog_changed`` is a level-triggered wake-up for readers that
must react to Registry changes (the Front's notifier). The one exception is
``reload``: a server removed from the configuration (or disabled) has no actor
left to withdraw its tools, so the Supervisor does it, after that actor has
stopped.

The CacheActor (``CatalogCache.run``) starts first, in the same nursery: with
the fleet store it must be connected (bounded) before the first syncs, and a
fleet eviction's re-sync reaches an actor through ``_fleet_resync``, i.e.
through that actor's mailbox like every other sync.

Reload (SIGHUP): ``reload`` compares the new settings with the running ones.
Removed or disabled servers are stopped and withdrawn; new ones are started;
a server whose table changed, or that gave up (``failed``), is restarted with
a fresh actor. A restarted server keeps its previous tools listed until its
new actor's first sync (a ``refresh``) swaps them, so the host never sees a
gap. Each actor runs in its own cancel scope inside the Supervisor's nursery,
so one can be stopped without touching the others; stopping waits for the
actor's shielded, bounded transport cleanup (I11), so a new generation never
overlaps the old child. Every actor a reload stops is stopped concurrently
(the wait is one cleanup grace, not one per server), in a nursery the reload
owns; reloads run one at a time (``_reload_lock``).

While an actor stops it stays in ``actors``: ``statuses`` reports it as
``stopping`` and ``route`` answers its still-listed tools with a fast
"restarting" error instead of "unknown tool". The switch to the new
configuration (``settings``, ``actors``, ``disabled``, the withdrawals) is one
synchronous block after every stop has finished, so at every ``await`` each
configured server has exactly one entry in ``actors`` or ``disabled``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager

import trio
from mcp.client.caching import CacheMode
from mcp_types import LoggingLevel

from supervisor.calls.attribution import HostSide
from supervisor.catalog.cache import CatalogCache
from supervisor.catalog.naming import NameRule
from supervisor.catalog.registry import Kind, RegisteredPrompt, RegisteredTool, Registry
from supervisor.catalog.semantic_engine import SemanticConfig, SemanticEngine
from supervisor.catalog.views import CatalogView, ViewRules, everything
from supervisor.config.models import Settings
from supervisor.config.servers import ServerSettings
from supervisor.config.token_paths import store_dir
from supervisor.ops.metrics import Metrics
from supervisor.ops.status import ServerStatus
from supervisor.pins.guard import PinGuard
from supervisor.pins.judge import PinPolicy
from supervisor.pins.store import FilePinStore, PinStore
from supervisor.pins.watch import serve_pin_changes
from supervisor.seams import Connector, UpstreamSession
from supervisor.server_actor import ServerActor
from supervisor.upstream.connect import open_upstream
from supervisor.upstream.spawn import EarlyServers

logger = logging.getLogger(__name__)


def production_connector(
    cache: CatalogCache | None, host: HostSide | None, early: EarlyServers | None = None
) -> Connector:
    """Connect real upstreams, each generation sharing the server's one cache store (I4) and the host side.

    ``early``: the stdio servers started before the SDK import (``upstream.spawn``); a first generation takes its own.
    """

    def connect(
        settings: ServerSettings, *, on_list_changed: Callable[[Kind], None]
    ) -> AbstractAsyncContextManager[UpstreamSession]:
        config = cache.config_for(settings) if cache is not None else None
        return open_upstream(settings, on_list_changed=on_list_changed, cache=config, host=host, early=early)

    return connect


class ChangeSignal:
    """A level-triggered "something changed" wake-up; ``notify`` is synchronous."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = trio.Event()

    async def wait(self) -> None:
        """Wait for the next ``notify`` after this call."""
        await self._event.wait()


class _RunningActor:
    """One actor running in its own cancel scope, so it can be stopped alone."""

    def __init__(self, actor: ServerActor) -> None:
        self.actor = actor
        self.scope = trio.CancelScope()
        self.done = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with self.scope:
                await self.actor.run(task_status=task_status)
        finally:
            self.done.set()


class Supervisor:
    """Owns the Registry and the ServerActors of one configuration."""

    def __init__(
        self,
        settings: Settings,
        *,
        connector: Connector | None = None,
        on_status: Callable[[ServerStatus], None] | None = None,
        host: HostSide | None = None,
        early: EarlyServers | None = None,
        pin_writes: bool = True,
    ) -> None:
        self.settings = settings
        self._pin_writes = pin_writes
        self.catalog_changed = ChangeSignal()
        names = settings.supervisor.names
        self.registry = Registry(on_change=self.catalog_changed.notify, rule=NameRule(names.prefix, names.limit))
        self.cache = CatalogCache(
            principal=settings.supervisor.principal,
            store=settings.supervisor.catalog_store,
            state_dir=settings.supervisor.token_store,
        )
        self.cache.resync = self._fleet_resync
        self.pin_store = self._pin_store(settings)
        """Every server's pinned definitions (issue 27); ``pin_writes=False`` judges without writing (``pins``)."""
        self.metrics = Metrics(
            statuses=self.statuses, catalog_size=lambda: len(self.registry), store_status=self.cache.store_status
        )
        self.actors: dict[str, ServerActor] = {}
        self.disabled: dict[str, ServerStatus] = {}
        concurrency = settings.supervisor.spawn_concurrency
        self._startup_slots = trio.CapacityLimiter(concurrency) if concurrency else None
        self._connector = connector if connector is not None else production_connector(self.cache, host, early)
        self._on_status = on_status
        self._nursery: trio.Nursery | None = None
        self._running: dict[str, _RunningActor] = {}
        self._log_level: LoggingLevel | None = None
        self._subscriptions: dict[str, frozenset[str]] = {}
        self._stopping: dict[str, str] = {}
        """Servers whose actor a reload is stopping, and what a call to one of their tools is told meanwhile."""
        self._reload_lock = trio.Lock()
        self.views: dict[str, CatalogView] = {"": everything(self.registry)}
        """Every view by name (``""``: the default one, everything); a reload edits them in place."""
        for name, view in settings.views.items():
            self.views[name] = CatalogView(self.registry, ViewRules.of(name, view, settings.mcp_servers))
        self.semantic = self._semantic_engine(settings)
        """The search views' embedding model (issue 48): loads in the background, never delays start-up."""
        for name, server in settings.mcp_servers.items():
            if server.enabled:
                self.actors[name] = self._new_actor(server)
            else:
                self.disabled[name] = ServerStatus(name, state="disabled")

    def _new_actor(self, server: ServerSettings) -> ServerActor:
        policy = PinPolicy(server.pin, server.pin_new_tools)
        actor = ServerActor(
            server,
            self.registry,
            connector=self._connector,
            cache=self.cache,
            on_status=self._on_status,
            events=self.metrics,
            startup_slots=self._startup_slots,
            pins=PinGuard(server.name, policy, self.pin_store, writes=self._pin_writes),
        )
        actor.set_log_level(self._log_level)
        actor.set_subscriptions(self._subscriptions.get(server.name, frozenset()))
        return actor

    def _semantic_engine(self, settings: Settings) -> SemanticEngine:
        search = settings.supervisor.search
        engine = SemanticEngine(
            SemanticConfig(enabled=search.semantic, model=search.model, path=search.path),
            store_dir(settings.supervisor.token_store),
        )
        if self.cache.fleet is not None:
            from supervisor.fleet.vectors import FleetVectors  # noqa: PLC0415 - only a Redis fleet loads coredis

            engine.shared = FleetVectors(self.cache.fleet.store)
        engine.about = _AboutServers(self.actors)
        searching = [view for view in self.views.values() if view.search]
        if not searching:
            engine.disable("no search view")
        for view in searching:
            view.semantic = engine
        return engine

    def _pin_store(self, settings: Settings) -> PinStore:
        """The local pin files, or, with the Redis catalog store, the fleet's pins with the files as copy."""
        local = FilePinStore(settings.supervisor.token_store, settings.supervisor.principal)
        if self.cache.fleet is None:
            return local
        from supervisor.fleet.pins import FleetPins  # noqa: PLC0415 - only a Redis fleet loads coredis
        from supervisor.pins.fleet_store import FleetPinStore  # noqa: PLC0415

        return FleetPinStore(FleetPins(self.cache.fleet.store, settings.supervisor.principal), local)

    def _pin_guards(self) -> list[tuple[PinGuard, Callable[[], None]]]:
        """Each running actor's pin guard, with how to make it judge again (``pins.watch``)."""
        return [(actor.pins, actor.request_rejudge) for actor in self.actors.values() if actor.pins is not None]

    def _fleet_resync(self, server: str, mode: CacheMode, kinds: frozenset[Kind]) -> None:
        """Another sidecar evicted ``server``'s catalog: re-sync it through its actor's mailbox (I1, I14)."""
        if (actor := self.actors.get(server)) is not None:
            actor.request_sync(mode, "list_changed", kinds)

    def set_log_level(self, level: LoggingLevel | None) -> None:
        """Ask every server (and every server started later) for log messages at ``level`` and above."""
        self._log_level = level
        for actor in self.actors.values():
            actor.set_log_level(level)

    def set_subscriptions(self, server: str, uris: frozenset[str]) -> None:
        """Keep ``server`` subscribed to exactly ``uris`` (across its reconnects and restarts)."""
        self._subscriptions[server] = uris
        if (actor := self.actors.get(server)) is not None:
            actor.set_subscriptions(uris)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run every enabled server's actor until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            # The CacheActor first: with the fleet store, a cold start's first sync may read it (I14).
            await nursery.start(self.cache.run)
            await nursery.start(self.semantic.run)  # started at once: the model loads in a worker thread
            for actor in self.actors.values():
                self._start(actor)
            if self._pin_writes:
                nursery.start_soon(serve_pin_changes, self._pin_guards)
            logger.info("supervising %d servers (%d disabled)", len(self.actors), len(self.disabled))
            task_status.started()
            # The nursery must stay open even with no actor left: a reload may start new ones.
            await trio.sleep_forever()

    async def reload(self, new: Settings) -> list[str]:
        """Apply a new configuration to the running servers; return one line per change made.

        Must run while ``run`` is running (it starts actors in its nursery).
        """
        async with self._reload_lock:
            return await self._reload(new)

    async def _reload(self, new: Settings) -> list[str]:
        changes: list[str] = []
        if new.supervisor != self.settings.supervisor:
            changes.append("[supervisor] changed: those settings apply at the next start")
        old_servers = self.settings.mcp_servers
        withdrawn: list[str] = []
        restarted: list[str] = []
        for name in self.actors:
            server = new.mcp_servers.get(name)
            if server is None or not server.enabled:
                withdrawn.append(name)
                verb = "removed" if server is None else "disabled"
                self._stopping[name] = (
                    f"server {name!r} is being {verb} by a configuration reload; its tools are being withdrawn"
                )
                changes.append(f"{name}: {verb}; its tools are withdrawn")
            elif server != old_servers[name] or self.actors[name].status.state == "failed":
                restarted.append(name)
                why = "settings changed" if server != old_servers[name] else "it had failed"
                if server.target != old_servers[name].target:
                    self.cache.evict(name, "config")
                self._stopping[name] = f"server {name!r} is restarting (configuration reload); try again shortly"
                changes.append(f"{name}: restarted ({why})")
        started = [name for name, server in new.mcp_servers.items() if server.enabled and name not in self.actors]
        changes.extend(f"{name}: started" for name in started)
        try:
            async with trio.open_nursery() as nursery:
                for name, message in self._stopping.items():
                    # Every request routed to it from now on fails at once, saying why (not "unknown tool").
                    self.actors[name].stopping_reason = message
                    nursery.start_soon(self._stop, name)
        finally:
            self._stopping.clear()
        # No await from here to the starts: readers see the old configuration or the new one.
        for name in withdrawn:
            del self.actors[name]
            self.registry.withdraw(name)
        for name in restarted + started:
            self.actors[name] = self._new_actor(new.mcp_servers[name])
        self.disabled = {n: ServerStatus(n, state="disabled") for n, s in new.mcp_servers.items() if not s.enabled}
        self.settings = new
        changes.extend(self._edit_views(new))
        for name in restarted + started:
            self._start(self.actors[name])
        return changes

    def _edit_views(self, new: Settings) -> list[str]:
        """Apply the new ``[views.*]`` tables to the running views (synchronous: hosts see old or new rules)."""
        changes: list[str] = []
        for name, view in self.views.items():
            if not name:
                continue
            table = new.views.get(name)
            if table is None:
                # Its hosts stay connected until the next start, and from now on see nothing.
                if view.update(ViewRules(name, servers=frozenset())):
                    changes.append(f"view {name}: removed; it shows nothing until the next start")
            elif view.update(ViewRules.of(name, table, new.mcp_servers)):
                changes.append(f"view {name}: changed; its hosts are told")
        changes.extend(
            f"view {name}: added; served from the next start" for name in new.views if name not in self.views
        )
        if changes:
            self.catalog_changed.notify()
        return changes

    def _start(self, actor: ServerActor) -> None:
        """Schedule ``actor`` in the Supervisor's nursery; ``_stop`` can stop it from now on, even before it ran."""
        assert self._nursery is not None, "actors start inside Supervisor.run"
        running = _RunningActor(actor)
        self._running[actor.name] = running
        self._nursery.start_soon(running.run)

    async def _stop(self, name: str) -> None:
        """Cancel one actor and wait until its child is gone (bounded by the transport's cleanup).

        The actor stays in ``actors`` (shown as ``stopping``) until the caller replaces or drops it.
        """
        running = self._running[name]
        running.scope.cancel(f"{name} is being stopped by a configuration reload")
        await running.done.wait()
        del self._running[name]

    async def wait_first_attempts(self) -> None:
        """Return once every enabled server has finished its first attempt, successful or not."""
        for actor in list(self.actors.values()):  # a reload may change the dict while we wait
            await actor.wait_first_attempt()

    @property
    def startup_bound_sec(self) -> float:
        """The longest any server may take for its first attempt."""
        return max((actor.settings.startup_timeout_sec for actor in self.actors.values()), default=0.0)

    def pending_first_attempts(self) -> list[str]:
        """Enabled servers that have not finished their first attempt yet (readiness)."""
        return [name for name, actor in self.actors.items() if not actor.first_attempt_done]

    def route(self, public_name: str, view: CatalogView | None = None) -> tuple[RegisteredTool, ServerActor] | None:
        """Find the tool (in ``view``, else anywhere) and the actor that serves it, or None for an unknown name.

        A tool of a server that a reload is stopping is still listed and routes to
        that actor, which fails every request at once with "server 'x' is restarting".
        """
        tool = (view or self.views[""]).lookup(public_name)
        if tool is None or (actor := self.actors.get(tool.owner)) is None:
            return None
        return tool, actor

    def route_prompt(
        self, public_name: str, view: CatalogView | None = None
    ) -> tuple[RegisteredPrompt, ServerActor] | None:
        """Find the prompt (in ``view``, else anywhere) and the actor that serves it, or None for an unknown name."""
        prompt = (view or self.views[""]).lookup_prompt(public_name)
        if prompt is None or (actor := self.actors.get(prompt.owner)) is None:
            return None
        return prompt, actor

    def search_status(self) -> str:
        """The search views' index: semantic and fused, loading, or lexical only and why (``/status``, ``status``)."""
        return self.semantic.describe()

    def statuses(self) -> list[ServerStatus]:
        """Every configured server's status, in configuration order (``stopping`` during a reload's stop)."""
        statuses: list[ServerStatus] = []
        for name in self.settings.mcp_servers:
            if name not in self.actors:
                statuses.append(self.disabled[name])
            elif name in self._stopping:
                statuses.append(dataclasses.replace(self.actors[name].status, state="stopping"))
            else:
                statuses.append(self.actors[name].status)
        return statuses


class _AboutServers(Mapping[str, str]):
    """What each server says it does, as its current generation reported it on connecting (live, read-only).

    The semantic engine reads it when it makes a view's texts (``SemanticEngine.about``): a server's line is
    known before its first sync swaps its tools in, so their texts carry it from the start.
    """

    def __init__(self, actors: Mapping[str, ServerActor]) -> None:
        self._actors = actors

    def __getitem__(self, name: str) -> str:
        about = self._actors[name].status.about
        if not about:
            raise KeyError(name)
        return about

    def __iter__(self) -> Iterator[str]:
        return (name for name, actor in self._actors.items() if actor.status.about)

    def __len__(self) -> int:
        return sum(1 for actor in self._actors.values() if actor.status.about)
