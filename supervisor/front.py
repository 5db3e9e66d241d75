"""The Front: the one MCP server the host talks to.

``tools/list`` answers from the Registry; ``tools/call`` routes by the Registry
to the owning ServerActor's current generation, with the raw tool name. The
Front never mutates the Registry.

Change notices reach hosts of both protocol eras (DESIGN §7): 2026-era hosts
hold a ``subscriptions/listen`` stream served by the SDK's ``ListenHandler``
over an in-memory bus; handshake-era hosts get ``notifications/tools/list_changed``
on their connection, which the Front captures when the host finishes its
handshake and forgets when the connection closes (the SDK unwinds the
connection's ``exit_stack`` then), so many short-lived HTTP sessions do not
pile up. ``serve_change_notices`` coalesces bursts of Registry changes into one
notice per short window.

Shutdown: ``begin_shutdown`` makes new calls fail at once with a clear error;
``wait_idle`` returns when the calls already running have been answered (over
stdio the owner reports each message written to the host through
``note_sent``; over HTTP a call counts as answered when its handler returns,
and the HTTP front tracks the responses still being written). The owner
bounds that wait with the configured grace, then cancels.

Every routed call is reported to the Supervisor's metrics (outcome, latency).

Concurrency: the Front's tasks live in the caller's nursery (``serve_*`` run
until cancelled). The unanswered-call set and the captured connections are only
touched without ``await`` in between, so they need no lock.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import mcp_types as types
import trio
from mcp import MCPError
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from supervisor._logs import RateLimitedLog
from supervisor._version import __version__
from supervisor.catalog_wire import ToolsListWireCache
from supervisor.errors import UpstreamError, UpstreamTimeout
from supervisor.metrics import CallOutcome
from supervisor.resources import ResourceRouter
from supervisor.root import Supervisor

logger = logging.getLogger(__name__)

NOTICE_COALESCE_SEC: Final = 0.01
"""Registry changes within this window reach the host as one notice."""
FIRST_LIST_WAIT_SEC: Final = 3.0
"""How long a ``tools/list`` waits for servers still on their first attempt.

