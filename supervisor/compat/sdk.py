"""Every use of private or provisional ``mcp`` SDK API, in one place (mcp 2.3).

An SDK upgrade that moves one of these breaks here, loudly, and
``tests/compat/test_compat.py`` holds one test per assumption. Nothing else in the
package may import an underscored SDK module or touch an underscored attribute
of an SDK object.

* ``connection_of``: ``ServerSession`` has no public accessor for the
  ``Connection`` it proxies; the handshake-era host's connection is what lives
  as long as that host does (the SDK builds a new ``ServerSession`` per request).
* ``create_mcp_http_client``: the SDK's httpx client factory with the MCP
  transports' timeouts lives in ``mcp.shared._httpx_utils``;
  ``create_http_client`` builds the same client with a TLS context given
  (``verify=``), so that our own connections to its server trust what it trusts.
* ``TransportStreams``: the (read, write) stream pair a transport yields is
  only named in ``mcp.client._transport``.
* ``add_server_middleware``: ``Server.middleware`` is marked provisional.
* ``gate_sdk_tracing``: the SDK puts its ``OpenTelemetryMiddleware`` (a private
  module) first in every ``Server.middleware``; it is wrapped so that a request
  it could only pass through skips it (issue 29: 15% of an HTTP front's CPU).
* ``run_input_required_driver``: the SDK's SEP-2322 round driver (sampling,
  elicitation, roots embedded in an ``InputRequiredResult``) is only public
  inside ``Client.call_tool``; the sidecar drives rounds for handshake-era hosts
  through it with its own dispatch (the host's connection).
* ``send_raw_request``: ``ClientSession`` sends only typed requests and returns
  only validated results; a task-run tools/call (``Upstream._tool_sender``) sends the
  request dict through the session's own stamp (the 2026 ``_meta`` envelope and
  headers) and dispatcher, and takes the raw result dict back; ``request_envelope``
  is that stamp's ``_meta`` alone, for the stdio wire splice (``host.stdio.reader``), and
  ``stamp_request`` the stamp with its headers, for the fast path's own POST to a
  2026-era HTTP upstream (``upstream.http_calls``).
* ``stream_within_origin``: the SDK's redirect rule for its transports' POSTs
  lives in ``mcp.shared._httpx_utils``; ``upstream.http_calls`` POSTs by it too.
* ``request_context_on``: a ``ServerSession`` and ``ServerRequestContext`` are
  built by the SDK's kernel per inbound request; a ``tools/call`` the wire
  splice took off a handshake-era host's wire has neither, so one is built on
  the host's connection (its standalone channel is the stdio wire) the first
  time an upstream's server→client request needs that call's host.
* ``modern_request_context``: the SDK builds the context of a 2026 HTTP
  request inside its single-exchange entry; the HTTP front's own answer to a
  plain call (``host.http.posts``) builds the same one.
* ``stamp_capabilities_of``: the stamp writes the client's own capabilities into
  every 2026 request; it is wrapped so a request made for a host declares the
  host's (issue 30).

The other private uses have modules of their own beside this one, so that
importing one pulls in nothing else: ``listing`` and ``oauth`` (the SDK),
``coredis``, ``anyio`` and ``pydantic_settings``.

Concurrency: plain functions and aliases; nothing here awaits.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, cast

import httpx2
from mcp.client._input_required import DEFAULT_INPUT_REQUIRED_MAX_ROUNDS, run_input_required_driver
from mcp.client._transport import TransportStreams
from mcp.client.session import ClientSession
from mcp.client.streamable_http import DEFAULT_MAX_SSE_EVENT_SIZE
from mcp.server import Server
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared._httpx_utils import (
    MCP_DEFAULT_SSE_READ_TIMEOUT,
    MCP_DEFAULT_TIMEOUT,
    create_mcp_http_client,
    stream_within_origin,
)
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import InboundModernRoute
from mcp_types import CLIENT_CAPABILITIES_META_KEY, RequestId

MAX_SSE_EVENT_SIZE: Final = DEFAULT_MAX_SSE_EVENT_SIZE
"""The SDK client transport's bound on one event of a response stream (its own POSTs and ours agree)."""

