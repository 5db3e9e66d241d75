"""The Fronts over MCP streamable HTTP: ``/mcp`` and ``/mcp/<view>``, both protocol eras, under trio.

Each view has its own Front (``serve`` makes them) at its own path: ``/mcp``
serves the default view (everything), ``/mcp/<name>`` the view ``<name>``. A
view is chosen by URL, not by session, so it holds in the 2026 era too, which
has no session to hang it on.

``HttpHostLink.run`` owns one cancel scope holding one SDK
``StreamableHTTPSessionManager`` per Front (its task group, one task per host
session) and the front's HTTP/1.1 server (``ops.http1_server``) serving
``HttpGuard(by path → manager)`` on the configured port (``0``: one the OS picks; ``urls`` and the
``listening`` log line say which). In front of each manager, the Front's own
answer to a plain ``tools/call`` (a 2026 host's: ``host.http.posts``; a
handshake-era session's: ``host.http.sessions``) takes the calls it
can, and passes the rest on. The guard does rebinding protection,
bearer auth with view-bound tokens (a token opens only its views' paths: 403
on any other), and the declared-size check (``ops.http``); each manager
applies the same body limit to streamed bodies and the SDK's own Host/Origin
check with the same names.

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

import contextlib
import logging
from collections.abc import Mapping
from functools import partial

import trio
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from supervisor.config.models import FrontSettings
from supervisor.host.front import Front
from supervisor.host.http.posts import HttpFastCalls
from supervisor.ops.http import HttpGuard, allowed_names
from supervisor.ops.http1_server import serve_http1

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
HOST_CLOSE_GRACE_SEC = 5.0
"""How long closing every host session and the listener may take before we stop waiting."""


def view_path(view: str) -> str:
    """Where a view is served: ``/mcp`` for the default view, ``/mcp/<view>`` for the others."""
    return f"{MCP_PATH}/{view}" if view else MCP_PATH


class _ByPath:
    """ASGI app: each request to the app of its path (the guard already answered 404 for any other)."""

    def __init__(self, apps: Mapping[str, ASGIApp]) -> None:
        self._apps = dict(apps)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._apps[scope["path"]](scope, receive, send)


class HttpHostLink:
    """Serves each view's Front to any number of hosts over streamable HTTP."""

    def __init__(self, fronts: Mapping[str, Front], settings: FrontSettings) -> None:
        self._fronts = dict(fronts)
        self._settings = settings
        names = allowed_names(settings.host)
        sdk_names = [f"[{n}]" if ":" in n else n for n in names]
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[*sdk_names, *(f"{n}:*" for n in sdk_names)],
            allowed_origins=[
                f"{scheme}://{n}{port}" for scheme in ("http", "https") for n in sdk_names for port in ("", ":*")
            ],
        )
        self._managers = {
            view_path(view): StreamableHTTPSessionManager(
                app=front.server, security_settings=security, max_request_body_size=settings.max_request_body_bytes
            )
            for view, front in self._fronts.items()
        }
        self.fast_calls = {
            path: HttpFastCalls(
                self._fronts[view],
                StreamableHTTPASGIApp(self._managers[path]),
                settings.max_request_body_bytes,
                self._managers[path],
            )
            for view, path in ((view, view_path(view)) for view in self._fronts)
        }
        """Per path, the front's own answer to plain 2026 calls before the SDK's app (``host.http.posts``)."""
        self._guard = HttpGuard(
            _ByPath(self.fast_calls),
            token=settings.token,
            scoped_tokens=[(t.secret, frozenset(view_path(v) for v in t.views)) for t in settings.tokens],
            names=names,
            paths=set(self._managers),
            max_body_bytes=settings.max_request_body_bytes,
        )
        self._scope = trio.CancelScope()
        self._done = trio.Event()
        self.urls: list[str] = []
        """Where hosts connect to the default view (``http://HOST:PORT/mcp``, the port really bound), once started."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until ``close`` (or the owner's cancellation); ``urls`` is set before it reports started."""
        try:
            with self._scope:
                async with contextlib.AsyncExitStack() as managers:
                    # Every manager's task group is entered before, and left after, the listener's nursery.
                    for manager in self._managers.values():
                        await managers.enter_async_context(manager.run())
                    async with trio.open_nursery() as nursery:
                        self.urls = await nursery.start(
                            partial(
                                serve_http1,
                                self._guard,
                                host=self._settings.host,
                                port=self._settings.port,
                                settings_key="supervisor.front",
                                url_path=MCP_PATH,
                            )
                        )
                        for view in self._fronts:
                            if view:
                                logger.info("view %s served at %s", view, view_path(view), extra={"view": view})
                        task_status.started()
        finally:
            self._done.set()

    def refuse_new(self) -> None:
        """New HTTP requests get 503 from now on; those already running continue."""
        self._guard.refuse_new()

    async def wait_idle(self) -> None:
        """Return once every running call has finished and its response has been written."""
        for front in self._fronts.values():
            await front.wait_idle()
        await self._guard.wait_idle()

    async def close(self) -> None:
        """End every host session and stop listening (bounded)."""
        self._scope.cancel("mcp-supervisor is stopping")
        with trio.move_on_after(HOST_CLOSE_GRACE_SEC):
            await self._done.wait()
