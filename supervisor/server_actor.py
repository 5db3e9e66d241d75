"""ServerActor: one supervised upstream server (DESIGN §2, invariants I1, I2, I3, I10, I12, I13).

The actor runs three tasks in the nursery it owns:

* the **generation loop** connects (generation N = one transport + one
  ``mcp.Client``), asks the mailbox for the generation's first sync and waits
  for its outcome, serves until the transport is lost, then backs off
  (``Backoff``) and starts generation N+1. ``startup_timeout_sec`` bounds
  connect + first sync. After ``max_attempts`` consecutive failures it gives
  up: it asks the mailbox to withdraw the server's tools and parks in
  ``failed`` until the actor is restarted (config reload).
* the **mailbox worker** (``catalog_sync.CatalogSync``) is the only code
  that syncs or withdraws this server's entries: coalesced, debounced, one
  action at a time (I1), fetch-then-swap (I2, I3).
* the **standing-state worker** (``standing_state.StandingState``) applies
  what every generation must carry (the log level hosts asked for, the
  resource URIs hosts subscribed to) to the current generation, after its
  first sync and whenever it changes, and passes a host's
  ``roots/list_changed`` on (coalesced, never blocking the host).

Requests for a host (``call_tool``, ``get_prompt``, ``read_resource``,
``complete``) are ``host_requests.HostRequests``, the actor's base class.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, Final, ParamSpec, TypeVar, assert_never

import mcp_types as types
import trio
from mcp import MCPError
from mcp.client.caching import CacheMode
from mcp_types import INVALID_PARAMS

from supervisor.auth.oauth import wait_for_new_tokens
from supervisor.catalog.cache import TOOLS_LIST, CatalogCache
from supervisor.catalog.mailbox import (
    EVERY_KIND,
    KINDS_OF_NOTICE,
    Message,
    Rejudge,
    SyncOutcome,
    SyncReason,
    SyncRequest,
    Withdraw,
)
from supervisor.catalog.registry import Kind, Registry
from supervisor.catalog_sync import CACHED_METHODS, CatalogSync
from supervisor.config.servers import DEFAULT_LIST_CHANGED_DEBOUNCE_MS, DEFAULT_LIST_CHANGED_MAX_WAIT_MS, ServerSettings
from supervisor.errors import UpstreamError, UpstreamNeedsLogin, first_leaf
from supervisor.host_requests import HostRequests
from supervisor.ops.status import ServerStatus
from supervisor.pins.guard import PinGuard
from supervisor.seams import ActorEvents, Connector, UpstreamSession
from supervisor.standing_state import StandingState
from supervisor.telemetry.work import Reconnects
from supervisor.upstream.backoff import Backoff

logger = logging.getLogger(__name__)

T = TypeVar("T")
_P = ParamSpec("_P")
LIST_CHANGED_DEBOUNCE_SEC: Final = DEFAULT_LIST_CHANGED_DEBOUNCE_MS / 1000
"""The default quiet window (``list_changed_debounce_ms``) after the last ``list_changed``."""
LIST_CHANGED_MAX_WAIT_SEC: Final = DEFAULT_LIST_CHANGED_MAX_WAIT_MS / 1000
"""The default bound (``list_changed_max_wait_ms``) on how long a storm can postpone its re-sync."""


@dataclass(frozen=True, slots=True)
class _GenerationEnd:
    error: str
    ready_at: float | None
    needs_login: UpstreamNeedsLogin | None = None  # only a person can fix it: park, no backoff loop


# -- the actor -------------------------------------------------------------------------


class ServerActor(HostRequests):
    """Supervises one configured server. Start with ``await nursery.start(actor.run)``.

    Requests for a host are its base's (``host_requests.HostRequests``).
    """

    def __init__(
        self,
        settings: ServerSettings,
        registry: Registry,
        *,
        connector: Connector,
        cache: CatalogCache | None = None,
        rng: random.Random | None = None,
        on_status: Callable[[ServerStatus], None] | None = None,
        events: ActorEvents | None = None,
        startup_slots: trio.CapacityLimiter | None = None,
        pins: PinGuard | None = None,
    ) -> None:
        self.settings = settings
        self.pins = pins
        """This server's pinning (issue 27), None when ``pin = "off"``."""
        self._startup_slots = startup_slots
        self._holding_startup_slot = False
        self._events = events
        self.name = settings.name
        self._registry = registry
        self._cache = cache
        self._connect = connector
        self._ever_ready = False
        self._backoff = Backoff(settings.reconnect, rng if rng is not None else random.Random())
        self._on_status = on_status
        self.status = ServerStatus(settings.name, max_attempts=settings.reconnect.max_attempts)
        self._upstream: UpstreamSession | None = None
        self._reconnects = Reconnects()
        self._first_attempt_done = trio.Event()
        self._standing = StandingState(
            settings.name,
            settings.tool_timeout_sec,
            current_upstream=lambda: self._upstream,
            ready=lambda: self.status.state == "ready",
        )
        self.stopping_reason: str | None = None
        """Set by the Supervisor while a reload stops this actor: every request fails at once with it."""
        self._catalog_sync = CatalogSync(
            settings,
            registry,
            cache=cache,
            current_upstream=lambda: self._upstream,
            transition=self._set_status,
            log_fields=lambda: self._log_fields,
            events=events,
            pins=pins,
        )

    # -- public surface ----------------------------------------------------------------

    def withheld_reason(self, kind: str, public_name: str) -> str | None:
        """Why the ``kind`` (``tool``, ``prompt``) ``public_name`` is withheld by pinning (I17), None if it is not."""
        return self._catalog_sync.withheld_reason(kind, public_name)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve this server until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._catalog_sync.serve)
            nursery.start_soon(self._standing.serve)
            task_status.started()
            try:
                await self._serve_generations()
            finally:
                self._reconnects.end(None, "the server was stopped")

    def request_sync(self, mode: CacheMode, reason: SyncReason, kinds: frozenset[Kind] = EVERY_KIND) -> None:
        """Enqueue a sync without waiting (safe from any task, including upstream callbacks)."""
        self._post(SyncRequest(mode, reason, kinds=kinds))

    def request_rejudge(self) -> None:
        """The pins changed: judge the last listing again through the mailbox, without a fetch (issue 27)."""
        self._post(Rejudge())

    def set_log_level(self, level: types.LoggingLevel | None) -> None:
        """Ask every generation, from now on, for log messages at ``level`` and above (None: no change)."""
        self._standing.set_log_level(level)

    def set_subscriptions(self, uris: frozenset[str]) -> None:
        """Keep every generation, from now on, subscribed to exactly ``uris``."""
        self._standing.set_subscriptions(uris)

    def notify_roots_changed(self) -> None:
        """A host's roots changed: tell the current generation (once, however many notices came meanwhile)."""
        self._standing.notify_roots_changed()

    async def apply_subscriptions(self) -> None:
        """Bring the current generation's subscriptions in line now, and return once the server has them.

        A host's ``resources/subscribe`` waits for this, so an update sent right
        after its answer is not missed. Bounded by ``tool_timeout_sec``.

        Raises:
            UpstreamError: The server refused or did not answer in time.
        """
        upstream = self._upstream
        if upstream is None or self.status.state != "ready":
            return  # the next generation gets them after its first sync
        subscriptions = self._standing.subscriptions
        await self._forward("resource subscriptions", lambda up: up.set_subscriptions(subscriptions))

    @property
    def syncs_running(self) -> int:
        """How many syncs are running right now (0 or 1; I1 tests watch it)."""
        return self._catalog_sync.syncs_running

    @property
    def fetches(self) -> int:
        """How many fetches the mailbox worker has started in total."""
        return self._catalog_sync.fetches

    @property
    def first_attempt_done(self) -> bool:
        """Whether the first generation has connected and synced, or failed to."""
        return self._first_attempt_done.is_set()

    async def wait_first_attempt(self) -> None:
        """Return once the first generation has connected and synced, or failed to."""
        await self._first_attempt_done.wait()

    # -- generation loop ---------------------------------------------------------------

    async def _serve_generations(self) -> None:
        failures = 0
        while True:
            self.status.generation += 1
            end = await self._run_generation(first=not self._ever_ready)
            self._reconnects.end(None, end.error)  # a reconnect that became ready has ended already
            if end.needs_login is not None:
                await self._wait_for_login(end.needs_login)
                failures = 0
                continue
            self._first_attempt_done.set()
            now = trio.current_time()
            if end.ready_at is not None and now - end.ready_at >= self._backoff.stability_window_sec:
                failures = 0  # it stayed up long enough: this is a new outage
            failures += 1
            self._set_status(ServerStatus.mark_reconnecting, attempt=failures, error=end.error)
            logger.warning(
                "server=%s generation=%d ended: %s (failure %d/%d)",
                self.name, self.status.generation, end.error, failures, self.settings.reconnect.max_attempts,
                extra=self._log_fields,
            )  # fmt: skip
            gave_up = failures >= self.settings.reconnect.max_attempts
            if self._events is not None:
                self._events.generation_ended(self.name, gave_up=gave_up)
            if gave_up:
                await self._give_up(end.error)
                return
            delay = self._backoff.delay_sec(failures)
            self._reconnects.start(self.name, self.status.generation + 1, failures, delay)
            await trio.sleep(delay)

    async def _run_generation(self, *, first: bool) -> _GenerationEnd:
        # Waiting for a start-up slot (spawn_concurrency) does not count against startup_timeout_sec.
        if self._startup_slots is not None:
            await self._startup_slots.acquire()
            self._holding_startup_slot = True
        try:
            return await self._connect_and_serve(first=first)
        finally:
            self._release_startup_slot()

    def _release_startup_slot(self) -> None:
        if self._startup_slots is not None and self._holding_startup_slot:
            self._holding_startup_slot = False
            self._startup_slots.release()

    async def _connect_and_serve(self, *, first: bool) -> _GenerationEnd:
        timeout = self.settings.startup_timeout_sec
        ready_at: float | None = None
        with trio.CancelScope(deadline=trio.current_time() + timeout) as startup:
            try:
                async with self._connect(self.settings, on_list_changed=self._on_list_changed) as upstream:
                    self._upstream = upstream
                    self._set_status(
                        ServerStatus.mark_connected,
                        at=trio.current_time(),
                        change_notices=upstream.change_notices,
                        about=upstream.about,
                    )
                    try:
                        # Without change notices a kept catalog may be stale: re-list on reconnect too.
                        reuse = not first and upstream.change_notices
                        mode: CacheMode = "use" if reuse else "refresh"
                        if first and self._cache is not None:
                            mode = self._cache.first_sync_mode  # the fleet store's cold start reuses (I14)
                        outcome = await self._sync_via_mailbox(SyncRequest(mode, "initial" if first else "reconnect"))
                        if not outcome.ok:
                            return _GenerationEnd(outcome.error or "first sync failed", None)
                        startup.deadline = math.inf
                        ready_at = trio.current_time()
                        self._ever_ready = True
                        self._release_startup_slot()
                        self._set_status(
                            ServerStatus.mark_ready,
                            at=ready_at,
                            protocol_version=upstream.protocol_version,
                            identity=str(upstream.identity),
                        )
                        self._first_attempt_done.set()
                        self._reconnects.end(upstream.protocol_version, None)
                        self._standing.generation_ready()
                        logger.info(
                            "server=%s generation=%d ready: %d tools (%s, %s)",
                            self.name, self.status.generation, self.status.tool_count,
                            upstream.identity, upstream.protocol_version, extra=self._log_fields,
                        )  # fmt: skip
                        await upstream.health.lost.wait()
                        if (needs_login := upstream.health.needs_login) is not None:
                            return _GenerationEnd(str(needs_login), ready_at, needs_login=needs_login)
                        return _GenerationEnd(f"connection lost: {upstream.health.reason}", ready_at)
                    finally:
                        self._upstream = None
            except UpstreamNeedsLogin as exc:
                return _GenerationEnd(str(exc), ready_at, needs_login=exc)
            except UpstreamError as exc:
                return _GenerationEnd(str(exc), ready_at)
            except Exception as exc:
                if isinstance(leaf := first_leaf(exc), UpstreamNeedsLogin):  # raised on the way out of a generation
                    return _GenerationEnd(str(leaf), ready_at, needs_login=leaf)
                # The isolation boundary (I12): a surprise from one server's SDK session
                # ends that generation only, never the other servers or the Front.
                logger.exception(
                    "server=%s generation=%d failed unexpectedly", self.name, self.status.generation,
                    extra=self._log_fields,
                )  # fmt: skip
                return _GenerationEnd(f"unexpected error: {exc!r}", ready_at)
        return _GenerationEnd(
            f"server {self.name!r} did not connect and list its tools within {timeout:g}s (startup_timeout_sec)",
            ready_at,
        )

    async def _wait_for_login(self, needs_login: UpstreamNeedsLogin) -> None:
        """Withdraw the tools, park in ``needs_login`` until the token file changes (issue 12; no backoff loop)."""
        await self._sync_via_mailbox(Withdraw("needs login"))
        self._set_status(ServerStatus.mark_needs_login, error=str(needs_login))
        self._first_attempt_done.set()
        logger.warning("server=%s %s", self.name, needs_login, extra=self._log_fields)
        await wait_for_new_tokens(needs_login)

    async def _give_up(self, error: str) -> None:
        await self._sync_via_mailbox(Withdraw(f"gave up: {error}"))
        self._set_status(ServerStatus.mark_failed)
        logger.error(
            "server=%s gave up after %d consecutive failures; its tools are withdrawn. Last error: %s. "
            "Fix the server or its settings and reload the configuration.",
            self.name, self.status.attempt, error, extra=self._log_fields,
        )  # fmt: skip
        self._first_attempt_done.set()

    async def _sync_via_mailbox(self, message: Message) -> SyncOutcome:
        """Post ``message`` with a reply channel and wait for the worker's answer."""
        reply_send, reply_recv = trio.open_memory_channel[SyncOutcome](1)
        match message:
            case SyncRequest():
                self._post(SyncRequest(message.mode, message.reason, reply_send, message.kinds))
            case Withdraw():
                self._post(Withdraw(message.reason, reply_send))
            case Rejudge():
                raise AssertionError("a rejudge is posted, never waited for (request_rejudge)")
            case _:
                assert_never(message)
        async with reply_recv:
            return await reply_recv.receive()

    def _post(self, message: Message) -> None:
        self._catalog_sync.post(message)

    def _on_list_changed(self, kind: Kind) -> None:
        logger.debug("server=%s announced %s/list_changed", self.name, kind, extra=self._log_fields)
        kinds = KINDS_OF_NOTICE[kind]
        methods = tuple(CACHED_METHODS[k] for k in kinds if k in CACHED_METHODS)
        if self._cache is not None and methods:
            self._cache.evict(self.name, "list_changed", methods)  # before the re-sync is even queued (I7)
        self.request_sync("refresh", "list_changed", kinds)

    def heal_unknown_tool(self, raw_name: str, error: MCPError) -> None:
        """I8: a -32602 may mean our catalog is stale. Evict and re-list; never re-send the call (others: no-op)."""
        if error.code != INVALID_PARAMS:
            return
        logger.info(
            "server=%s tool=%s answered -32602 (%s): re-listing its tools", self.name, raw_name, error.error.message,
            extra={**self._log_fields, "tool": raw_name},
        )  # fmt: skip
        if self._cache is not None:
            self._cache.evict(self.name, "unknown_tool", (TOOLS_LIST,))
        self.request_sync("refresh", "unknown_tool", frozenset({"tools"}))

    # -- status --------------------------------------------------------------------------

    def _set_status(
        self, transition: Callable[Concatenate[ServerStatus, _P], None], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> None:
        """Apply one typed ``ServerStatus`` transition, then tell ``on_status`` (after every update)."""
        transition(self.status, *args, **kwargs)
        if self._on_status is not None:
            self._on_status(self.status)

    @property
    def _log_fields(self) -> dict[str, object]:
        """The structured fields of this server's log records (``extra=``), for JSON logs."""
        return {"server": self.name, "generation": self.status.generation}
