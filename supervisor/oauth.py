"""OAuth for HTTP upstreams: which SDK provider a server gets, in ``run`` and in ``login`` (issue 12).

* ``authorization_code`` (a person): tokens come from ``mcp-supervisor login``
  and live in the token store (:mod:`supervisor.token_store`). In ``run`` the
  provider is headless (:class:`supervisor._compat_oauth.SupervisorOAuthProvider`):
  it refreshes before expiry and once on a 401, and when only a person can
  help it stops, and the transport raises ``UpstreamNeedsLogin``. The actor
  then parks the server in ``needs_login`` and waits for the token file to
  change (``wait_for_new_tokens``).
* ``client_credentials`` (a machine): the SDK's
  ``ClientCredentialsOAuthProvider`` with the configured client and the secret
  read from the environment; tokens stay in memory. A failure is an ordinary
  outage (backoff, as for any other server).

Seams for what comes next (issue 13: CIMD, scope step-up, private_key_jwt,
issuer checks, authorization-server migration): ``client_metadata`` is where a
``client_metadata_url`` joins, ``build_run_auth`` is where another grant picks
its provider, and ``UpstreamNeedsLogin`` carries the reason a step-up would
name.

Nothing here logs a token, a code, a verifier or a secret; error messages name
the server, the token file and the command to run.

Concurrency: ``wait_for_new_tokens`` polls the token file (a stat every
``TOKEN_POLL_SEC``); there is no portable file-change event under trio. Its
caller bounds nothing: it waits until a person logs in or the actor stops.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx2
import trio
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata

from supervisor._compat_oauth import LoginRequired, SupervisorOAuthProvider
from supervisor.errors import UpstreamNeedsLogin
from supervisor.settings import OAuthSettings, ServerSettings
from supervisor.token_store import FileTokenStorage, MemoryTokenStorage, TokenFileRefused, file_signature, token_file

logger = logging.getLogger(__name__)

CLIENT_NAME: Final = "mcp-supervisor"
TOKEN_POLL_SEC: Final = 0.25
"""How often a server in ``needs_login`` looks at its token file."""


def login_command(server: str) -> str:
    return f"mcp-supervisor login {server}"


def needs_login_message(server: str, reason: str) -> str:
    """The one sentence status, ``/status``, the log and a failed call show for a server that needs a person."""
    return f"server {server!r} needs login ({reason}); run `{login_command(server)}`"


def client_metadata(oauth: OAuthSettings, redirect_uri: str | None) -> OAuthClientMetadata:
    """What the client registers (dynamic registration) or presents (pre-registered)."""
    return OAuthClientMetadata(
        redirect_uris=[redirect_uri] if redirect_uri is not None else ["http://127.0.0.1/callback"],  # type: ignore[list-item]
        client_name=CLIENT_NAME,
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=" ".join(oauth.scopes) or None,
        token_endpoint_auth_method="client_secret_post" if oauth.client_secret_env_var else "none",
    )


def fixed_client(server: ServerSettings, redirect_uri: str | None) -> OAuthClientInformationFull | None:
    """The pre-registered client (``oauth.client_id``), with its secret read now; None for dynamic registration."""
    oauth = server.oauth
    if oauth is None or oauth.client_id is None:
        return None
    secret = oauth.client_secret(server.name)
    return OAuthClientInformationFull(
        client_id=oauth.client_id,
        client_secret=secret,
        redirect_uris=[redirect_uri] if redirect_uri is not None else None,  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method="client_secret_post" if secret is not None else "none",
        scope=" ".join(oauth.scopes) or None,
    )


@dataclass
class RunAuth:
    """The auth of one generation in ``run``: the httpx auth flow and how to tell a needed login."""

    server: str
    auth: httpx2.Auth
    provider: SupervisorOAuthProvider | None
    """The headless provider (``authorization_code``); None for client credentials."""
    token_file: str | None = None
    seen: tuple[int, int, int] | None = None
    """The token file's signature when this generation read it: a login changes it."""

    def needs_login(self) -> UpstreamNeedsLogin | None:
        """The error to raise if the flow found that only a person can help."""
        if self.provider is None or self.provider.login_required is None:
            return None
        return UpstreamNeedsLogin(
            self.server, needs_login_message(self.server, self.provider.login_required), self.token_file, self.seen
        )


def build_run_auth(server: ServerSettings) -> RunAuth:
    """The auth for one ``run`` generation of ``server`` (which has an ``oauth`` table).

    Raises:
        UpstreamNeedsLogin: An ``authorization_code`` server has no tokens, or its token file is refused.
        ConfigError: The client secret's variable is unset.
    """
    oauth = server.oauth
    assert oauth is not None and server.url is not None
    if not oauth.interactive:
        assert oauth.client_id is not None
        secret = oauth.client_secret(server.name)
        assert secret is not None  # the settings require client_secret_env_var for client_credentials
        provider: OAuthClientProvider = ClientCredentialsOAuthProvider(
            server.url,
            MemoryTokenStorage(),
            oauth.client_id,
            secret,
            token_endpoint_auth_method="client_secret_post",
            scope=" ".join(oauth.scopes) or None,
            issuer=oauth.issuer,
        )
        return RunAuth(server.name, provider, None)
    path = token_file(oauth, server.name)
    seen = file_signature(path)
    storage = FileTokenStorage(path, server.name, server.url, fixed_client(server, None))
    try:
        stored = storage.has_tokens()
    except TokenFileRefused as exc:
        raise UpstreamNeedsLogin(server.name, str(exc), str(path), seen) from exc
    if not stored:
        raise UpstreamNeedsLogin(
            server.name, needs_login_message(server.name, f"no tokens stored in {path}"), str(path), seen
        )
    headless = SupervisorOAuthProvider(server.url, client_metadata(oauth, None), storage, headless=True)
    return RunAuth(server.name, headless, headless, str(path), seen)


async def wait_for_new_tokens(error: UpstreamNeedsLogin) -> None:
    """Return once the token file named by ``error`` has changed since the failed generation read it."""
    if error.token_file is None:
        await trio.sleep_forever()  # nothing to watch: a reload or a restart brings the server back
    path = Path(error.token_file)
    while True:
        current = file_signature(path)
        if current is not None and current != error.seen:
            return
        # Polling: no portable "this file was replaced" event under trio.
        await trio.sleep(TOKEN_POLL_SEC)


class _ExpectedLoginRequired(logging.Filter):
    """Drops the SDK's "OAuth flow error" traceback when the error is our ``LoginRequired``.

    That is an expected outcome in ``run`` (the server parks in ``needs_login``
    and says so once, in our own words), not an error worth a traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], LoginRequired))


logging.getLogger("mcp.client.auth.oauth2").addFilter(_ExpectedLoginRequired())
