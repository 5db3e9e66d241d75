"""OAuth for HTTP upstreams: which SDK provider a server gets, in ``run`` and in ``login`` (issue 12).

* ``authorization_code`` (a person): tokens come from ``mcp-supervisor login``
  and live in the token store (:mod:`supervisor.auth.token_store`). In ``run`` the
  provider is headless (:class:`supervisor.compat.oauth.SupervisorOAuthProvider`):
  it refreshes before expiry and once on a 401, and when only a person can
  help it stops, and the transport raises ``UpstreamNeedsLogin``. The actor
  then parks the server in ``needs_login`` and waits for the token file to
  change (``wait_for_new_tokens``).
* ``client_credentials`` (a machine): the SDK's
  ``ClientCredentialsOAuthProvider`` with the configured client and the secret
  read from the environment; tokens stay in memory. A failure is an ordinary
  outage (backoff, as for any other server).

Issue 13 (the rest of the MCP authorization spec), all through the SDK:

* ``client_metadata_url`` (CIMD) is handed to the SDK's provider, which uses
  it as the client id when the authorization server advertises support; a
  configured ``client_id`` (pre-registration) comes first and dynamic
  registration last, the spec's order.
* A scope step-up (``403 insufficient_scope``) in ``run``: headless, the
  missing scope is recorded beside the token file (``login`` asks for the
  union) and the server goes to ``needs_login`` with a message naming the
  scope; a machine grant re-authorizes by itself. At most
  ``MAX_AUTHORIZATIONS_PER_STEP_UP`` authorizations per step-up, counted per
  provider (machine) or per recorded step-up across logins (person).
* ``private_key_file`` + ``signing_algorithm``: the SDK's ``private_key_jwt``
  provider signs each assertion with the key (read under the token file's
  mode rule). Client-credentials providers always get ``issuer=`` (the
  settings require it), as the SDK asks.
* Issuer mismatches and a moved authorization server stop the flow with a
  named reason (:mod:`supervisor.compat.oauth`); the server parks instead of
  retrying.

Issues 30 and 46: how the client authenticates at the token endpoint is one table
(:func:`supervisor.compat.oauth_methods.token_auth_method`). Dynamic registration
asks for a public client (``none``) and then follows what the registration response
names; a configured secret (a pre-registered client's, or ``client_credentials``')
is sent the way ``oauth.token_endpoint_auth_method`` says, and under ``auto`` (the
default) the way the authorization server's metadata offers once it is known.

Nothing here logs a token, a code, a verifier or a secret; error messages name
the server, the token file and the command to run.

Concurrency: ``wait_for_new_tokens`` polls the token file (a stat every
``TOKEN_POLL_SEC``); there is no portable file-change event under trio. Its
caller bounds nothing: it waits until a person logs in or the actor stops.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Final

import httpx2
import trio
from mcp.client.auth.extensions.client_credentials import SignedJWTParameters
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata

from supervisor.auth.token_store import (
    FileTokenStorage,
    KeyFileRefused,
    MemoryTokenStorage,
    TokenFileRefused,
    file_signature,
    read_private_key,
    token_file,
)
from supervisor.compat.oauth import (
    MAX_AUTHORIZATIONS_PER_STEP_UP,
    CappedClientCredentialsProvider,
    CappedPrivateKeyJWTProvider,
    LoginRequired,
    StepUpAwareProvider,
    SupervisorOAuthProvider,
)
from supervisor.compat.oauth_methods import REGISTRATION_METHOD, NoUsableMethodOffered
from supervisor.config.servers import OAuthSettings, ServerSettings
from supervisor.errors import UpstreamNeedsLogin, UpstreamUnavailable

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
        # A dynamic registration asks for a public client. A pre-registered client's metadata is never
        # registered: its record (`fixed_client`) and the setting decide at each token request.
        token_endpoint_auth_method=REGISTRATION_METHOD,
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
        # No method in the record: the table decides at each token request (setting, then metadata).
        scope=" ".join(oauth.scopes) or None,
    )


@dataclass
class RunAuth:
    """The auth of one generation in ``run``: the httpx auth flow and how to tell a needed login."""

    server: str
    auth: httpx2.Auth
    provider: StepUpAwareProvider
    """The provider, which says (``login_required``) when only a person can help."""
    token_file: str | None = None
    """None for client credentials (nothing to log in to: a person fixes the server or the settings)."""
    seen: tuple[int, int, int] | None = None
    """The token file's signature when this generation read it: a login changes it."""

    def needs_login(self) -> UpstreamNeedsLogin | None:
        """The error to raise if the flow found that only a person can help."""
        reason = self.provider.login_required
        if reason is None:
            return None
        if self.token_file is None:
            message = (
                f"server {self.server!r}: {reason}; fix it at the authorization server or in the settings, "
                "then reload the configuration"
            )
            return UpstreamNeedsLogin(self.server, message)
        return UpstreamNeedsLogin(self.server, needs_login_message(self.server, reason), self.token_file, self.seen)


