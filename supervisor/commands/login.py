"""``mcp-supervisor login SERVER`` / ``logout SERVER``: the OAuth authorization-code flow with PKCE (issue 12).

``login`` binds a loopback redirect listener (``RedirectListener``; port
``oauth.redirect_port``, 0 = any free port), then connects to the server with
the SDK's OAuth provider in interactive mode. The server answers 401; the SDK
discovers the protected-resource and authorization-server metadata, registers
a client if none is configured or stored (dynamic registration), and hands us
the authorization URL: we open the user's browser (Python's ``webbrowser``,
which honours ``$BROWSER``) and print the URL in case it does not open. The
browser comes back to the listener with ``code`` and ``state``; the SDK checks
``state``, exchanges the code with its PKCE verifier, and the token store
(:mod:`supervisor.auth.token_store`) writes the tokens. A running sidecar notices
the new file and connects.

The listener binds 127.0.0.1 only, answers only ``GET /callback`` carrying a
``state`` it was told to expect, serves each expected ``state`` once, and
stays open for the rest of the run, so one process can run several
authorizations (a scope step-up, a moved authorization server: issue 13).

Issue 13: the provider gets ``client_metadata_url`` (CIMD), and every
authorization asks for the configured scopes plus a step-up that ``run``
recorded (the union); a login counts as one attempt of that step-up, and past
``MAX_AUTHORIZATIONS_PER_STEP_UP`` attempts ``login`` refuses and says why.
The record is cleared once a login is granted all of it. An issuer mismatch
(RFC 8414 / RFC 9207) ends the login with ``IssuerMismatchRefused``.

Nothing here prints or logs a code, token, verifier or secret: the
authorization URL carries only the PKCE challenge and the state.

Concurrency: ``open_redirect_listener`` owns one nursery (the accept loop and
one task per connection). Each connection's read is bounded
(``CALLBACK_READ_TIMEOUT_SEC``); the whole login is bounded by
``LOGIN_TIMEOUT_SEC`` (a person has to click).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import webbrowser
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final, TextIO
from urllib.parse import parse_qs, urlsplit

import trio
from mcp import Client
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import AuthorizationCodeResult

from supervisor.auth.oauth import client_metadata, fixed_client
from supervisor.auth.token_store import FileTokenStorage, TokenFileRefused, forget, token_file
from supervisor.compat.oauth import (
    MAX_AUTHORIZATIONS_PER_STEP_UP,
    IssuerMismatch,
    SupervisorOAuthProvider,
    missing_scopes,
)
from supervisor.config.models import Settings
from supervisor.config.servers import ServerSettings
from supervisor.errors import ConfigError, SupervisorError
from supervisor.upstream.http import open_http_streams
from supervisor.upstream.session import CLIENT_INFO

logger = logging.getLogger(__name__)

LOGIN_TIMEOUT_SEC: Final = 300.0
"""How long ``login`` waits for the person to finish in the browser."""
CALLBACK_READ_TIMEOUT_SEC: Final = 10.0
MAX_REQUEST_BYTES: Final = 16 * 1024
CALLBACK_PATH: Final = "/callback"
_DONE_PAGE: Final = (
    b"<!doctype html><title>mcp-supervisor</title><p>Logged in. You can close this tab and return to the terminal.</p>"
)


class LoginFailed(SupervisorError):
    """The authorization did not complete; the message says where it stopped (and names no secret)."""


class IssuerMismatchRefused(LoginFailed):
    """The authorization server's metadata issuer (RFC 8414) or response ``iss`` (RFC 9207) did not match."""


