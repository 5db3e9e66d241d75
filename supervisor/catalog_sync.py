"""The mailbox worker of one ServerActor: the only code that syncs or withdraws its entries (I1-I3).

Messages queued while the worker runs coalesce into one pending action
(``catalog.mailbox.Pending``: ``refresh`` absorbs ``use``; one withdrawal absorbs
another), and a ``list_changed`` re-sync is debounced (quiet window, bounded
maximum wait), so at most one sync runs per server and a burst of notices
costs a handful of fetches (I1).

A sync is fetch-then-swap over the kinds it was asked for (tools, prompts,
resources, templates). The fetch (all pages) never touches the Registry; a
failed fetch leaves the previous generation registered (I2), kind by kind: a
failed or late listing of an optional kind (prompts, resources, templates; the
server answered, but not usably) keeps that kind's previous entries while the
others swap, and ``ServerStatus.failed_kinds`` names it; a failed tools listing,
or a lost connection, fails the whole sync. Tools and prompts
go through the catalog cache's race guard (I7); resource lists always bypass
it (I9). Between the fetch and the swap, the server's ``PinGuard`` (if pinning
is on) judges the tools and prompts and takes out what it withholds (I17); a
pin store it cannot use fails the sync. The swap is one synchronous
``Registry.swap_many`` call, so the host never sees a mixture (I3).

Producers never block: ``post`` uses ``send_nowait``, and when the bounded
mailbox is full the message is folded into an overflow ``Pending`` that the
worker merges on its next drain, so nothing is lost. Change notices arrive on
an upstream client's receive loop, and blocking there could deadlock against
the fetch the worker is waiting for.

Concurrency: ``serve`` runs as one task in the actor's nursery; every other
method is synchronous or runs inside it. The generation in use is read
through ``current_upstream`` at the start of each sync.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Concatenate, Final, ParamSpec, Protocol

import mcp_types as types
import trio
from mcp.client.caching import CacheMode

from supervisor.catalog.cache import PROMPTS_LIST, TOOLS_LIST, CatalogCache
from supervisor.catalog.mailbox import EVERY_KIND, Message, Pending, SyncOutcome, SyncReason
from supervisor.catalog.registry import (
    ALL_KINDS,
    Definition,
    DuplicateName,
    Kind,
    OwnedListing,
    Registry,
    public_name_of,
)
from supervisor.catalog.transforms import compile_transforms, transform_warnings
from supervisor.config.servers import ServerSettings
from supervisor.errors import UpstreamError, UpstreamProtocolError
from supervisor.ops.status import ServerStatus
from supervisor.pins.guard import PinGuard, PinsUnavailable
from supervisor.seams import ActorEvents, UpstreamSession
from supervisor.telemetry.work import note_listing, sync_span

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
MAILBOX_SIZE: Final = 16
CACHED_METHODS: Final[dict[Kind, str]] = {"tools": TOOLS_LIST, "prompts": PROMPTS_LIST}
"""Kinds whose listings a catalog lifetime may serve (I4); resource lists always bypass it (I9)."""


def _allowed(tools: Sequence[Definition], settings: ServerSettings) -> Sequence[Definition]:
    """The tools ``settings`` lets through; a handed-over listing stays handed over (``OwnedListing``)."""
    kept = [tool for tool in tools if settings.tool_allowed(getattr(tool, "name", ""))]
    return OwnedListing(kept) if isinstance(tools, OwnedListing) else kept


def _kept(tools: Sequence[Definition] | None, prompts: Sequence[Definition] | None) -> dict[Kind, Sequence[Definition]]:
    """The listings a ``PinGuard`` handed back, by kind (None: that kind was not judged)."""
    kept: dict[Kind, Sequence[Definition]] = {}
    if tools is not None:
        kept["tools"] = tools
    if prompts is not None:
        kept["prompts"] = prompts
    return kept


class StatusTransition(Protocol):
    """Applies one typed ``ServerStatus`` transition and publishes the result (``ServerActor._set_status``)."""

    def __call__(
        self, transition: Callable[Concatenate[ServerStatus, _P], None], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> None: ...


class CatalogSync:
    """One server's mailbox and its worker.

    Args:
        settings: The server's settings (name, allow-list, namespace, debounce, bounds).
        registry: Where the entries are swapped in and withdrawn.
        cache: The catalog cache, if reuse is on.
        current_upstream: The generation in use now (None between generations).
        transition: Applies one typed ``ServerStatus`` transition and publishes it (the actor's).
        log_fields: The structured fields of this server's log records.
        events: Observers of syncs and upstream listings.
        pins: Judges each tools and prompts listing before the swap (issue 27); None: pinning is off.
    """

    def __init__(
        self,
        settings: ServerSettings,
        registry: Registry,
        *,
        cache: CatalogCache | None,
        current_upstream: Callable[[], UpstreamSession | None],
        transition: StatusTransition,
        log_fields: Callable[[], dict[str, object]],
        events: ActorEvents | None,
        pins: PinGuard | None = None,
    ) -> None:
        self.settings = settings
        self._pins = pins
        self.name = settings.name
        self._registry = registry
        self._cache = cache
        self._current_upstream = current_upstream
        self._transition = transition
        self._fields = log_fields
        self._events = events
        self._mailbox_send, self._mailbox_recv = trio.open_memory_channel[Message](MAILBOX_SIZE)
        self._overflow: Pending | None = None
        self.syncs_running = 0
        """How many syncs are running right now (0 or 1; I1 tests watch it)."""
        self.fetches = 0
        """How many fetches the worker has started in total."""
        self._transforms = compile_transforms(settings.tools)
        self._transform_warnings: list[str] = []

    @property
    def _log_fields(self) -> dict[str, object]:
        return self._fields()

    def post(self, message: Message) -> None:
        """Queue ``message`` without waiting (safe from any task, including upstream callbacks)."""
        try:
            self._mailbox_send.send_nowait(message)
        except trio.BrokenResourceError:
            return  # the worker is gone (the actor was stopped): there is nothing left to sync
        except trio.WouldBlock:
            if self._overflow is None:
                self._overflow = Pending()
            self._overflow.add(message)

    async def serve(self) -> None:
        """Take messages off the mailbox, coalesced, one action at a time, until cancelled."""
        async with self._mailbox_recv:
            async for message in self._mailbox_recv:
                pending = Pending()
                pending.add(message)
                self._drain_into(pending)
                if pending.debounced:
                    await self._debounce(pending)
                await self._execute(pending)

    def _drain_into(self, pending: Pending) -> None:
        while True:
            try:
                pending.add(self._mailbox_recv.receive_nowait())
            except trio.WouldBlock:
                break
        if self._overflow is not None:
            overflow, self._overflow = self._overflow, None
            pending.merge(overflow)

    async def _debounce(self, pending: Pending) -> None:
        """Wait for a quiet window after the last notice, but no longer than the maximum wait."""
        debounce_sec = self.settings.list_changed_debounce_ms / 1000
        give_up_at = trio.current_time() + self.settings.list_changed_max_wait_ms / 1000
        while pending.debounced:
            quiet_until = min(trio.current_time() + debounce_sec, give_up_at)
            with trio.move_on_at(quiet_until):
                pending.add(await self._mailbox_recv.receive())
                self._drain_into(pending)
                continue
            return

    async def _execute(self, pending: Pending) -> None:
        if pending.withdraw is not None:
            if self._registry.withdraw(self.name):
                logger.info(
                    "server=%s tools withdrawn (%s)", self.name, pending.withdraw.reason, extra=self._log_fields
                )
            if self._pins is not None:
                self._pins.forget_listing()
            self._transition(ServerStatus.mark_withdrawn)
        outcome = SyncOutcome(ok=True)
        kinds = pending.kinds or EVERY_KIND
        if pending.mode is not None and pending.reason is not None:
            with sync_span(self.name, pending.reason, pending.mode) as span:
                outcome = await self._sync(pending.mode, pending.reason, kinds)
                span.finished(outcome.ok)
            if self._events is not None:
                self._events.sync_finished(self.name, pending.reason, outcome.ok)
        if pending.rejudge and not (pending.mode is not None and kinds & {"tools", "prompts"}):
            await self._rejudge()
        for reply in pending.replies:
            # A waiter that gave up (its generation ended) has closed its end: nothing to tell.
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
                reply.send_nowait(outcome)

    async def _sync(self, mode: CacheMode, reason: SyncReason, kinds: frozenset[Kind]) -> SyncOutcome:
        upstream = self._current_upstream()
        if upstream is None:
            return SyncOutcome(ok=False, error=f"server {self.name!r} is not connected")
        identity = upstream.identity
        identity_key = str(identity) if identity.name is not None else None
        if self._cache is not None:
            mode = self._cache.cache_mode_for(self.name, mode, identity_key)
        # A kind the server no longer offers is swapped to nothing, so its old entries go.
        listings: dict[Kind, Sequence[Definition]] = {kind: [] for kind in kinds - upstream.kinds}
        self.syncs_running += 1
        self.fetches += 1
        timeout = self.settings.startup_timeout_sec
        deadline = trio.current_time() + timeout
        failed: dict[str, str] = {}
        try:
            for kind in (k for k in ALL_KINDS if k in kinds and k in upstream.kinds):
                try:
                    with trio.fail_at(deadline):
                        listings[kind] = await self._fetch(upstream, kind, mode, identity_key)
                except (UpstreamProtocolError, trio.TooSlowError) as exc:
                    if kind == "tools":
                        raise
                    # An optional kind the host may never use must not take the tools down: it keeps
                    # its previous entries (I2 per kind) and the status names it.
                    failed[kind] = (
                        str(exc)
                        if isinstance(exc, UpstreamError)
                        else f"{kind} listing did not answer within {timeout:g}s (startup_timeout_sec)"
                    )
        except UpstreamError as exc:
            return self._sync_failed(reason, str(exc))
        except trio.TooSlowError:
            return self._sync_failed(reason, f"listing did not answer within {timeout:g}s (startup_timeout_sec)")
        finally:
            self.syncs_running -= 1
        if "tools" in listings:
            self._check_transforms(reason, listings["tools"])
            listings["tools"] = _allowed(listings["tools"], self.settings)
        if self._pins is not None and ("tools" in listings or "prompts" in listings):
            try:
                tools, prompts = await self._pins.screen(listings.get("tools"), listings.get("prompts"))
            except PinsUnavailable as exc:
                return self._sync_failed(reason, str(exc))
            listings.update(_kept(tools, prompts))
            self._transition(ServerStatus.record_pins, self._pins.summary())
        outcome = self._swap(reason, listings)
        self._transition(ServerStatus.record_kinds, fetched=listings.keys(), failed=failed)
        for failed_kind, error in failed.items():
            logger.warning(
                "server=%s sync=%s %s not listed, previous %s kept: %s",
                self.name, reason, failed_kind, failed_kind, error, extra=self._log_fields,
            )  # fmt: skip
            self._transition(ServerStatus.record_error, error)
        return outcome

    async def _fetch(
        self, upstream: UpstreamSession, kind: Kind, mode: CacheMode, identity_key: str | None
    ) -> list[Definition]:
        """Fetch one kind's listing; tools and prompts through the catalog cache's race guard (I7)."""
        method = CACHED_METHODS.get(kind)
        if method is None:
            return await upstream.list_all(kind, "bypass")
        if self._cache is not None:
            await self._cache.prepare_fetch(self.name, method, mode, identity_key)  # bounded (operation_timeout_ms)
        ticket = self._cache.begin_fetch(self.name, mode, method) if self._cache is not None else None
        served_from_cache = False
        try:
            listing = await upstream.list_all(kind, mode)
            if self._cache is not None and ticket is not None:
                self._cache.finish_fetch(ticket, identity_key)
                served_from_cache = self._cache.served_from_cache(ticket)
        finally:
            if self._events is not None and kind == "tools" and not served_from_cache:
                self._events.upstream_listed(self.name)
        note_listing(kind, mode, served_from_cache)
        return listing

    def _swap(self, reason: SyncReason, listings: Mapping[Kind, Sequence[Definition]]) -> SyncOutcome:
        """Swap the fetched generation in (synchronous: atomic for every reader)."""
        try:
            results = self._registry.swap_many(
                self.name, listings, namespace=self.settings.namespace, transforms=self._transforms
            )
        except DuplicateName as exc:
            return self._sync_failed(reason, f"{exc}; the listing was rejected")
        conflicts = [conflict for result in results.values() for conflict in result.conflicts]
        self._transition(
            ServerStatus.record_sync,
            at=trio.current_time(),
            reason=reason,
            counts={kind: self._registry.count(self.name, kind) for kind in ALL_KINDS},
            conflicts=[f"{c.name} (owned by {c.owner})" for c in conflicts],
        )
        if conflicts:
            for conflict in conflicts:
                logger.error(
                    "server=%s sync=%s conflict: %s; the server keeps its previous entries of that kind",
                    self.name, reason, conflict, extra=self._log_fields,
                )  # fmt: skip
            return SyncOutcome(ok=True, error="name conflict; the previous entries were kept")
        logger.debug(
            "server=%s sync=%s swapped %s", self.name, reason, {k: len(v) for k, v in listings.items()},
            extra=self._log_fields,
        )  # fmt: skip
        return SyncOutcome(ok=True)

    async def _rejudge(self) -> None:
        """Judge the last fetched tools and prompts against pins that changed, and swap (no fetch, I1)."""
        pins = self._pins
        if pins is None or pins.last_listings is None or self._current_upstream() is None:
            return
        fetched_tools, fetched_prompts = pins.last_listings
        try:
            tools, prompts = await pins.screen(fetched_tools, fetched_prompts)
        except PinsUnavailable as exc:
            self._sync_failed("pins_changed", str(exc))
            return
        listings = _kept(tools, prompts)
        self._transition(ServerStatus.record_pins, pins.summary())
        self._swap("pins_changed", listings)

    def withheld_reason(self, kind: str, public_name: str) -> str | None:
        """Why the tool or prompt listed as ``public_name`` is withheld by pinning; None if it is not."""
        verdict = self._pins.judgement if self._pins is not None else None
        if verdict is None:
            return None
        for withheld_kind, raw in verdict.withheld:
            transform = self._transforms.get(raw) if withheld_kind == "tool" else None
            if withheld_kind == kind and public_name == public_name_of(
                self.name, raw, namespace=self.settings.namespace, transform=transform, rule=self._registry.rule
            ):
                return self._pins.withheld_reason(withheld_kind, raw) if self._pins is not None else None
        return None

    def _check_transforms(self, reason: SyncReason, tools: Sequence[Definition]) -> None:
        """Warn (log and status) about transforms naming a tool or an argument this listing lacks.

        Not an error: catalogs change, and a transform may be written ahead of
        the tool it is for. The warning is logged when it changes, not per sync.
        """
        if not self._transforms:
            return
        listed = {tool.name: tool for tool in tools if isinstance(tool, types.Tool)}
        warnings = transform_warnings(self._transforms, listed)
        if warnings != self._transform_warnings:
            self._transform_warnings = warnings
            for warning in warnings:
                logger.warning("server=%s sync=%s transform unmatched: %s", self.name, reason, warning,
                               extra=self._log_fields)  # fmt: skip
        self._transition(ServerStatus.record_transform_warnings, warnings)

    def _sync_failed(self, reason: SyncReason, error: str) -> SyncOutcome:
        logger.warning(
            "server=%s sync=%s failed, previous tools kept: %s", self.name, reason, error, extra=self._log_fields
        )
        self._transition(ServerStatus.record_error, error)
        return SyncOutcome(ok=False, error=error)
