"""Spans of the sidecar's own work: a catalog sync, a reconnect, a fleet-store call (issue 28).

The call paths' spans are in ``telemetry.spans``; these follow the same rules:
nothing is made while ``TELEMETRY.on`` is off, and no URL, key, value or
secret is recorded.

Concurrency: a sync's span is current in its mailbox worker's task
(``note_listing`` finds it through a ``ContextVar``); a server's ``Reconnects``
is touched only by its actor's generation loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

import trio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from supervisor._version import __version__
from supervisor.telemetry import conventions as C
from supervisor.telemetry.spans import OWN_TRACER_NAME, TELEMETRY, ambient

_tracer = trace.get_tracer(OWN_TRACER_NAME, __version__)
_NO_ERROR_STATUS: Final = Status(StatusCode.ERROR)
"""An error status without a description (the texts would carry content)."""


class SyncSpan:
    """What a catalog sync's span records (a no-op while telemetry is off)."""

    __slots__ = ("_hits", "_misses", "span")

    def __init__(self, span: Span | None) -> None:
        self.span = span
        self._hits: list[str] = []
        self._misses: list[str] = []

    def listed(self, kind: str, mode: str, from_cache: bool) -> None:
        if self.span is None:
            return
        (self._hits if from_cache else self._misses).append(kind)
        self.span.set_attributes({
            "mcp_supervisor.sync.cache_mode": mode,
            "mcp_supervisor.sync.cache_hits": tuple(self._hits),
            "mcp_supervisor.sync.cache_misses": tuple(self._misses),
        })  # fmt: skip
        if kind == "tools":
            self.span.set_attribute("mcp_supervisor.sync.cache_hit", from_cache)

    def finished(self, ok: bool) -> None:
        if self.span is not None and not ok:
            self.span.set_attribute(C.ERROR_TYPE, "sync_failed")
            self.span.set_status(_NO_ERROR_STATUS)


_NO_SYNC: Final = SyncSpan(None)
_current_sync: ContextVar[SyncSpan | None] = ContextVar("mcp_supervisor_sync", default=None)


@contextmanager
def sync_span(server: str, reason: str, mode: str, generation: int | None = None) -> Iterator[SyncSpan]:
    """A span over one catalog sync of ``server`` (``catalog_sync``); ``note_listing`` fills in hit or miss."""
    if not TELEMETRY.on:
        yield _NO_SYNC
        return
    attributes: dict[str, Any] = {
        C.SERVER: server,
        "mcp_supervisor.sync.reason": reason,
        "mcp_supervisor.sync.cache_mode": mode,
    }
    if generation is not None:
        attributes[C.GENERATION] = generation
    with _tracer.start_as_current_span(
        "mcp_supervisor.sync", attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        handle = SyncSpan(span)
        marks = (_current_sync.set(handle), ambient.set({C.SERVER: server}))
        try:
            yield handle
        finally:
            ambient.reset(marks[1])
            _current_sync.reset(marks[0])


def note_listing(kind: str, mode: str, from_cache: bool) -> None:
    """One kind's listing of the running sync was fetched in ``mode``, from the cache or not."""
    if TELEMETRY.on and (handle := _current_sync.get()) is not None:
        handle.listed(kind, mode, from_cache)


class Reconnect:
    """The span of one reconnect: from the decision to retry until the next generation is ready or fails."""

    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def ready(self, protocol_version: str | None) -> None:
        if protocol_version:
            self.span.set_attribute(C.PROTOCOL_VERSION, protocol_version)
        self.span.end()

    def failed(self, error: str) -> None:
        self.span.set_attribute(C.ERROR_TYPE, "reconnect_failed")
        self.span.set_status(Status(StatusCode.ERROR, error))  # secrets are already scrubbed from these texts
        self.span.end()


class Reconnects:
    """One server's reconnect span under way, if any: started when a retry is decided, ended by the next generation.

    Owned by its ServerActor; only its generation loop calls it (no locks).
    """

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: Reconnect | None = None

    def start(self, server: str, generation: int, attempt: int, delay_sec: float) -> None:
        """A retry was decided (nothing while telemetry is off)."""
        self._open = start_reconnect(server, generation, attempt, delay_sec)

    def end(self, protocol_version: str | None, error: str | None) -> None:
        """End the open span, if any: the generation is ready (no ``error``), or it failed."""
        reconnect, self._open = self._open, None
        if reconnect is None:
            return
        if error is None:
            reconnect.ready(protocol_version)
        else:
            reconnect.failed(error)


def start_reconnect(server: str, generation: int, attempt: int, delay_sec: float) -> Reconnect | None:
    """A reconnect's span (None while telemetry is off); ended by ``Reconnect.ready``/``failed``."""
    if not TELEMETRY.on:
        return None
    span = _tracer.start_span(
        "mcp_supervisor.reconnect",
        context=otel_context.Context(),  # a trace of its own, whatever the actor's task carries
        attributes={
            C.SERVER: server,
            C.GENERATION: generation,
            "mcp_supervisor.reconnect.attempt": attempt,
            "mcp_supervisor.reconnect.delay_sec": delay_sec,
        },
    )
    return Reconnect(span)


@contextmanager
def store_span(operation: str) -> Iterator[None]:
    """A CLIENT span over one fleet-store (Redis) call; never the URL, keys or values."""
    if not TELEMETRY.on:
        yield
        return
    with _tracer.start_as_current_span(
        f"mcp_supervisor.catalog_store {operation}",
        kind=SpanKind.CLIENT,
        attributes={"db.system.name": "redis", "db.operation.name": operation},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except BaseException as exc:
            if not isinstance(exc, trio.Cancelled):
                timed_out = isinstance(exc, trio.TooSlowError | TimeoutError)
                span.set_attribute(C.ERROR_TYPE, "timeout" if timed_out else type(exc).__qualname__)
                span.set_status(_NO_ERROR_STATUS)
            raise
