"""Host calls: which host request an upstream's traffic belongs to (DESIGN I13).

A ``HostCall`` is one host request the Front is serving by forwarding it to an
upstream (``tools/call``, ``prompts/get``, ``resources/read``,
``completion/complete``). While it runs, the Front marks it as the task's
``current_call`` and ``CallTracker.serving`` lists it as in flight on that server.

Upstream traffic that belongs to a call is attributed in one of three ways,
most exact first:

1. **Its own callback.** Progress notices reach the per-call progress callback
   (the SDK correlates them by the progress token it minted for that request),
   and 2026-era input rounds are driven in the calling task.
2. **Context.** Over streamable HTTP a server→client request or notice sent on
   the call's own response stream runs in the calling task's ``contextvars``
   (see ``upstream.http``), so ``current_call`` names the call.
3. **The only call in flight.** Over stdio nothing on the wire relates a
   server→client request to a call: it is attributed only when exactly one
   call is in flight on that server. Otherwise it is refused, never guessed.

Progress and request-scoped log notices of a call travel through its
``CallNotices``: the upstream's transport tap puts them in, in wire order and
without awaiting, and the call forwards them to its host before it returns its
result. (The SDK hands notices to callbacks in separately spawned tasks, which
may run after the result is back, when the host would drop them.)

``HostSide`` is what an upstream generation needs from the host side (the
Front's ``Relay`` in ``run``; nothing in the one-shot CLI commands).

Concurrency: ``CallTracker`` is mutated only in synchronous code (entering and
leaving ``serving``), so readers never see a half-registered call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

import mcp_types as types
import trio
from mcp.server import ServerRequestContext
from mcp_types import LOG_LEVEL_META_KEY, LoggingLevel
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

logger = logging.getLogger(__name__)

current_call: ContextVar[HostCall | None] = ContextVar("mcp_supervisor_host_call", default=None)
"""The host call the current task serves (set by ``CallTracker.serving``)."""

LOG_LEVELS: tuple[LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""Severity-ascending (RFC 5424), as the spec orders them."""


def level_admits(wanted: LoggingLevel | None, level: LoggingLevel) -> bool:
    """Whether a message at ``level`` may go to someone who asked for ``wanted`` (None: nothing asked)."""
    return wanted is None or LOG_LEVELS.index(level) >= LOG_LEVELS.index(wanted)


