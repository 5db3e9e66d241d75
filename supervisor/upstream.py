"""One upstream generation: a transport plus one connected ``mcp.Client``.

``open_upstream`` is the seam between the ServerActor and the SDK. It yields an
``Upstream`` whose methods translate SDK and transport failures into the
supervisor's ``UpstreamError`` family exactly once, here.

Change notices differ by protocol era (DESIGN §7): handshake-era servers send
``notifications/tools/list_changed`` to the client's ``message_handler``;
2026-era servers only deliver them on an open ``subscriptions/listen`` stream,
which this module holds open in a task for the generation's lifetime. Both
paths call the same ``on_tools_changed`` callback, which must not block (the
ServerActor enqueues into its mailbox without waiting).

Nursery: ``open_upstream`` owns one nursery for the listen task and the
transport's own pumps; it is closed when the generation ends. Waits here are
unbounded on purpose: the ServerActor bounds connect/list with
``startup_timeout_sec`` and calls with ``tool_timeout_sec``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import anyio
import httpx2
import mcp_types as types
import trio
from mcp import Client, MCPError
from mcp.client.caching import CacheConfig, CacheMode
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from supervisor._version import __version__
from supervisor.errors import UpstreamProtocolError, UpstreamUnavailable, first_leaf
from supervisor.settings import ServerSettings
from supervisor.upstream_stdio import TransportHealth, open_stdio_transport

logger = logging.getLogger(__name__)

MAX_LIST_PAGES: Final = 1000
"""A paginator that never ends cannot hang a sync."""
SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"
CLIENT_INFO: Final = types.Implementation(name="mcp-supervisor", version=__version__)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who answered: ``name@version`` as reported, or None for an anonymous server."""

    name: str | None
    version: str | None

    def __str__(self) -> str:
        if self.name is None:
            return "anonymous"
        return f"{self.name}@{self.version or '?'}"


class Upstream:
    """A connected generation of one server. Created only by ``open_upstream``."""

    def __init__(self, settings: ServerSettings, client: Client, health: TransportHealth) -> None:
        self._settings = settings
        self._client = client
        self.health = health

    @property
    def protocol_version(self) -> str:
        return self._client.protocol_version

    @property
    def modern(self) -> bool:
        return self._client.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def identity(self) -> Identity:
        info = self._client.server_info
        return Identity(None, None) if info is None else Identity(info.name, info.version)

    async def list_all_tools(self, cache_mode: CacheMode) -> list[types.Tool]:
        """Fetch every page of ``tools/list``.

        Raises:
            UpstreamUnavailable: The connection died.
            UpstreamProtocolError: The server answered with an error or an invalid listing.
        """
        name = self._settings.name
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            with self._translate_errors("tools/list"):
                page = await self._client.list_tools(cursor=cursor, cache_mode=cache_mode)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools
        raise UpstreamProtocolError(name, f"server {name!r}: tools/list did not end after {MAX_LIST_PAGES} pages")

    async def call_tool(self, raw_name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Call one tool by its raw name and return the result without the upstream's serverInfo stamp.

        An ``MCPError`` the server answered with is re-raised unchanged (the host
        must see the original error); a dead connection becomes ``UpstreamUnavailable``.
        """
        with self._translate_errors(f"tools/call {raw_name}", passthrough_server_errors=True):
            result = await self._client.call_tool(raw_name, arguments)
        if result.meta and SERVER_INFO_META_KEY in result.meta:
            meta = {key: value for key, value in result.meta.items() if key != SERVER_INFO_META_KEY}
            result = result.model_copy(update={"meta": meta or None})
        return result

    @property
    def has_resources(self) -> bool:
        return self._client.server_capabilities.resources is not None

    async def list_all_resources(self) -> list[types.Resource]:
        """Every page of ``resources/list``, always from the server (I9: ``bypass``)."""
        resources: list[types.Resource] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            with self._translate_errors("resources/list", passthrough_server_errors=True):
                page = await self._client.list_resources(cursor=cursor, cache_mode="bypass")
            resources.extend(page.resources)
            cursor = page.next_cursor
            if cursor is None:
                break
        return resources

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read one resource, always from the server (I9: ``bypass``); stamp stripped like calls."""
        with self._translate_errors(f"resources/read {uri}", passthrough_server_errors=True):
            result = await self._client.read_resource(uri, cache_mode="bypass")
        if result.meta and SERVER_INFO_META_KEY in result.meta:
            meta = {key: value for key, value in result.meta.items() if key != SERVER_INFO_META_KEY}
            result = result.model_copy(update={"meta": meta or None})
        return result

    def _translate_errors(self, what: str, *, passthrough_server_errors: bool = False) -> _ErrorTranslator:
        return _ErrorTranslator(self._settings.name, what, self.health, passthrough_server_errors)


class _ErrorTranslator:
    """Context manager mapping SDK/transport failures of one request to ``UpstreamError``."""

    def __init__(self, server: str, what: str, health: TransportHealth, passthrough: bool) -> None:
        self._server = server
        self._what = what
        self._health = health
        self._passthrough = passthrough

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or not isinstance(exc, Exception):
            return
        server, what = self._server, self._what
        if isinstance(exc, MCPError):
            if exc.code == CONNECTION_CLOSED:
                self._health.mark_lost("connection closed")
                raise UpstreamUnavailable(server, f"server {server!r}: connection lost during {what}") from exc
            if self._passthrough:
                return
            raise UpstreamProtocolError(server, f"server {server!r}: {what} failed: {exc.error.message}") from exc
        if isinstance(exc, ValidationError):
            raise UpstreamProtocolError(
                server, f"server {server!r}: {what} returned an invalid result ({exc.error_count()} errors)"
            ) from exc
        if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | httpx2.TransportError | OSError):
            self._health.mark_lost(f"{type(exc).__name__}: {exc}")
            raise UpstreamUnavailable(server, f"server {server!r}: transport failed during {what}: {exc}") from exc


