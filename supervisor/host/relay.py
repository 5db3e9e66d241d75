"""The Relay: upstream→host traffic, each piece to the host it belongs to and no other (DESIGN I13).

The Relay is the ``HostSide`` every upstream generation talks to. It owns:

* the ``CallTracker`` (which host calls are in flight where; attribution),
* the handshake-era host connections (``LegacyHosts``: their log levels and
  the connection-wide notices), and
* the resource ``Subscriptions`` of every host.

What goes where:

* **Server→client requests** (sampling, elicitation, roots) go to the one
  host call they are attributed to (``calls.attribution``); unattributable ones are
  refused with an error to the upstream, never guessed. A handshake-era host
  gets the request related to its call; for a 2026-era host the call's
  ``Exchange`` turns it into an input round. A host that lacks the capability
  (no sampling, form-only elicitation asked for a URL) gets nothing: the
  upstream gets the error a direct client would send.
* **Log messages** carry ``logger = <server>`` (``<server>.<logger>`` when the
  upstream named one). A 2026-era upstream's messages are request-scoped: the
  upstream's transport tap puts them into the attributed call's ``CallNotices``
  if its host asked for that level. A handshake-era upstream's are
  connection-wide: every handshake-era host whose ``logging/setLevel`` admits
  the level gets them here (a host that never set a level gets them all, as it
  would from the server directly), and a 2026-era call they are attributed to
  gets them through the tap if it opted in. The sidecar's own warnings about a
  server go to handshake-era hosts that set a level, as logger
  ``mcp-supervisor`` (``publish_own_warning``).
* **Resource updates** go only to hosts subscribed to that URI: handshake-era
  ones on their connection, 2026-era ones through their listen streams (the
  Front's bus filters by URI).
* **URL-elicitation completions** go to the host that received the elicitation.

Concurrency: all bookkeeping is synchronous; sends to a host are awaited in
the task that delivers them (the upstream's notification task), and a send to
a host that is gone is dropped by the SDK.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import mcp_types as types
import trio
from mcp import MCPError
from mcp.server.connection import Connection
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, LoggingLevel

from supervisor.calls.attribution import LOG_LEVELS, CallTracker, HostCall, level_admits
from supervisor.catalog.views import CatalogView
from supervisor.compat.sdk import connection_of
from supervisor.host.subscriptions import Subscriptions

logger = logging.getLogger(__name__)

OWN_LOGGER: Final = "mcp-supervisor"
ELICITATIONS_REMEMBERED: Final = 1024
"""How many URL elicitations' hosts are remembered for their completion notice."""
OWN_WARNINGS_BUFFER: Final = 64


class LegacyHosts:
    """Handshake-era host connections, the view each was served, and the log level each asked for."""

    def __init__(self, on_levels_changed: Callable[[], None]) -> None:
        self._levels: dict[Connection, LoggingLevel | None] = {}
        self._views: dict[Connection, CatalogView | None] = {}
        self._by_session: dict[str, Connection] = {}
        self._on_levels_changed = on_levels_changed
        self._on_leave: list[Callable[[Connection], None]] = []

    def on_leave(self, callback: Callable[[Connection], None]) -> None:
        self._on_leave.append(callback)

    def capture(self, connection: Connection, view: CatalogView | None = None) -> None:
        """Track ``connection`` (served ``view``; None: everything) until it closes (the SDK unwinds its stack then)."""
        if connection not in self._levels:
            self._levels[connection] = None
            self._views[connection] = view
            if connection.session_id is not None:  # an HTTP host's session
                self._by_session[connection.session_id] = connection
            connection.exit_stack.callback(self._forget, connection)

    def _forget(self, connection: Connection) -> None:
        had_level = self._levels.pop(connection, None) is not None
        self._views.pop(connection, None)
        if connection.session_id is not None:
            self._by_session.pop(connection.session_id, None)
        for callback in self._on_leave:
            callback(connection)
        if had_level:
            self._on_levels_changed()

    def set_level(self, connection: Connection, level: LoggingLevel, view: CatalogView | None = None) -> None:
        self.capture(connection, view)
        self._levels[connection] = level
        self._on_levels_changed()

    def of_view(self, view: CatalogView) -> list[Connection]:
        """The connections served ``view`` (a snapshot), for its change notices."""
        return [c for c, seen in self._views.items() if seen is view or (seen is None and not view.name)]

    def shown(self, server: str | None) -> list[Connection]:
        """The connections whose view shows ``server`` (None: not about one server), a snapshot."""
        return [c for c, view in self._views.items() if server is None or view is None or view.shows_server(server)]

    def level_of(self, connection: Connection) -> LoggingLevel | None:
        return self._levels.get(connection)

    def of_session(self, session_id: str) -> Connection | None:
        """The initialized connection of an HTTP host's session ``session_id`` (None: no such session, or not yet)."""
        connection = self._by_session.get(session_id)
        return connection if connection is not None and connection.initialized.is_set() else None

    def most_verbose_level(self) -> LoggingLevel | None:
        """The most verbose level any host set (None if none did)."""
        severities = [LOG_LEVELS.index(level) for level in self._levels.values() if level is not None]
        return LOG_LEVELS[min(severities)] if severities else None

    @property
    def connections(self) -> list[Connection]:
        """A snapshot (connections may close while a caller awaits)."""
        return list(self._levels)

    def __len__(self) -> int:
        return len(self._levels)


