"""The one place that reads the SDK's stateful streamable-HTTP sessions (STYLE: private names live in compat).

The HTTP front answers a handshake-era session's plain ``tools/call`` itself
(``host.http.sessions``), without handing the POST to the SDK's
``StreamableHTTPSessionManager``. Two things the manager would do for such a
POST must still happen, and both read its private state:

* ``live_session``: the session id names a session the manager still serves,
  opened with the same credential (a request for another credential's
  session is answered as if it did not exist), not terminated, and not past
  its idle timeout (``_server_instances``, ``_session_owners``, the
  transport's ``idle_scope``);
* ``hold``: while the call runs, the session's idle countdown is suspended,
  and it restarts when the last request in flight ends (its release), as
  ``StreamableHTTPServerTransport.handle_request`` does
  (``_requests_in_flight``, ``idle_scope.deadline``).

``tests/compat/test_sdk_sessions.py`` holds both to a real manager.
Synchronous; nothing here awaits (a hold is taken and released without a checkpoint).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager


def live_session(
    manager: StreamableHTTPSessionManager, session_id: str, user: Any
) -> StreamableHTTPServerTransport | None:
    """The transport of the session ``session_id`` if the manager would serve a request for it now, else None.

    ``user``: the ASGI scope's ``user`` (the SDK's own auth sets it; the front's guard does not).
    """
    transport = manager._server_instances.get(session_id)
    if transport is None or transport.is_terminated:
        return None
    requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
    if requestor != manager._session_owners.get(session_id):
        return None
    idle = transport.idle_scope
    if idle is not None and idle.cancel_called:
        return None
    return transport


def hold(transport: StreamableHTTPServerTransport) -> Callable[[], None]:
    """Hold ``transport``'s session open (its idle countdown suspended), as a request in flight; the release.

    The release may be called more than once: only its first call counts.
    """
    idle, timeout = transport.idle_scope, transport._idle_timeout
    if idle is None or timeout is None:
        return _nothing
    transport._requests_in_flight += 1
    idle.deadline = math.inf
    held = True

    def release() -> None:
        nonlocal held
        if not held:
            return
        held = False
        transport._requests_in_flight -= 1
        if not transport._requests_in_flight:
            idle.deadline = anyio.current_time() + timeout

    return release


def _nothing() -> None:
    """The release of a session with no idle countdown."""