Hosts that list once at start-up and ignore change notices then still see
every server that starts promptly; a hanging server delays the answer by at
most this much, once (I12), and its tools follow with a change notice."""
SERVER_NAME: Final = "mcp-supervisor"
CALL_FAILURE_LOG_WINDOW_SEC: Final = 10.0
"""A down server fails every call: per (server, error kind), one warning per window and a count of the rest."""


class Front:
    """Host-facing MCP server over the Supervisor's Registry."""

    def __init__(self, supervisor: Supervisor, *, delivery_reported: bool = True) -> None:
        """Build the Front's MCP server.

        Args:
            supervisor: Whose Registry and actors the Front serves.
            delivery_reported: The owner calls ``note_sent`` for every message it
                writes to the host (stdio). If False (HTTP), a call is settled when
                its handler returns.
        """
        self._supervisor = supervisor
        self._delivery_reported = delivery_reported
        self._bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._bus)
        self._legacy_connections: set[Connection] = set()
        self._resources = ResourceRouter(supervisor)
        self._unanswered: set[types.RequestId] = set()
        """Ids of host calls whose answer has not been written to the host yet."""
        self._idle = trio.Event()
        self._idle.set()
        self._shutting_down = False
        self._call_failures = RateLimitedLog(logger, window_sec=CALL_FAILURE_LOG_WINDOW_SEC)
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=__version__,
            instructions="Tools of several MCP servers, named mcp__<server>__<tool>.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
        )
        self.server.middleware.append(self._capture_legacy_session)
        self.server.middleware.append(
            ToolsListWireCache(supervisor.registry, settled=lambda: not supervisor.pending_first_attempts())
        )
        self.init_options = self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    # -- handlers ---------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # A host that lists right after starting us sees every server that has
        # finished its first attempt, not a half-empty catalog.
        await self._wait_for_first_attempts()
        return types.ListToolsResult(tools=self._supervisor.registry.tools())

    async def _wait_for_first_attempts(self) -> None:
        """Wait, at most ``FIRST_LIST_WAIT_SEC``, for servers still on their first attempt."""
        with trio.move_on_after(min(self._supervisor.startup_bound_sec, FIRST_LIST_WAIT_SEC)):
            await self._supervisor.wait_first_attempts()

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        await self._wait_for_first_attempts()
        return types.ListResourcesResult(resources=await self._resources.list_resources())

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await self._resources.read_resource(str(params.uri))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if self._shutting_down:
            return _error_result("mcp-supervisor is shutting down; the call was not started")
        routed = self._supervisor.route(params.name)
        if routed is None:
            # Right after start a host may call before every server has listed its
            # tools; like tools/list, wait (bounded) for the first attempts first.
            await self._wait_for_first_attempts()
            routed = self._supervisor.route(params.name)
        if routed is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        tool, actor = routed
        call_id = ctx.request_id
        if call_id is not None:
            self._unanswered.add(call_id)
            self._idle = trio.Event() if len(self._unanswered) == 1 else self._idle
        started = trio.current_time()
        outcome: CallOutcome = "cancelled"
        try:
            result = await actor.call_tool(tool.raw_name, params.arguments)
            outcome = "tool_error" if result.is_error else "ok"
            return result
        except UpstreamError as exc:
            outcome = "timeout" if isinstance(exc, UpstreamTimeout) else "unavailable"
            self._call_failures.warning(
                (tool.owner, type(exc).__name__),
                "server=%s tool=%s call failed: %s", tool.owner, tool.raw_name, exc,
                extra={"server": tool.owner, "tool": tool.raw_name},
            )  # fmt: skip
            return _error_result(str(exc))
        except MCPError:
            outcome = "rpc_error"
            raise
        except trio.Cancelled:
            # Cancelled (host cancel or shutdown): whatever answer follows, the call is over.
            if call_id is not None:
                self._settle(call_id)
            raise
        finally:
            self._supervisor.metrics.call_finished(tool.owner, outcome, trio.current_time() - started)
            if call_id is not None and not self._delivery_reported:
                self._settle(call_id)

    def note_sent(self, message: SessionMessage) -> None:
        """Record a message written to the host; an answer settles its call (see ``wait_idle``)."""
        if isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError) and message.message.id is not None:
            self._settle(message.message.id)

    def _settle(self, call_id: types.RequestId) -> None:
        self._unanswered.discard(call_id)
        if not self._unanswered:
            self._idle.set()

    async def _capture_legacy_session(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method == "notifications/initialized" and ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            # The SDK builds a new ServerSession per request; the connection is what lives as long
            # as the host's session does. ServerSession has no public accessor for it (mcp 2.3).
            connection: Connection = ctx.session._connection
            if connection not in self._legacy_connections:
                self._legacy_connections.add(connection)
                connection.exit_stack.callback(self._legacy_connections.discard, connection)
        return result

    @property
    def legacy_hosts(self) -> int:
        """How many handshake-era host connections are open (tests read it)."""
        return len(self._legacy_connections)

    # -- change notices ---------------------------------------------------------------

    async def serve_change_notices(self) -> None:
        """Tell every host about Registry changes, coalesced, until cancelled."""
        registry = self._supervisor.registry
        seen = registry.version
        while True:
            while registry.version == seen:
                await self._supervisor.catalog_changed.wait()
            await trio.sleep(NOTICE_COALESCE_SEC)
            seen = registry.version
            await self._announce()

    async def _announce(self) -> None:
        logger.debug("catalog changed (%d tools); notifying hosts", len(self._supervisor.registry))
        await self._bus.publish(ToolsListChanged())
        # A snapshot: connections may close (and leave the set) while we await.
        for connection in list(self._legacy_connections):
            await connection.send_tool_list_changed()  # best effort: the SDK never raises here

    # -- shutdown ---------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """Refuse new calls from now on and end the hosts' listen streams."""
        self._shutting_down = True
        self._listen.close()

    async def wait_idle(self) -> None:
        """Return when every call has been answered: its result handed to the host's wire.

        Counting until the answer is written (not until the handler returns)
        matters at shutdown: the SDK writes the answer after the handler
        returns, so cancelling the connection then could still lose it.
        """
        await self._idle.wait()


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