class Relay:
    """Implements ``calls.attribution.HostSide`` for the Front."""

    def __init__(self) -> None:
        self.calls = CallTracker()
        self.legacy = LegacyHosts(on_levels_changed=self._levels_changed)
        self.subscriptions = Subscriptions()
        self.legacy.on_leave(self.subscriptions.release)
        self._buses: list[tuple[CatalogView | None, InMemorySubscriptionBus]] = []
        """Each Front's listen-event bus (its ``ListenHandler`` serves its 2026-era hosts), with its view."""
        self._elicitation_hosts: OrderedDict[str, Connection] = OrderedDict()
        self._on_log_level: Callable[[LoggingLevel | None], None] | None = None
        self._own_warnings_send, self._own_warnings_receive = trio.open_memory_channel[
            tuple[str | None, types.LoggingMessageNotificationParams]
        ](OWN_WARNINGS_BUFFER)

    def open_bus(self, view: CatalogView | None = None) -> InMemorySubscriptionBus:
        """A new listen-event bus for the Front serving ``view``.

        A resource update reaches it only if the view shows the server it came from.
        """
        bus = InMemorySubscriptionBus()
        self._buses.append((view, bus))
        return bus

    def on_log_level(self, callback: Callable[[LoggingLevel | None], None]) -> None:
        """Call ``callback`` with the most verbose level any host wants, whenever it changes."""
        self._on_log_level = callback

    def _levels_changed(self) -> None:
        if self._on_log_level is not None:
            self._on_log_level(self.legacy.most_verbose_level())

    # -- server→client requests -------------------------------------------------------

    async def ask_host(self, server: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        call = self.calls.attribute(server, adopt=True)
        if call is None:
            in_flight = self.calls.in_flight(server)
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=(
                    f"mcp-supervisor cannot tell which host request {request.method} belongs to "
                    f"({in_flight} requests of server {server!r} in flight); it was refused. "
                    "Send it while serving exactly one request, or on that request's own HTTP stream"
                ),
            )
        if call.exchange is not None:
            answer: types.InputResponse | types.ErrorData = await call.exchange.ask(request)
            return answer
        problem = _capability_problem(call.ctx.session.client_capabilities, request)
        if problem is not None:
            return problem
        try:
            result: types.InputResponse = await call.ctx.session.send_request(
                request,
                _result_type(request),
                metadata=ServerMessageMetadata(related_request_id=call.ctx.request_id),
            )
        except MCPError as exc:
            return exc.error
        params = request.params if isinstance(request, types.ElicitRequest) else None
        if isinstance(params, types.ElicitRequestURLParams) and params.elicitation_id is not None:
            self.remember_elicitation(params.elicitation_id, call)
        return result

    def remember_elicitation(self, elicitation_id: str, call: HostCall) -> None:
        """Route a later ``notifications/elicitation/complete`` for ``elicitation_id`` to ``call``'s host."""
        self._elicitation_hosts[elicitation_id] = connection_of(call.ctx.session)
        while len(self._elicitation_hosts) > ELICITATIONS_REMEMBERED:
            self._elicitation_hosts.popitem(last=False)

    async def deliver_elicitation_complete(self, server: str, elicitation_id: str) -> None:
        connection = self._elicitation_hosts.pop(elicitation_id, None)
        if connection is None:
            logger.debug("server=%s elicitation %s completed, but no host is waiting for it", server, elicitation_id)
            return
        await connection.notify("notifications/elicitation/complete", {"elicitationId": elicitation_id})

    # -- log messages -------------------------------------------------------------------

    def attribute(self, server: str) -> HostCall | None:
        return self.calls.attribute(server)

    async def deliver_log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        for connection in self.legacy.shown(server):  # a view that hides the server hides its messages
            if level_admits(self.legacy.level_of(connection), params.level):
                await connection.notify("notifications/message", wire)

    def publish_own_warning(self, level: LoggingLevel, text: str, server: str | None = None) -> None:
        """Queue one of the sidecar's own warnings (about ``server``, if one) for the hosts that set a log level.

        Never blocks. Only hosts whose view shows ``server`` get it.
        """
        params = types.LoggingMessageNotificationParams(level=level, logger=OWN_LOGGER, data=text)
        # A burst beyond the buffer is dropped; the log file keeps every line.
        with contextlib.suppress(trio.WouldBlock):
            self._own_warnings_send.send_nowait((server, params))

    async def serve_own_warnings(self) -> None:
        """Deliver queued own warnings until cancelled."""
        async for server, params in self._own_warnings_receive:
            wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
            for connection in self.legacy.shown(server):
                level = self.legacy.level_of(connection)
                if level is not None and level_admits(level, params.level):
                    await connection.notify("notifications/message", wire)

    # -- resource updates ---------------------------------------------------------------

    async def deliver_resource_updated(self, server: str, uri: str) -> None:
        hosts = self.subscriptions.hosts_of(server, uri)
        logger.debug("server=%s resource %s updated; %d subscribed hosts", server, uri, len(hosts))
        for host in hosts:
            if isinstance(host, Connection):
                await host.send_resource_updated(uri)
        if any(not isinstance(host, Connection) for host in hosts):
            for view, bus in self._buses:  # a view that hides the server never hears of its resources
                if view is None or view.shows_server(server):
                    await bus.publish(ResourceUpdated(uri=uri))


