"""The Front over MCP streamable HTTP: ``http://<host>:<port>/mcp``, both protocol eras, under trio.

``HttpHostLink.run`` owns one cancel scope holding the SDK's
``StreamableHTTPSessionManager`` (its task group, one task per host session)
and hypercorn's trio worker serving ``HttpGuard(StreamableHTTPASGIApp)`` on the
configured port (``0``: one the OS picks; ``urls`` and the ``listening`` log
line say which). The guard does rebinding protection, bearer auth and the
declared-size check (``ops.http``); the manager applies the same body limit to
streamed bodies and the SDK's own Host/Origin check with the same names.

2026-era hosts get change notices over ``subscriptions/listen`` (the Front's
bus); handshake-era hosts over their session's standalone GET stream (the
Front captures each connection at ``notifications/initialized`` and drops it
when the session ends).

Graceful stop, driven by ``serve``: ``refuse_new`` (new requests get 503),
``wait_idle`` (calls already running finish and their POST responses are
written; the caller bounds it with ``shutdown_grace_sec``), then ``close``
cancels the scope: the session manager terminates every host session, the
listeners close. ``close`` waits at most ``HOST_CLOSE_GRACE_SEC``.
"""

from __future__ import annotations

import logging
from functools import partial

import trio
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from supervisor.config.models import FrontSettings
from supervisor.host.front import Front
from supervisor.ops.http import HttpGuard, allowed_names, serve_asgi

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
HOST_CLOSE_GRACE_SEC = 5.0
"""How long closing every host session and the listener may take before we stop waiting."""


class HttpHostLink:
    """Serves the Front to any number of hosts over streamable HTTP."""

    def __init__(self, front: Front, settings: FrontSettings) -> None:
        self._front = front
        self._settings = settings
        names = allowed_names(settings.host)
        sdk_names = [f"[{n}]" if ":" in n else n for n in names]
        self._manager = StreamableHTTPSessionManager(
            app=front.server,
            security_settings=TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=[*sdk_names, *(f"{n}:*" for n in sdk_names)],
                allowed_origins=[
                    f"{scheme}://{n}{port}" for scheme in ("http", "https") for n in sdk_names for port in ("", ":*")
                ],
            ),
            max_request_body_size=settings.max_request_body_bytes,
        )
        self._guard = HttpGuard(
            StreamableHTTPASGIApp(self._manager),
            token=settings.token,
            names=names,
            paths={MCP_PATH},
            max_body_bytes=settings.max_request_body_bytes,
        )
        self._scope = trio.CancelScope()
        self._done = trio.Event()
        self.urls: list[str] = []
        """Where hosts connect (``http://HOST:PORT/mcp``, the port really bound), once ``run`` has started."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until ``close`` (or the owner's cancellation); ``urls`` is set before it reports started."""
        try:
            with self._scope:
                async with self._manager.run(), trio.open_nursery() as nursery:
                    self.urls = await nursery.start(
                        partial(
                            serve_asgi,
                            self._guard,
                            host=self._settings.host,
                            port=self._settings.port,
                            settings_key="supervisor.front",
                            url_path=MCP_PATH,
                        )
                    )
                    task_status.started()
        finally:
            self._done.set()

    def refuse_new(self) -> None:
        """New HTTP requests get 503 from now on; those already running continue."""
        self._guard.refuse_new()

    async def wait_idle(self) -> None:
        """Return once every running call has finished and its response has been written."""
        await self._front.wait_idle()
        await self._guard.wait_idle()

    async def close(self) -> None:
        """End every host session and stop listening (bounded)."""
        self._scope.cancel("mcp-supervisor is stopping")
        with trio.move_on_after(HOST_CLOSE_GRACE_SEC):
            await self._done.wait()
