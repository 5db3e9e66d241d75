"""The streamable-HTTP transport of one upstream generation.

``open_http_transport`` wraps the SDK's ``streamable_http_client``: the SDK
reports transport failures as exception values on the read stream and keeps
the session open, so the wrapper marks the generation lost on the first such
value and when the stream ends (the ServerActor then reconnects).

The wrapper is a pass-through view of the SDK's read stream, not a relay
through another memory channel: the SDK's stream carries, with each message,
the ``contextvars`` of the task that produced it (the task that POSTed the
host's call reads that call's response stream), and its dispatcher runs the
client callbacks in that context. That is how a server→client request or a
progress/log notice sent on a call's own stream is attributed to the host call
that caused it (``calls.attribution.current_call``); a relay task would replace that
context with its own.

A server with an ``[oauth]`` table gets the SDK's OAuth provider as the httpx
auth flow (:mod:`supervisor.auth.oauth`); when that flow finds that only a person
can help (no tokens, a refused refresh), the transport's failure is re-raised
as ``UpstreamNeedsLogin``, which the ServerActor turns into ``needs_login``.
With telemetry on, every streamable-HTTP request also carries the trace
context of the MCP request it posts (``traceparent``/``tracestate`` headers),
as well as in its ``_meta``.
The generation's httpx client is also bound to its ``HttpCalls``
(``upstream.http_calls``), the fast path's own POST for a 2026-era server
(sent on connections of its own where httpx would add nothing: ``upstream.http1``),
closed with the generation.
``transport = "sse"`` selects the legacy HTTP+SSE client
(:mod:`supervisor.upstream.sse`) with the same headers, auth and watching.

Nursery: none here; the SDK's transport owns its tasks. Waits are unbounded on
purpose: the ServerActor bounds connect, list and call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from supervisor.auth.oauth import RunAuth, build_run_auth
from supervisor.compat.sdk import TransportStreams, create_http_client
from supervisor.config.servers import ServerSettings
from supervisor.telemetry.spans import TELEMETRY, inject_headers
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.http_calls import HttpCalls
from supervisor.upstream.sse import open_sse_streams
from supervisor.wire.streams import ReadStreamView


class _WatchedReadStream(ReadStreamView):
    """A read stream that reports transport failures to ``health`` (``last_context`` passes through)."""

    def __init__(self, inner: Any, health: TransportHealth) -> None:
        super().__init__(inner)
        self._health = health

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await super().receive()
        except Exception:
            self._health.mark_lost("HTTP stream ended")
            raise
        if isinstance(item, Exception):
            self._health.mark_lost(f"HTTP transport error: {item}")
        return item

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except Exception as exc:  # whatever ended the stream (EOF, a closed or broken stream), it is over
            raise StopAsyncIteration from exc


@asynccontextmanager
async def open_http_transport(
    settings: ServerSettings, health: TransportHealth, calls: HttpCalls | None = None
) -> AsyncIterator[TransportStreams]:
    """Connect to ``settings.url`` with the configured headers and bearer token or OAuth.

    ``calls``: bound to the streamable-HTTP client (not used with ``transport = "sse"``).

    Raises:
        UpstreamNeedsLogin: An ``authorization_code`` server has no usable tokens.
    """
    assert settings.url is not None
    headers = dict(settings.http_headers)
    if (token := settings.bearer_token()) is not None:
        headers["Authorization"] = f"Bearer {token}"
    run_auth = build_run_auth(settings) if settings.oauth is not None else None
    if run_auth is not None:
        # A refused scope closes the connection: "connection closed" would hide what to run (issue 30).
        health.explain = lambda: str(refused) if (refused := run_auth.needs_login()) is not None else None
    try:
        if calls is not None:
            calls.needs_login = run_auth.needs_login if run_auth is not None else None
        async with open_http_streams(settings, headers, run_auth.auth if run_auth else None, calls) as (read, write):
            watched: Any = _WatchedReadStream(read, health)
            yield watched, write
    except Exception as exc:  # never a Cancelled: a stop stays a stop
        needs_login = run_auth.needs_login() if run_auth is not None else None
        if needs_login is None:
            raise
        health.mark_lost(str(needs_login))
        raise needs_login from exc


def open_http_streams(
    settings: ServerSettings, headers: dict[str, str], auth: httpx2.Auth | None, calls: HttpCalls | None = None
) -> AbstractAsyncContextManager[TransportStreams]:
    """The SDK client transport for ``settings`` (streamable HTTP or legacy SSE), unwatched (``login`` uses it)."""
    assert settings.url is not None
    if settings.http_transport == "sse":
        return open_sse_streams(settings.url, headers, auth)
    return _open_streamable(settings.url, headers, auth, calls)


@asynccontextmanager
async def _open_streamable(
    url: str, headers: dict[str, str], auth: httpx2.Auth | None, calls: HttpCalls | None
) -> AsyncIterator[TransportStreams]:
    tls = httpx2.create_ssl_context()  # what httpx would build itself, given to it: our own connections share it
    async with create_http_client(headers, auth, tls) as http_client:
        if calls is not None:
            # Bound before the hook below: our own POSTs put their span's context in their headers themselves
            # (``telemetry.spans.traced_request``), so telemetry on is no reason for httpx to send them.
            calls.bind(http_client, tls)
        if TELEMETRY.on:  # each of the SDK's POSTs carries its request's CLIENT span context in headers too (I18)
            http_client.event_hooks = {**http_client.event_hooks, "request": [inject_headers]}
        try:
            async with streamable_http_client(url, http_client=http_client) as streams:
                yield streams
        finally:
            if calls is not None:
                calls.close()


__all__ = ["RunAuth", "open_http_streams", "open_http_transport"]
