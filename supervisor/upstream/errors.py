"""Translating SDK and transport failures of one upstream generation into ``UpstreamError`` (once, here).

``ErrorTranslator`` maps what one request raised; ``connect_error`` what
entering the client raised (often nested exception groups), and
``enter_client`` enters it so; ``teardown_error`` says what leaving it must
raise instead of what it raised (transport failures, split off by
``split_teardown_errors``, mark the generation lost). Either way a stop that
meets a failure stays a stop (``stop_of``): a group of ``Cancelled`` and
failures would outlive the scope that takes the ``Cancelled``, and end the
sidecar. Synchronous, but for ``enter_client``.

A server's JSON-RPC error passes through to the host where the caller asks
(``passthrough``), except -32700: a parse error is about the request the host
never wrote, or (far more often) the SDK's transport saying the *server's*
response could not be parsed (an ``application/json`` body holding two
messages, say). Passed on, the host would read "your request was not JSON";
it is an ``UpstreamProtocolError`` naming the server instead (issue 30).
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, Final

import anyio
import httpx2
import trio
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, PARSE_ERROR
from pydantic import ValidationError

from supervisor.errors import UpstreamProtocolError, UpstreamUnavailable, first_leaf
from supervisor.upstream.health import TransportHealth

logger = logging.getLogger(__name__)


class ErrorTranslator:
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
                # Only a transport's own explanation (a refused scope), not whatever closed it first.
                why = self._health.explain() if self._health.explain is not None else None
                detail = f": {self._health.redact(why)}" if why else ""
                raise UpstreamUnavailable(server, f"server {server!r}: connection lost during {what}{detail}") from exc
            if exc.code == PARSE_ERROR:
                raise UpstreamProtocolError(
                    server, f"server {server!r}: {what}: the answer could not be parsed ({exc.error.message})"
                ) from exc
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


TEARDOWN_ERRORS: Final = (httpx2.TransportError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


def split_teardown_errors(raised: BaseException) -> tuple[BaseException | None, BaseException | None]:
    """Split what leaving the client raised into (transport failures, everything else)."""
    if isinstance(raised, BaseExceptionGroup):
        return raised.split(TEARDOWN_ERRORS)
    if isinstance(raised, TEARDOWN_ERRORS):
        return raised, None
    return None, raised


async def enter_client(
    stack: AsyncExitStack, client: AbstractAsyncContextManager[Any], name: str, health: TransportHealth
) -> None:
    """Enter ``client`` on ``stack``; what that raised as one error (``connect_error``), and a stop as a stop.

    A generation stopped mid-handshake (a reload's restart, a shutdown) can see
    its transport fail at the same moment (the child's pipes close): the client
    then raises a group of ``Cancelled`` and that failure, which is no
    ``Exception``. Its cancel scope takes the ``Cancelled`` out and would
    re-raise the rest, which no scope takes: the sidecar fell over (seen in CI,
    ``test_reload``). The failure of a handshake that was being stopped is moot,
    so only the ``Cancelled`` goes on.
    """
    try:
        await stack.enter_async_context(client)
    except Exception as exc:
        raise connect_error(name, health, exc) from exc
    except BaseExceptionGroup as group:
        stop = stop_of(group)
        if stop is None:
            raise
        raise stop from None


def stop_of(raised: BaseException) -> BaseException | None:
    """The ``Cancelled`` of a group that also holds failures (a stop that met them); None for anything else.

    The failures of something being stopped are moot: raised with the stop, they
    would outlive the cancel scope that takes the ``Cancelled``.
    """
    if not isinstance(raised, BaseExceptionGroup):
        return None
    cancelled, failures = raised.split(trio.Cancelled)
    return cancelled if cancelled is not None and failures is not None else None


def teardown_error(
    raised: BaseException, name: str, health: TransportHealth, body_failed: bool
) -> BaseException | None:
    """What leaving a generation's client must raise for ``raised`` (``raised`` itself: as it is; None: nothing).

    A transport failure marks the generation lost; it is the generation's
    ``UpstreamUnavailable`` when it cut the generation short (``body_failed``),
    and nothing more when the generation was ending anyway. Whatever else was
    raised goes on, but a stop that met failures goes on as the stop alone.
    """
    teardown, rest = split_teardown_errors(raised)
    if teardown is None:
        return stop_of(raised) or raised
    logger.debug("server=%s client teardown raised %r", name, teardown)
    reason = first_leaf(teardown)
    health.mark_lost(f"transport failed: {reason!r}")
    if rest is not None:
        return stop_of(rest) or rest  # e.g. the Cancelled of a shutdown: let it reach its scope
    if body_failed:
        error = UpstreamUnavailable(name, f"server {name!r}: transport failed: {reason}")
        error.__cause__ = teardown
        return error
    return None


def connect_error(name: str, health: TransportHealth, exc: Exception) -> UpstreamUnavailable | UpstreamProtocolError:
    """Translate whatever ``Client.__aenter__`` raised (often nested groups) into one error."""
    leaf = first_leaf(exc)
    if isinstance(leaf, UpstreamUnavailable):
        return leaf  # the transport already said what is wrong (e.g. UpstreamNeedsLogin)
    if isinstance(leaf, MCPError) and leaf.code != CONNECTION_CLOSED:
        return UpstreamProtocolError(name, f"server {name!r}: handshake failed: {leaf.error.message}")
    if isinstance(leaf, FileNotFoundError | PermissionError | NotADirectoryError):
        return UpstreamUnavailable(name, f"server {name!r} could not be started: {leaf}")
    reason = health.reason or health.redact(f"{type(leaf).__name__}: {leaf}")
    return UpstreamUnavailable(name, f"server {name!r} failed during the handshake: {reason}")
