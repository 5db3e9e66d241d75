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
that caused it (``host_calls.current_call``); a relay task would replace that
context with its own.

Nursery: none here; the SDK's transport owns its tasks. Waits are unbounded on
purpose: the ServerActor bounds connect, list and call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from supervisor._compat import TransportStreams, create_mcp_http_client
from supervisor._streams import ReadStreamView
from supervisor.settings import ServerSettings
from supervisor.upstream_stdio import TransportHealth


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
async def open_http_transport(settings: ServerSettings, health: TransportHealth) -> AsyncIterator[TransportStreams]:
    """Connect to ``settings.url`` with the configured headers and bearer token."""
    assert settings.url is not None
    headers = dict(settings.http_headers)
    if (token := settings.bearer_token()) is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with (
        create_mcp_http_client(headers=headers) as http_client,
        streamable_http_client(settings.url, http_client=http_client) as (upstream_read, upstream_write),
    ):
        watched: Any = _WatchedReadStream(upstream_read, health)
        yield watched, upstream_write