class InputRounds(Protocol):
    """Turns an upstream's server→client request into a 2026-era host's input round
    (``host.pipeline.exchanges.Exchange``)."""

    async def ask(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData: ...


@dataclass(eq=False)
class HostCall:
    """One host request being served by an upstream.

    Attributes:
        ctx: The host request's context (its session reaches the host).
        server: The upstream it is routed to.
        connection_log_level: For a handshake-era host, the level it set with
            ``logging/setLevel`` (None: it never did).
        exchange: For a 2026-era host whose upstream is handshake-era, the
            exchange that turns the upstream's requests into input rounds.
    """

    ctx: ServerRequestContext[Any]
    server: str
    connection_log_level: LoggingLevel | None = None
    exchange: InputRounds | None = None
    notices: CallNotices | None = field(default=None, repr=False)

    @property
    def modern_host(self) -> bool:
        """Whether the host speaks 2026-07-28 (no server→client requests; input rounds instead)."""
        return self.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def log_level(self) -> LoggingLevel | None:
        """The most verbose level this host wants log messages of this request at (None: none wanted)."""
        if self.modern_host:
            requested = (self.ctx.meta or {}).get(LOG_LEVEL_META_KEY)
            return requested if requested in LOG_LEVELS else None
        return self.connection_log_level or "debug"

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """What this host declared it can do (a 2026-era host per request, a handshake-era one at ``initialize``).

        A 2026-era upstream is told these, not the sidecar's own, on each request
        made for this call (issue 30), so it rejects a tool that needs what the
        host lacks (-32021) and never asks the host for what it cannot give.
        """
        declared = self.ctx.session.client_capabilities
        return {} if declared is None else declared.model_dump(by_alias=True, mode="json", exclude_none=True)

    @property
    def wants_progress(self) -> bool:
        """Whether the host sent a progress token (the SDK hands ``_meta`` over validated: snake_case keys)."""
        meta = self.ctx.meta or {}
        return meta.get("progress_token", meta.get("progressToken")) is not None

    async def report_progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Forward one progress notice to the host, against the host's own token."""
        await self.ctx.session.report_progress(progress, total, message)

    async def send_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """Forward one log message on this call's own request stream."""
        notification = types.LoggingMessageNotification(params=params)
        await self.ctx.session.send_notification(notification, related_request_id=self.ctx.request_id)

    def wants_log(self, level: LoggingLevel) -> bool:
        """Whether this host asked for messages of this request at ``level`` (request-scoped delivery)."""
        wanted = self.log_level
        return wanted is not None and level_admits(wanted, level)

    @property
    def input_responses(self) -> types.InputResponses | None:
        params = self.ctx.params or {}
        raw = params.get("inputResponses")
        if not raw:
            return None
        return types.InputResponseRequestParams.model_validate({"inputResponses": raw}).input_responses

    @property
    def request_state(self) -> str | None:
        state = (self.ctx.params or {}).get("requestState")
        return state if isinstance(state, str) else None


NOTICE_BUFFER = 256
"""Notices a call may have queued for its host; beyond that (a host that stopped reading) they are dropped."""
Notice = types.ProgressNotificationParams | types.LoggingMessageNotificationParams
"""What an upstream's transport tap puts in a call's ``CallNotices``."""


class CallNotices:
    """A call's progress and log notices, forwarded to its host in the order the upstream sent them.

    ``put`` never blocks (it runs in the upstream's transport reader). The
    first notice starts the call's forwarding task in ``nursery`` (the call's
    own, so a call that gets none, the usual case, spawns nothing); it forwards
    until ``close`` and then drains what is left, so the host has every notice
    before the call's result.
    """

    def __init__(self, call: HostCall, nursery: trio.Nursery) -> None:
        self._call = call
        self._nursery = nursery
        self._send: trio.MemorySendChannel[Notice] | None = None
        self._closed = False
        self.dropped = 0

    def put(self, notice: Notice) -> None:
        if self._send is None:
            if self._closed:
                self.dropped += 1
                return
            self._send, receive = trio.open_memory_channel[Notice](NOTICE_BUFFER)
            self._nursery.start_soon(self._run, receive)
        try:
            self._send.send_nowait(notice)
        except (trio.WouldBlock, trio.ClosedResourceError):
            self.dropped += 1

    def close(self) -> None:
        self._closed = True
        if self._send is not None:
            self._send.close()

    async def _run(self, receive: trio.MemoryReceiveChannel[Notice]) -> None:
        async with receive:
            async for notice in receive:
                await deliver(self._call, notice)


async def deliver(call: HostCall, notice: Notice) -> None:
    """Forward one notice of ``call`` to its host (a host that left drops it: it has nowhere to go)."""
    try:
        if isinstance(notice, types.ProgressNotificationParams):
            await call.report_progress(notice.progress, notice.total, notice.message)
        else:
            await call.send_log(notice)
    except Exception as exc:
        logger.debug("server=%s: notice for the host dropped: %r", call.server, exc)


class Adoptable(Protocol):
    """A call in flight that no task serves (a spliced one, ``calls.splice.SplicedCall``)."""

    def adopt(self) -> HostCall | None:
        """This call as a ``HostCall``, built the first time an upstream request needs its host; None: gone."""
        ...


class CallTracker:
    """Which host calls are in flight on which server: served by a task, or spliced (``host.stdio.reader``).

    Spliced calls are counted only towards servers that can send server→client
    requests (handshake-era ones): "exactly one call in flight" must count them,
    or a request would be guessed onto the one call that a task serves.
    """

    def __init__(self) -> None:
        self._in_flight: dict[str, set[HostCall]] = {}
        self._spliced: dict[str, set[Adoptable]] = {}

    @contextmanager
    def serving(self, call: HostCall) -> Iterator[None]:
        """Mark ``call`` as the current task's call and as in flight on its server."""
        token = current_call.set(call)
        calls = self._in_flight.setdefault(call.server, set())
        calls.add(call)
        try:
            yield
        finally:
            calls.discard(call)
            if not calls:
                self._in_flight.pop(call.server, None)
            current_call.reset(token)

    def spliced(self, server: str, call: Adoptable) -> None:
        """``call`` (spliced, served by no task) is in flight on ``server`` until ``unspliced``."""
        self._spliced.setdefault(server, set()).add(call)

    def unspliced(self, server: str, call: Adoptable) -> None:
        calls = self._spliced.get(server)
        if calls is not None:
            calls.discard(call)
            if not calls:
                del self._spliced[server]

    def attribute(self, server: str, *, adopt: bool = False) -> HostCall | None:
        """The one host call that upstream traffic of ``server`` belongs to, or None if that is not certain.

        ``adopt``: a spliced call may be that one call, built as a ``HostCall``
        now (a server→client request needs its host); otherwise (a notice) a
        spliced call takes none: it asked for no progress and no request-scoped logs.
        """
        call = current_call.get()
        if call is not None and call.server == server:
            return call
        calls = self._in_flight.get(server, ())
        spliced = self._spliced.get(server, ())
        if len(calls) + len(spliced) != 1:
            return None
        if calls:
            return next(iter(calls))
        return next(iter(spliced)).adopt() if adopt else None

    def in_flight(self, server: str) -> int:
        return len(self._in_flight.get(server, ())) + len(self._spliced.get(server, ()))


class HostSide(Protocol):
    """What an upstream generation needs from the host side (the Front's ``Relay``)."""

    async def ask_host(self, server: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """Answer a server→client request (sampling, elicitation, roots) raised by ``server``."""
        ...

    def attribute(self, server: str) -> HostCall | None:
        """The one host call traffic of ``server`` belongs to, or None if that is not certain."""
        ...

    async def deliver_log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        """Broadcast one connection-wide log message (handshake-era server) to the hosts that want it."""
        ...

    async def deliver_resource_updated(self, server: str, uri: str) -> None:
        """Tell the hosts subscribed to ``uri`` that it changed."""
        ...

    async def deliver_elicitation_complete(self, server: str, elicitation_id: str) -> None:
        """Tell the host that received URL elicitation ``elicitation_id`` that it completed."""
        ...


def named_for(server: str, log: types.LoggingMessageNotificationParams) -> types.LoggingMessageNotificationParams:
    """The host sees ``logger = <server>`` (``<server>.<logger>`` when the upstream named one)."""
    return log.model_copy(update={"logger": f"{server}.{log.logger}" if log.logger else server})


def no_host_error(method: str) -> types.ErrorData:
    """What a server→client request gets when there is no host to ask (the one-shot commands)."""
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"mcp-supervisor has no host to forward {method} to (one-shot command)",
    )
