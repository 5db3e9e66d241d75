"""The legacy HTTP+SSE transport (MCP 2024-11-05) of one upstream generation: ``transport = "sse"``.

A thin wrapper over the SDK's ``sse_client``: ``url`` is the server's SSE
endpoint (a GET stream that names the POST endpoint in its first event). Only
the handshake era exists on this transport; change notices arrive on the one
stream, as for any handshake-era server. A killed server ends the GET
stream, the SDK closes the read stream, and ``upstream.http``'s watcher marks
the generation lost, so the ServerActor reconnects with backoff.

Nursery: none here; ``sse_client`` owns its reader and writer tasks. Waits are
unbounded on purpose: the ServerActor bounds connect, list and call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import httpx2
from mcp.client.sse import sse_client

from supervisor.compat.sdk import TransportStreams

SSE_CONNECT_TIMEOUT_SEC: Final = 30.0
"""Bounds each HTTP operation but the event stream (the SDK's ``timeout``); the actor bounds the rest."""
SSE_READ_TIMEOUT_SEC: Final = 24 * 3600.0
"""An idle but healthy event stream is not an outage: a dead server ends the stream instead."""


@asynccontextmanager
async def open_sse_streams(
    url: str, headers: dict[str, str], auth: httpx2.Auth | None
) -> AsyncIterator[TransportStreams]:
    """Open the SSE stream at ``url`` and yield the (read, write) pair."""
    async with sse_client(
        url, headers=headers, auth=auth, timeout=SSE_CONNECT_TIMEOUT_SEC, sse_read_timeout=SSE_READ_TIMEOUT_SEC
    ) as streams:
        yield streams
