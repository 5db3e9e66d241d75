"""Opening one upstream generation: its transport, its ``mcp.Client`` with our callbacks, its listen task.

``open_upstream`` is the seam between the ServerActor and the SDK
(``seams.Connector``; ``root.production_connector`` wires it). The transport is
picked from the settings (stdio with the wire splice's upstream half,
streamable HTTP with the fast path's own POST (``upstream.http_calls``), or
SSE), wrapped by the tap (``upstream.tap``), and the client's callbacks send
the server's notices and server→client requests to the
``HostSide`` (change notices: ``on_list_changed``, which must not block).

Nursery: ``open_upstream`` owns one nursery for the 2026-era listen task
(``upstream.listen.serve_listen``) and the transport's own pumps; it is closed
when the generation ends. Waits here are unbounded on purpose: the ServerActor
bounds connect and list with ``startup_timeout_sec``.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import mcp_types as types
import trio
from mcp import Client
from mcp.client.caching import CacheConfig
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from supervisor.calls.attribution import HostSide, current_call, named_for, no_host_error
from supervisor.catalog.registry import Kind
from supervisor.compat.sdk import TransportStreams, request_envelope, stamp_capabilities_of
from supervisor.config.servers import ServerSettings
from supervisor.upstream.errors import enter_client, teardown_error
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.http import open_http_transport
from supervisor.upstream.http_calls import HttpCalls
from supervisor.upstream.listen import ListenTarget, serve_listen
from supervisor.upstream.session import CLIENT_INFO, Upstream
from supervisor.upstream.spawn import EarlyServers
from supervisor.upstream.splice import UpstreamSplice
from supervisor.upstream.stdio import open_stdio_transport
from supervisor.upstream.tap import tapped

logger = logging.getLogger(__name__)


def _open_transport(
    settings: ServerSettings,
    health: TransportHealth,
    splice: UpstreamSplice | None,
    calls: HttpCalls | None,
    early: EarlyServers | None,
) -> AbstractAsyncContextManager[TransportStreams]:
    if settings.transport == "stdio":
        return open_stdio_transport(settings, health, splice=splice, early=early)
    return open_http_transport(settings, health, calls)


OnListChanged = Callable[[Kind], None]


@asynccontextmanager
async def open_upstream(
    settings: ServerSettings,
    *,
    on_list_changed: OnListChanged,
    cache: CacheConfig | None = None,
    host: HostSide | None = None,
    early: EarlyServers | None = None,
) -> AsyncIterator[Upstream]:
    """Connect one generation of ``settings`` and keep its notices flowing.

    ``early``: where a stdio server's process started before the SDK import waits (``upstream.spawn``).

    Raises:
        UpstreamUnavailable: The server could not be started or reached, or hung up during the handshake.
        UpstreamProtocolError: The handshake failed.
    """
    name = settings.name
    health = TransportHealth(secrets=tuple(settings.secret_values()))
    client_ref: list[Client] = []

    async def on_message(message: IncomingMessage) -> None:
        # A 2026-era server's change notices also arrive on the listen stream; they are taken from there only.
        modern = bool(client_ref) and client_ref[0].protocol_version in MODERN_PROTOCOL_VERSIONS
        match message:
            case types.ToolListChangedNotification() if not modern:
                on_list_changed("tools")
            case types.PromptListChangedNotification() if not modern:
                on_list_changed("prompts")
            case types.ResourceListChangedNotification() if not modern:
                on_list_changed("resources")
            case types.ResourceUpdatedNotification(params=params) if not modern and host is not None:
                await host.deliver_resource_updated(name, str(params.uri))
            case types.LoggingMessageNotification(params=params) if host is not None and not modern:
                # Connection-wide (handshake era); request-scoped messages went through the tap.
                await host.deliver_log(name, named_for(name, params))
            case types.ElicitCompleteNotification(params=params) if host is not None:
                await host.deliver_elicitation_complete(name, params.elicitation_id)
            case Exception():
                logger.debug("server=%s transport reported %r", name, message)
            case _:
                pass
        await trio.lowlevel.checkpoint()

    async def ask(request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        if host is None:
            return no_host_error(request.method)
        return await host.ask_host(name, request)

    async def on_sampling(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        answer = await ask(types.CreateMessageRequest(params=params))
        assert isinstance(answer, types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData)
        return answer

    async def on_elicitation(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        answer = await ask(types.ElicitRequest(params=params))
        assert isinstance(answer, types.ElicitResult | types.ErrorData)
        return answer

    async def on_list_roots(context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        answer = await ask(types.ListRootsRequest())
        assert isinstance(answer, types.ListRootsResult | types.ErrorData)
        return answer

    def tap(message: types.JSONRPCNotification, context: contextvars.Context | None) -> None:
        if upstream_ref:
            upstream_ref[0].tap(message, context)

    upstream_ref: list[Upstream] = []
    splice = UpstreamSplice(name, settings.tool_timeout_sec) if settings.transport == "stdio" else None
    calls = (
        HttpCalls(name, settings.url, health) if settings.url is not None and settings.http_transport != "sse" else None
    )
    client = Client(
        tapped(_open_transport(settings, health, splice, calls, early), tap, settings.max_tools),
        mode=settings.protocol,
        message_handler=on_message,
        client_info=CLIENT_INFO,
        cache=cache,
        sampling_callback=on_sampling,
        sampling_capabilities=types.SamplingCapability(tools=types.SamplingToolsCapability()),
        elicitation_callback=on_elicitation,
        list_roots_callback=on_list_roots,
    )
    client_ref.append(client)
    # The client is entered through an exit stack, so that on the way out it sees
    # the exception leaving the generation: the HTTP transport runs a task group
    # in this task, and a failed request cancels it; only the client's own exit,
    # given that Cancelled, can absorb it (and report the failure instead).
    stack = AsyncExitStack()
    await enter_client(stack, client, name, health)
    upstream = Upstream(settings, client, health, host)
    upstream_ref.append(upstream)
    if upstream.modern:
        # Each request made for a host declares the host's capabilities, not ours (issue 30).
        stamp_capabilities_of(client.session, _calling_host_capabilities)
    if splice is not None:
        if upstream.modern:
            splice.set_envelope(request_envelope(client.session, "tools/call"))
        else:
            splice.set_handshake()
        upstream.splice = splice
    if calls is not None and calls.ready and upstream.modern:
        upstream.http_calls = calls  # a handshake-era server's POSTs belong to its session: the SDK's
    body_failed = False
    try:
        async with stack, trio.open_nursery() as nursery:
            if upstream.modern:
                upstream.change_notices = await nursery.start(
                    serve_listen,
                    client,
                    upstream.listen_filter,
                    ListenTarget(name, upstream.health, on_list_changed, host),
                )
            try:
                yield upstream
            except BaseException:
                body_failed = True
                raise
            nursery.cancel_scope.cancel()
    except BaseException as raised:
        error = teardown_error(raised, name, health, body_failed)
        if error is raised:
            raise
        if error is not None:
            raise error from error.__cause__  # the transport's failure, for the generation's own error


def _calling_host_capabilities() -> dict[str, Any] | None:
    """The capabilities of the host whose call the current task serves (None: the sidecar's own request)."""
    call = current_call.get()
    return None if call is None else call.client_capabilities