def build_run_auth(server: ServerSettings) -> RunAuth:
    """The auth for one ``run`` generation of ``server`` (which has an ``oauth`` table).

    Raises:
        UpstreamNeedsLogin: An ``authorization_code`` server has no tokens, or its token file is refused.
        ConfigError: The client secret's variable is unset.
    """
    oauth = server.oauth
    assert oauth is not None and server.url is not None
    if not oauth.interactive:
        machine = machine_provider(server)
        return RunAuth(server.name, machine, machine)
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
    headless = SupervisorOAuthProvider(
        server.url,
        client_metadata(oauth, None),
        storage,
        headless=True,
        client_metadata_url=oauth.client_metadata_url,
        on_step_up=partial(record_step_up, storage, server.name),
        configured_client_id=oauth.client_id,
        secret_setting=oauth.token_endpoint_auth_method,
    )
    return RunAuth(server.name, headless, headless, str(path), seen)


def machine_provider(server: ServerSettings) -> StepUpAwareProvider:
    """The ``client_credentials`` provider: a client secret, or a ``private_key_jwt`` key; always ``issuer=``.

    Raises:
        UpstreamUnavailable: The key file is refused (mode, missing): the message says how to fix it.
        ConfigError: The client secret's variable is unset.
    """
    oauth = server.oauth
    assert oauth is not None and server.url is not None and oauth.client_id is not None
    scope = " ".join(oauth.scopes) or None
    if oauth.private_key_file is not None:
        try:
            key = read_private_key(Path(oauth.private_key_file).expanduser(), server.name)
        except KeyFileRefused as exc:
            raise UpstreamUnavailable(server.name, str(exc)) from None
        signer = SignedJWTParameters(
            issuer=oauth.client_id, subject=oauth.client_id, signing_key=key, signing_algorithm=oauth.signing_algorithm
        )
        return CappedPrivateKeyJWTProvider(
            server.url,
            MemoryTokenStorage(),
            oauth.client_id,
            signer.create_assertion_provider(),
            scope=scope,
            issuer=oauth.issuer,
        )
    secret = oauth.client_secret(server.name)
    assert secret is not None  # the settings require a secret or a key for client_credentials
    return CappedClientCredentialsProvider(
        server.url,
        MemoryTokenStorage(),
        oauth.client_id,
        secret,
        secret_method=oauth.token_endpoint_auth_method,
        scope=scope,
        issuer=oauth.issuer,
    )


def record_step_up(storage: FileTokenStorage, server: str, wanted: str, missing: str) -> str:
    """Record a step-up for the next ``login`` (the union of what is pending and ``wanted``); why a person must act.

    One step-up is one recorded scope: while the server keeps asking for no more
    than it, each ``login`` counts an attempt; past the cap the message says
    that logging in again will not help.
    """
    try:
        pending = storage.step_up()
        if pending is not None and set(wanted.split()) <= set(pending[0].split()):
            scope, attempts = pending
        else:
            scope, attempts = union_scopes(pending[0] if pending else None, wanted) or wanted, 0
        storage.set_step_up(scope, attempts)
    except TokenFileRefused:
        attempts = 0  # the token file's own refusal surfaces at the next connect
    reason = f"the server requires scope {missing!r} for this request (insufficient_scope)"
    if attempts >= MAX_AUTHORIZATIONS_PER_STEP_UP:
        reason += (
            f"; {attempts} logins did not get it, so the authorization server does not grant it to you: ask its "
            f"administrator, then run `mcp-supervisor logout {server}`"
        )
    return reason


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
    """Drops the SDK's "OAuth flow error" traceback when the error is one of ours that names its fix.

    A ``LoginRequired`` is an expected outcome in ``run`` (the server parks in
    ``needs_login`` and says so once, in our own words), and a
    ``NoUsableMethodOffered`` says which setting to change: neither is worth a
    traceback, and the one-shot commands must never print one.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], LoginRequired | NoUsableMethodOffered))


logging.getLogger("mcp.client.auth.oauth2").addFilter(_ExpectedLoginRequired())