__all__ = [
    "DEFAULT_INPUT_REQUIRED_MAX_ROUNDS",
    "MAX_SSE_EVENT_SIZE",
    "TransportStreams",
    "add_server_middleware",
    "connection_of",
    "create_http_client",
    "create_mcp_http_client",
    "gate_sdk_tracing",
    "modern_request_context",
    "request_context_on",
    "request_envelope",
    "run_input_required_driver",
    "send_raw_request",
    "stamp_capabilities_of",
    "stamp_request",
    "stream_within_origin",
]


def create_http_client(
    headers: dict[str, str] | None, auth: httpx2.Auth | None, tls: ssl.SSLContext
) -> httpx2.AsyncClient:
    """``create_mcp_http_client``'s client (the MCP transports' timeouts), its TLS context ``tls`` (``verify=``)."""
    timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    return httpx2.AsyncClient(timeout=timeout, headers=headers, auth=auth, verify=tls)


def connection_of(session: ServerSession) -> Connection:
    """The connection a per-request ``ServerSession`` belongs to."""
    connection: Connection = session._connection
    return connection


def request_context_on(
    connection: Connection,
    method: str,
    request_id: RequestId,
    params: dict[str, Any] | None,
    *,
    outbound: Any = None,
    meta: Any = None,
) -> ServerRequestContext[Any]:
    """The context of a request ``connection``'s host sent that no SDK handler serves (the wire splice's).

    Its session sends request-scoped messages on ``outbound`` (a ``DispatchContext``:
    ``notify``, ``send_raw_request``, ``can_send_request``), by default the
    connection's own channel, which over stdio is the host's wire: what the
    SDK's per-request session would send on. Over HTTP, the request's own
    response (``host.http.sessions``); for a call run off the stdio wire,
    one that writes notices in order with the answer (``host.stdio.tasks``).
    ``meta``: the request's ``_meta`` as it came.
    """
    session = ServerSession(cast(Any, connection.outbound if outbound is None else outbound), connection)
    return ServerRequestContext(
        session=session,
        lifespan_context=None,
        protocol_version=connection.protocol_version,
        method=method,
        params=params,
        request_id=request_id,
        meta=meta,
    )


def modern_request_context(
    verdict: InboundModernRoute,
    method: str,
    request_id: RequestId,
    params: dict[str, Any],
    notify: Callable[[str, Mapping[str, Any] | None], Awaitable[None]],
) -> ServerRequestContext[Any]:
    """The context the SDK's single-exchange HTTP entry would give a 2026 request (``host.http.posts``).

    Its connection is born ready from the request's envelope, with no channel
    back to the host but the request's own response: a request-scoped notice
    goes to ``notify`` (the 2026 HTTP wire has no server→client requests).
    ``meta`` is the request's ``_meta`` as it came.
    """
    connection = Connection.from_envelope(verdict.protocol_version, verdict.client_info, verdict.client_capabilities)
    channel = _ResponseChannel(notify, progress_token_of(params))
    return ServerRequestContext(
        session=ServerSession(cast(Any, channel), connection),
        lifespan_context=None,
        protocol_version=verdict.protocol_version,
        method=method,
        params=params,
        request_id=request_id,
        meta=params.get("_meta"),
    )


def progress_token_of(params: Mapping[str, Any] | None) -> Any:
    """The host's progress token in a request's ``_meta`` (None: it asked for no progress)."""
    meta = params.get("_meta") if params else None
    return meta.get("progressToken") if isinstance(meta, Mapping) else None


async def notify_progress(
    notify: Callable[[str, Mapping[str, Any] | None], Awaitable[None]],
    token: Any,
    progress: float,
    total: float | None,
    message: str | None,
) -> None:
    """``DispatchContext.progress`` for a channel of ours: a ``notifications/progress`` against the host's
    ``token``, as the SDK's JSON-RPC dispatcher sends it (nothing without a token)."""
    if token is None:
        return
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    await notify("notifications/progress", params)


