"""``compat.sdk_sessions`` reads the SDK's session manager: held to a real manager that opened a real session.

A session is opened by an ``initialize`` POST through the manager's own ASGI
app (as a host's would be), so the tables read are the ones the SDK fills.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, Final

import trio
from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from supervisor.compat.sdk_sessions import hold, live_session
from tests.host.test_http_front import INITIALIZE
from tests.sidecar import scaled

IDLE_SEC: Final = 30.0


def _user(client_id: str) -> AuthenticatedUser:
    return AuthenticatedUser(AccessToken(token=f"t-{client_id}", client_id=client_id, scopes=[]))


async def _initialize(manager: StreamableHTTPSessionManager, user: Any = None) -> str:
    """POST ``initialize`` through the manager's app; the session id its answer names."""
    body = json.dumps(INITIALIZE).encode()
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-length", str(len(body)).encode()),
    ]
    scope: dict[str, Any] = {
        "type": "http", "method": "POST", "path": "/mcp", "headers": headers,
        "query_string": b"", "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
    }  # fmt: skip
    if user is not None:
        scope["user"] = user
    sent: list[dict[str, Any]] = []
    done = trio.Event()
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            done.set()

    await manager.handle_request(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 200, sent
    session_id: bytes = dict(start["headers"])[b"mcp-session-id"]
    return session_id.decode()


@asynccontextmanager
async def _manager() -> AsyncIterator[StreamableHTTPSessionManager]:
    manager = StreamableHTTPSessionManager(app=Server("t"), session_idle_timeout=IDLE_SEC)
    async with manager.run():
        yield manager


async def test_a_session_is_live_for_its_own_credential_only_and_not_once_terminated() -> None:
    with trio.fail_after(scaled(10)):
        async with _manager() as manager:
            open_id = await _initialize(manager)
            transport = live_session(manager, open_id, None)
            assert transport is not None and transport.mcp_session_id == open_id
            assert live_session(manager, "no-such-session", None) is None
            assert live_session(manager, open_id, _user("someone")) is None  # not the credential that opened it
            owned = await _initialize(manager, _user("ada"))
            assert live_session(manager, owned, _user("ada")) is not None
            assert live_session(manager, owned, _user("bob")) is None
            assert live_session(manager, owned, None) is None
            await transport.terminate()
            assert live_session(manager, open_id, None) is None


async def test_holding_a_session_stops_its_idle_countdown_until_the_last_hold_is_released() -> None:
    with trio.fail_after(scaled(10)):
        async with _manager() as manager:
            transport = live_session(manager, await _initialize(manager), None)
            assert transport is not None and transport.idle_scope is not None
            idle = transport.idle_scope
            assert idle.deadline < float("inf")  # the initialize ended: counting down
            release = hold(transport)
            assert idle.deadline == float("inf")
            release_inner = hold(transport)
            assert idle.deadline == float("inf")
            release_inner()
            release_inner()  # a second release of the same hold counts for nothing
            assert idle.deadline == float("inf")  # one hold is left
            release()
            assert trio.current_time() < idle.deadline <= trio.current_time() + IDLE_SEC
            idle.cancel()  # the countdown ran out: not live any more
            assert live_session(manager, transport.mcp_session_id or "", None) is None