def _result_type(request: types.InputRequest) -> Any:
    match request:
        case types.CreateMessageRequest(params=params):
            return (
                types.CreateMessageResultWithTools if params.tools or params.tool_choice else types.CreateMessageResult
            )
        case types.ElicitRequest():
            return types.ElicitResult
        case types.ListRootsRequest():
            return types.ListRootsResult


def _capability_problem(
    capabilities: types.ClientCapabilities | None, request: types.InputRequest
) -> types.ErrorData | None:
    """The error a host without the needed capability would answer ``request`` with, or None."""
    have = capabilities or types.ClientCapabilities()
    match request:
        case types.CreateMessageRequest(params=params):
            if have.sampling is None:
                return types.ErrorData(code=METHOD_NOT_FOUND, message="the host does not support sampling")
            if (params.tools or params.tool_choice) and have.sampling.tools is None:
                return types.ErrorData(code=INVALID_PARAMS, message="the host does not support tools in sampling")
        case types.ElicitRequest(params=params):
            if have.elicitation is None:
                return types.ErrorData(code=METHOD_NOT_FOUND, message="the host does not support elicitation")
            url_mode = isinstance(params, types.ElicitRequestURLParams)
            elicitation = have.elicitation
            declared_url = elicitation.url is not None
            declared_form = elicitation.form is not None or not declared_url  # `{}` means form only
            if url_mode and not declared_url:
                return types.ErrorData(code=INVALID_PARAMS, message="the host does not support URL elicitation")
            if not url_mode and not declared_form:
                return types.ErrorData(code=INVALID_PARAMS, message="the host does not support form elicitation")
        case types.ListRootsRequest():
            if have.roots is None:
                return types.ErrorData(code=METHOD_NOT_FOUND, message="the host does not support roots")
    return None