class _ResponseChannel:
    """A 2026 HTTP request's ``DispatchContext`` as a ``ServerSession`` uses it: notices onto its response."""

    can_send_request = False

    def __init__(self, notify: Callable[[str, Mapping[str, Any] | None], Awaitable[None]], token: Any = None) -> None:
        self.notify_on_response = notify
        self._token = token

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        await self.notify_on_response(method, params)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        await notify_progress(self.notify_on_response, self._token, progress, total, message)

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> dict[str, Any]:
        raise NoBackChannelError(method)


def add_server_middleware(server: Server[Any], middleware: ServerMiddleware[Any]) -> None:
    """Append ``middleware`` innermost (after the SDK's OpenTelemetry middleware)."""
    server.middleware.append(middleware)


class _GatedSdkTracing:
    """The SDK's tracing middleware, run only for a request whose ``_meta`` ``needed`` says it does something for.

    The others go straight on (the caller knows what the span does: with
    tracing off it is a no-op that only makes the host's parent current).
    """

    def __init__(self, sdk: ServerMiddleware[Any], needed: Callable[[Mapping[str, Any] | None], bool]) -> None:
        self._sdk = sdk
        self._needed = needed

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if self._needed(ctx.meta):
            return await self._sdk(ctx, call_next)
        return await call_next(ctx)


def gate_sdk_tracing(server: Server[Any], needed: Callable[[Mapping[str, Any] | None], bool]) -> None:
    """Wrap the SDK's ``OpenTelemetryMiddleware`` of ``server`` in ``_GatedSdkTracing``; no-op if it is not there."""
    for index, middleware in enumerate(server.middleware):
        if isinstance(middleware, OpenTelemetryMiddleware):
            server.middleware[index] = _GatedSdkTracing(middleware, needed)


async def send_raw_request(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send ``method`` with ``params`` (owned by the caller, stamped in place) and return the raw result dict.

    Raises:
        MCPError: The server answered with an error, or the connection closed.
    """
    result: dict[str, Any] = await session._dispatcher.send_raw_request(method, params, _stamp(session, method, params))
    return result


def stamp_request(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, str]:
    """Stamp ``params`` of a ``method`` request in place as ``session`` would; the headers its stamp adds."""
    headers: dict[str, str] = _stamp(session, method, params).get("headers") or {}
    return headers


def _stamp(session: ClientSession, method: str, params: dict[str, Any]) -> Any:
    """Run ``session``'s stamp over ``params`` (in place); the call options it wrote (headers among them)."""
    opts: Any = {}
    session._stamp({"method": method, "params": params}, opts)
    return opts


def stamp_capabilities_of(session: ClientSession, capabilities: Callable[[], dict[str, Any] | None]) -> None:
    """From now on, each 2026 request of ``session`` declares ``capabilities()`` (when not None) as the client's.

    The session's stamp writes our own client capabilities into every request's
    ``_meta``; this wraps it (once per session) to write, after it, those of the
    host the request is made for (``capabilities`` reads the calling task's
    context, so concurrent calls of different hosts never mix).
    """
    stamp = session._stamp

    def stamp_for_host(data: dict[str, Any], opts: Any) -> None:
        stamp(data, opts)
        declared = capabilities()
        meta = data.get("params", {}).get("_meta")
        if declared is not None and isinstance(meta, dict) and CLIENT_CAPABILITIES_META_KEY in meta:
            meta[CLIENT_CAPABILITIES_META_KEY] = declared

    session._stamp = stamp_for_host


def request_envelope(session: ClientSession, method: str) -> dict[str, Any]:
    """The ``_meta`` the session's stamp puts on a ``method`` request (the 2026 envelope; empty before it)."""
    params: dict[str, Any] = {}
    _stamp(session, method, params)
    meta: dict[str, Any] = params.get("_meta", {})
    return meta
