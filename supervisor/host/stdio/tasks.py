"""A stdio host's fast-path ``tools/call``, answered off the host wire without the SDK's server (issue 29).

A call the wire splice does not carry but the fast path does (``host.pipeline.paths``:
a 2026-era host's plain call to a server over streamable HTTP, or to a stdio
server whose splice is not ready, or with a log level in its ``_meta``; a
handshake-era host's plain call to a 2026-era server over HTTP, or over stdio
with its splice not ready) took the SDK's stdio server to reach the fast path
or the SDK path: its dispatcher's task per request, its runner, its context,
its response channel, and for a handshake-era host the SDK's client and models
too. About 280 us of the sidecar's CPU per call of its 490 for a 2026-era host
(``python -m bench.profile_pair httpup``), 1,550 us for a handshake-era one
(``httpup_h2025``). ``StdioFastCalls.take`` runs it instead, off the line the
splice already parsed, when the splice's ``path_of`` says ``"fast"`` and all of
these hold:

* a 2026-era host's ``_meta`` is the envelope and at most a log level and trace
  context (as the HTTP front's own answer takes: ``host.http.posts``), and the SDK's
  request ladder accepts the envelope (``classify_inbound_request``, no headers
  on stdio); a handshake-era host's holds at most trace context (``path_of``),
  and the SDK has answered its ``initialize`` (its connection);
* not shutting down; no call of the host's with that id is running here.
  With telemetry on, the call's SERVER span is the runner's own
  (a ``ToolCall`` of origin ``stdio``), parented on the host's trace context.

The call runs in a task of its own (the link's nursery) through the same
code as every call a task runs (the driver, ``ToolCalls.run``: routing,
``tool_timeout_sec``, errors, the unknown-tool heal, metrics, the result in
the host's era's shape, a handshake-era host's input rounds run in the
sidecar). A 2026-era host's context is the one the SDK's single-exchange entry
gives a 2026 request (``compat.sdk.modern_request_context``); a handshake-era
host's is built on its connection (``compat.sdk.request_context_on``), whose
requests (an input round's questions) go through the connection's own channel,
so the SDK's dispatcher takes the host's reply. The call's log notices go to
the host wire, in order with its answer; its answer, or the SDK's error for
what it raised, each era's (``host.pipeline.adapters.reply``), is written to the host as
one line. The host's ``notifications/cancelled`` for it cancels the task, and
it is answered never, as on the SDK path. The stdio link's unanswered-request set
tracks it.

Concurrency: ``take`` and ``cancel`` are synchronous, in the host wire's
reader task; each call's task writes its notices and answer itself, through
the wire's writer (``write``: at once when the writer is idle).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request
from mcp_types import LOG_LEVEL_META_KEY

from supervisor.compat.sdk import modern_request_context, notify_progress, progress_token_of, request_context_on
from supervisor.host.pipeline.adapters import reply
from supervisor.host.pipeline.call import ToolCall
from supervisor.host.pipeline.paths import ENVELOPE_KEYS
from supervisor.telemetry.conventions import TRACE_KEYS
from supervisor.wire.codec import frame

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from supervisor.catalog.registry import RegisteredTool
    from supervisor.host.front import Front
    from supervisor.server_actor import ServerActor


_TAKEN_META_KEYS: Final = ENVELOPE_KEYS | {LOG_LEVEL_META_KEY, "progressToken"} | frozenset(TRACE_KEYS)

Write = Callable[[bytes], Awaitable[None]]
"""Writes one framed line to the host wire (``host.stdio.wire.HostWire.write_line``)."""


class Tracker(Protocol):
    """The stdio link's unanswered-request set."""

    def track(self, request_id: str | int) -> None: ...

    def settle(self, request_id: str | int) -> None: ...


class StdioFastCalls:
    """One stdio host's fast-path calls in flight here: a task each, by the host's request id."""

    def __init__(self, front: Front, tracker: Tracker, write: Write) -> None:
        self._front = front
        self._tracker = tracker
        self._write = write
        self._running: dict[str | int, trio.CancelScope] = {}
        self.nursery: trio.Nursery | None = None
        """Where the calls run (the stdio link's, for as long as it serves the host); None: none are taken."""
        self.taken = 0

    @property
    def running(self) -> bool:
        return bool(self._running)

    def take(
        self,
        message: dict[str, Any],
        routed: tuple[RegisteredTool, ServerActor],
        arguments: dict[str, Any] | None,
        large_line: bytes | None = None,
        *,
        handshake: bool = False,
    ) -> bool:
        """Run the ``tools/call`` request ``message`` here (True), or leave it to the SDK (False).

        ``large_line``: the line, when ``message`` is a large one's envelope (``wire.codec.load``: its big
        members left unread, as placeholders): the call needs them, so the line is read whole.
        ``handshake``: the host speaks a handshake era (its connection is the Front's, once the SDK answered
        its ``initialize``).
        """
        nursery = self.nursery
        connection = self._front.handshake_connection if handshake else None
        if nursery is None or self._front.shutting_down or (handshake and connection is None):
            return False
        if large_line is not None:
            message = json.loads(large_line)
            arguments = message["params"].get("arguments")
        host_id, params = message["id"], message["params"]
        if host_id in self._running:
            return False
        if connection is not None:
            outbound = _HostWire(connection.outbound, self._notify, progress_token_of(params))
            ctx = request_context_on(
                connection, "tools/call", host_id, params, outbound=outbound, meta=params.get("_meta")
            )
        else:
            if not _TAKEN_META_KEYS.issuperset(params.get("_meta") or ()):
                return False
            verdict = classify_inbound_request(message)
            if not isinstance(verdict, InboundModernRoute):
                return False  # the SDK answers with the ladder's error
            ctx = modern_request_context(verdict, "tools/call", host_id, params, self._notify)
        scope = self._running[host_id] = trio.CancelScope()
        self._tracker.track(host_id)
        self.taken += 1
        nursery.start_soon(partial(self._run, host_id, scope, ctx, routed=routed, arguments=arguments))
        return True

    def cancel(self, host_id: str | int) -> bool:
        """The host cancelled ``host_id``: if it runs here, it ends unanswered (True)."""
        scope = self._running.get(host_id)
        if scope is None:
            return False
        scope.cancel()
        return True

    async def _run(
        self,
        host_id: str | int,
        scope: trio.CancelScope,
        ctx: ServerRequestContext[Any],
        *,
        routed: tuple[RegisteredTool, ServerActor],
        arguments: dict[str, Any] | None,
    ) -> None:
        front = self._front
        call = ToolCall(ctx, *routed, arguments, "stdio")
        try:
            with scope:
                answer = await reply(front.tool_calls, call)
                await self._write(frame(answer))
        finally:
            del self._running[host_id]
            self._tracker.settle(host_id)

    async def _notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        """A notice of a call (a log message the host asked for), on the host wire before its answer."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._write(frame(message))


class _HostWire:
    """A handshake-era host's call's ``DispatchContext``: its notices on the host wire, in order with its answer
    (``notify``), its requests through the connection's own channel (the SDK's dispatcher takes the reply)."""

    can_send_request = True

    def __init__(
        self,
        connection_outbound: Any,
        notify: Callable[[str, Mapping[str, Any] | None], Awaitable[None]],
        progress_token: Any = None,
    ) -> None:
        self._connection_outbound = connection_outbound
        self._notify = notify
        self._token = progress_token

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        await self._notify(method, params)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        await notify_progress(self._notify, self._token, progress, total, message)

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = await self._connection_outbound.send_raw_request(method, params, opts)
        return result