@asynccontextmanager
async def _open_http_transport(settings: ServerSettings, health: TransportHealth) -> AsyncIterator[tuple[Any, Any]]:
    """Streamable-HTTP transport whose failures end the generation.

    The SDK reports transport failures as exception values on the read stream
    and keeps the session open; this relay marks the generation lost on the
    first such value and when the stream ends.
    """
    assert settings.url is not None
    headers = dict(settings.http_headers)
    if (token := settings.bearer_token()) is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with (
        create_mcp_http_client(headers=headers) as http_client,
        streamable_http_client(settings.url, http_client=http_client) as (upstream_read, upstream_write),
    ):
        to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with to_session:
                async for item in upstream_read:
                    if isinstance(item, Exception):
                        health.mark_lost(f"HTTP transport error: {item}")
                    await to_session.send(item)
            health.mark_lost("HTTP stream ended")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay)
            try:
                yield read_stream, upstream_write
            finally:
                nursery.cancel_scope.cancel()


def _open_transport(settings: ServerSettings, health: TransportHealth) -> AbstractAsyncContextManager[Any]:
    if settings.transport == "stdio":
        return open_stdio_transport(settings, health)
    return _open_http_transport(settings, health)


@asynccontextmanager
async def open_upstream(
    settings: ServerSettings,
    *,
    on_tools_changed: Callable[[], None],
    cache: CacheConfig | None = None,
) -> AsyncIterator[Upstream]:
    """Connect one generation of ``settings`` and keep its change notices flowing.

    Raises:
        UpstreamUnavailable: The server could not be started or reached, or hung up during the handshake.
        UpstreamProtocolError: The handshake failed.
    """
    name = settings.name
    health = TransportHealth()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            on_tools_changed()
        elif isinstance(message, Exception):
            logger.debug("server=%s transport reported %r", name, message)
        await trio.lowlevel.checkpoint()

    client = Client(
        _open_transport(settings, health),
        mode="auto",
        message_handler=on_message,
        client_info=CLIENT_INFO,
        cache=cache,
    )
    # The client is entered through an exit stack, so that on the way out it sees
    # the exception leaving the generation: the HTTP transport runs a task group
    # in this task, and a failed request cancels it; only the client's own exit,
    # given that Cancelled, can absorb it (and report the failure instead).
    stack = AsyncExitStack()
    try:
        await stack.enter_async_context(client)
    except Exception as exc:
        raise _connect_error(name, health, exc) from exc
    upstream = Upstream(settings, client, health)
    body_failed = False
    try:
        async with stack, trio.open_nursery() as nursery:
            if upstream.modern:
                await nursery.start(_listen_for_tool_changes, client, name, health, on_tools_changed)
            try:
                yield upstream
            except BaseException:
                body_failed = True
                raise
            nursery.cancel_scope.cancel()
    except BaseException as raised:
        teardown, rest = _split_teardown_errors(raised)
        if teardown is None:
            raise
        logger.debug("server=%s client teardown raised %r", name, teardown)
        health.mark_lost(f"transport failed: {first_leaf(teardown)!r}")
        if rest is not None:
            raise rest from None  # e.g. the Cancelled of a shutdown: let it reach its scope
        if body_failed:
            # The transport's failure interrupted the generation: report it as such.
            raise UpstreamUnavailable(name, f"server {name!r}: transport failed: {first_leaf(teardown)}") from teardown


_TEARDOWN_ERRORS: Final = (httpx2.TransportError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


def _split_teardown_errors(raised: BaseException) -> tuple[BaseException | None, BaseException | None]:
    """Split what leaving the client raised into (transport failures, everything else)."""
    if isinstance(raised, BaseExceptionGroup):
        return raised.split(_TEARDOWN_ERRORS)
    if isinstance(raised, _TEARDOWN_ERRORS):
        return raised, None
    return None, raised


def _connect_error(name: str, health: TransportHealth, exc: Exception) -> UpstreamUnavailable | UpstreamProtocolError:
    """Translate whatever ``Client.__aenter__`` raised (often nested groups) into one error."""
    leaf = first_leaf(exc)
    if isinstance(leaf, MCPError) and leaf.code != CONNECTION_CLOSED:
        return UpstreamProtocolError(name, f"server {name!r}: handshake failed: {leaf.error.message}")
    if isinstance(leaf, FileNotFoundError | PermissionError | NotADirectoryError):
        return UpstreamUnavailable(name, f"server {name!r} could not be started: {leaf}")
    reason = health.reason or f"{type(leaf).__name__}: {leaf}"
    return UpstreamUnavailable(name, f"server {name!r} failed during the handshake: {reason}")


async def _listen_for_tool_changes(
    client: Client,
    name: str,
    health: TransportHealth,
    on_tools_changed: Callable[[], None],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Hold a ``subscriptions/listen`` stream open and forward tool-list changes (2026 era).

    An established stream that drops abruptly means the connection is gone (over
    HTTP nothing else would tell us until the next call), so it ends the generation.
    """
    started = False
    try:
        async with client.listen(tools_list_changed=True) as subscription:
            task_status.started()
            started = True
            async for _event in subscription:
                on_tools_changed()
    except SubscriptionLost as exc:
        if started:
            health.mark_lost("the change-notice stream dropped")
        logger.debug("server=%s: tools list_changed stream lost (%r)", name, exc)
    except (ListenNotSupportedError, MCPError, TimeoutError) as exc:
        logger.debug("server=%s: no tools list_changed stream (%r)", name, exc)
    finally:
        if not started:
            task_status.started()