class RedirectListener:
    """A loopback HTTP listener that receives authorization redirects; create with ``open_redirect_listener``."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._expected: dict[str, trio.MemorySendChannel[AuthorizationCodeResult | str]] = {}
        self._waiting: dict[str, trio.MemoryReceiveChannel[AuthorizationCodeResult | str]] = {}

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    def expect(self, state: str) -> None:
        """Accept one redirect carrying ``state`` (called with the authorization URL, before the browser opens)."""
        send, receive = trio.open_memory_channel[AuthorizationCodeResult | str](1)
        self._expected[state] = send
        self._waiting[state] = receive

    async def wait(self, state: str) -> AuthorizationCodeResult:
        """The redirect for ``state`` (``expect`` first).

        Raises:
            LoginFailed: The authorization server redirected with an error (e.g. the user denied access).
        """
        receive = self._waiting.pop(state)
        async with receive:
            outcome = await receive.receive()
        if isinstance(outcome, str):
            raise LoginFailed(outcome)
        return outcome

    async def serve(self, listener: trio.SocketListener) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                stream = await listener.accept()
                nursery.start_soon(self._handle, stream)

    async def _handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            status, body = 400, b"bad request"
            with trio.move_on_after(CALLBACK_READ_TIMEOUT_SEC):
                status, body = self._answer(await _read_request_head(stream))
            reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
            head = (
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
            )
            with contextlib.suppress(trio.BrokenResourceError):  # the browser went away: nothing to tell it
                await stream.send_all(head.encode() + body)

    def _answer(self, head: bytes | None) -> tuple[int, bytes]:
        if head is None:
            return 400, b"bad request"
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or parts[0] != b"GET":
            return 400, b"bad request"
        target = urlsplit(parts[1].decode("latin-1"))
        if target.path != CALLBACK_PATH:
            return 404, b"not found"
        query = parse_qs(target.query)
        state = _first(query, "state")
        send = self._expected.pop(state, None) if state is not None else None
        if send is None:
            # Unknown or already used: never a code the SDK did not ask for.
            return 400, b"this login link is unknown or was already used; run mcp-supervisor login again"
        code, error = _first(query, "code"), _first(query, "error")
        if code is None:
            description = _first(query, "error_description") or ""
            send.send_nowait(f"the authorization server refused: {error or 'no code'} {description}".strip())
            return 400, b"authorization refused; see the terminal"
        send.send_nowait(AuthorizationCodeResult(code=code, state=state, iss=_first(query, "iss")))
        return 200, _DONE_PAGE


def _first(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


async def _read_request_head(stream: trio.SocketStream) -> bytes | None:
    buffer = bytearray()
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some(4096)
        if not chunk or len(buffer) + len(chunk) > MAX_REQUEST_BYTES:
            return None
        buffer += chunk
    return bytes(buffer)


@asynccontextmanager
async def open_redirect_listener(port: int) -> AsyncIterator[RedirectListener]:
    """Bind ``127.0.0.1:port`` (0: any free port) and serve redirects until the block ends.

    Raises:
        ConfigError: The port cannot be bound (names ``oauth.redirect_port``).
    """
    try:
        listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on 127.0.0.1:{port} for the login redirect ({exc.strerror}); "
            "set oauth.redirect_port to a free port, or 0 for any"
        ) from exc
    listener = listeners[0]
    redirect = RedirectListener(listener.socket.getsockname()[1])
    async with listener, trio.open_nursery() as nursery:
        nursery.start_soon(redirect.serve, listener)
        yield redirect
        nursery.cancel_scope.cancel()


def _server_for_login(settings: Settings, name: str) -> ServerSettings:
    server = settings.mcp_servers.get(name)
    if server is None:
        known = ", ".join(sorted(settings.mcp_servers)) or "(none)"
        raise ConfigError(f"no server named {name!r} in the settings (configured: {known})")
    if server.oauth is None or server.url is None:
        raise ConfigError(
            f"server {name!r} has no [mcp_servers.{name}.oauth] table; login is for OAuth-protected HTTP servers"
        )
    if not server.oauth.interactive:
        raise ConfigError(
            f'server {name!r} uses grant = "client_credentials": the sidecar gets its own tokens, no login needed'
        )
    return server


async def login(settings: Settings, name: str, *, out: TextIO = sys.stdout) -> None:
    """Run the authorization-code flow for server ``name`` and store its tokens.

    Raises:
        ConfigError: ``name`` is not an OAuth ``authorization_code`` server, or the redirect port is taken.
        LoginFailed: The flow did not complete (refused, timed out, or the server answered with an error).
    """
    server = _server_for_login(settings, name)
    oauth, url = server.oauth, server.url
    assert oauth is not None and url is not None
    path = token_file(oauth, name)
    step_up = _count_step_up_login(FileTokenStorage(path, name, url), name)
    failure: LoginFailed | None = None
    with trio.move_on_after(LOGIN_TIMEOUT_SEC) as timeout:
        async with open_redirect_listener(oauth.redirect_port) as listener:
            storage = FileTokenStorage(path, name, url, fixed_client(server, listener.redirect_uri))
            try:
                stored = storage.stored_client()
            except TokenFileRefused:
                stored = None  # login replaces a refused file
            registered_here = (
                stored is not None
                and listener.redirect_uri in [str(u) for u in stored.redirect_uris or []]
                and stored.client_id != oauth.client_metadata_url
            )
            # A login always asks the person again; a dynamic registration for another redirect port is useless.
            # A CIMD client is made afresh (no request), so it is stamped with the issuer this login uses.
            storage.clear_tokens(keep_client=registered_here)

            states: list[str] = []

            async def open_browser(authorization_url: str) -> None:
                state = _first(parse_qs(urlsplit(authorization_url).query), "state")
                if state is None:
                    raise LoginFailed(f"server {name!r}: the authorization URL carries no state; refusing it")
                listener.expect(state)
                states.append(state)
                await _open_browser(name, authorization_url)

            async def wait_for_redirect() -> AuthorizationCodeResult:
                # The SDK calls this right after open_browser, for the state it just generated.
                return await listener.wait(states.pop())

            provider = SupervisorOAuthProvider(
                url,
                client_metadata(oauth, listener.redirect_uri),
                storage,
                headless=False,
                redirect_handler=open_browser,
                callback_handler=wait_for_redirect,
                client_metadata_url=oauth.client_metadata_url,
                extra_scope=union_scopes(" ".join(oauth.scopes) or None, step_up),
                configured_client_id=oauth.client_id,
                secret_setting=oauth.token_endpoint_auth_method,
            )
            try:
                async with Client(
                    open_http_streams(server, dict(server.http_headers), provider),
                    mode=server.protocol,
                    client_info=CLIENT_INFO,
                ):
                    pass
            except Exception as exc:
                # Raised outside the listener's nursery, so the CLI sees one error, not a group.
                failure = _login_error(name, exc)
    if failure is not None:
        raise failure
    if timeout.cancelled_caught:
        raise LoginFailed(f"server {name!r}: login did not finish within {LOGIN_TIMEOUT_SEC:g}s; run it again")
    if not storage.has_tokens():
        raise LoginFailed(f"server {name!r}: the server accepted the connection without asking for a login")
    tokens = storage.load_tokens()
    if step_up is not None and tokens is not None and not missing_scopes(step_up, tokens.scope):
        storage.set_step_up("", 0)  # granted: that step-up is over
    print(f"logged in to {name!r}; tokens stored in {path}", file=out)


def _count_step_up_login(storage: FileTokenStorage, name: str) -> str | None:
    """The scope of a pending step-up, counting this login as one attempt at it.

    Raises:
        LoginFailed: ``MAX_AUTHORIZATIONS_PER_STEP_UP`` logins already asked for it in vain.
    """
    pending = storage.step_up()
    if pending is None:
        return None
    scope, attempts = pending
    if attempts >= MAX_AUTHORIZATIONS_PER_STEP_UP:
        raise LoginFailed(
            f"server {name!r}: {attempts} logins asked for scope {scope!r} (a step-up the server requires) and the "
            "authorization server did not grant it; ask its administrator to grant it, then run "
            f"`mcp-supervisor logout {name}` and log in again"
        )
    storage.set_step_up(scope, attempts + 1)
    return scope


def _login_error(name: str, exc: BaseException) -> LoginFailed:
    """One named error for whatever the flow raised; SDK messages carry no secrets, so theirs is kept."""
    leaf: BaseException = exc
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    if isinstance(leaf, LoginFailed):
        return leaf
    if isinstance(leaf, IssuerMismatch):
        return IssuerMismatchRefused(f"server {name!r}: login refused, issuer mismatch: {leaf}")
    if isinstance(leaf, OAuthFlowError):
        return LoginFailed(f"server {name!r}: login failed: {leaf}")
    return LoginFailed(f"server {name!r}: login failed: {type(leaf).__name__}: {leaf}")


async def _open_browser(name: str, url: str) -> None:
    print(
        f"Log in to {name!r} in your browser. If it does not open, visit this URL:\n  {url}",
        file=sys.stderr,
        flush=True,
    )
    # webbrowser blocks (a $BROWSER command runs to completion): in a thread, abandoned if the login ends.
    opened = await trio.to_thread.run_sync(webbrowser.open, url, abandon_on_cancel=True)
    if not opened:
        print("No browser could be opened; open the URL above yourself.", file=sys.stderr, flush=True)


def logout(settings: Settings, name: str, *, out: TextIO = sys.stdout) -> None:
    """Forget the stored tokens (and dynamic registration) of server ``name``."""
    server = settings.mcp_servers.get(name)
    if server is None or server.oauth is None:
        raise ConfigError(f"server {name!r} is not an OAuth server in the settings; nothing to log out of")
    path = token_file(server.oauth, name)
    if forget(path):
        print(f"logged out of {name!r}; removed {path}", file=out)
    else:
        print(f"no tokens were stored for {name!r} ({path})", file=out)
