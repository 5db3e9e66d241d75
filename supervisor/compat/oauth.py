"""The one place that overrides private hooks of the SDK's OAuth client provider (mcp 2.3).

Kept apart from :mod:`supervisor.compat.sdk` (same rule: an SDK upgrade that moves
one of these breaks here, loudly; ``tests/auth/test_oauth_unit.py`` checks each hook
still exists). ``SupervisorOAuthProvider`` is the SDK's ``OAuthClientProvider``
with three changes the sidecar needs:

* **Expiry survives a restart.** The SDK's ``_initialize`` loads stored tokens
  but not their expiry, so a restarted sidecar would send an expired token and
  take the 401 path. The store recomputes ``expires_in`` from the absolute
  expiry it saved, and ``_initialize`` applies it.
* **Refresh before expiry.** ``OAuthContext.update_token_expiry`` (public) is
  overridden to set the expiry a margin early (``refresh_margin_sec``), so the
  SDK refreshes before the server starts refusing the token.
* **Never a person in ``run``.** With ``headless``, a 401 is answered by one
  refresh (``_perform_authorization`` returns the refresh request instead of
  sending anyone to a browser), its response is handled as a refresh (the
  refresh token is carried forward when the server does not rotate it), and
  when no refresh can help the flow stops with ``LoginRequired`` and sets
  ``login_required``, which the transport turns into ``UpstreamNeedsLogin``.

Issue 13 adds, on the same hooks plus ``_auth_flow`` and ``_expected_issuer``:

* **Scope step-up seen.** ``StepUpAwareProvider._auth_flow`` wraps the SDK's flow and
  notes a ``403`` with ``error="insufficient_scope"`` (the SDK then discovers,
  unions the scopes and calls ``_perform_authorization``). Headless, that is a
  ``StepUpNeeded`` naming the missing scope (recorded for the next ``login``);
  a machine grant re-authorizes by itself. Either way at most
  ``MAX_AUTHORIZATIONS_PER_STEP_UP`` authorizations per step-up, then
  ``StepUpRefused``.
* **A moved authorization server, named.** Headless, when the protected
  resource names another authorization server than the one the stored client
  was registered with, the flow stops with ``AuthorizationServerMoved`` before
  it would register anywhere (``login`` re-registers, or re-uses the CIMD).
* **Issuer checks, named.** The SDK's RFC 8414 metadata-issuer and RFC 9207
  ``iss`` checks raise a plain ``OAuthFlowError``; ``_auth_flow`` re-raises
  those as ``IssuerMismatch``, which stops the flow (never a silent retry).

Issues 30 and 46, on the context's public ``prepare_token_auth`` and ``can_refresh_token``:

* **The client authenticates the way the authorization server says.** The SDK
  sends a secret the way the client record names (``token_endpoint_auth_method``).
  ``compat.oauth_context.TokenAuthContext.prepare_token_auth`` decides the method at every token
  request instead, from one table (``compat.oauth_methods.token_auth_method``):
  a dynamically registered client the way its registration response named (a
  public client stays public when a server hands it a secret anyway); a
  configured one (pre-registered, ``client_credentials``) by the setting, then
  the metadata (``token_endpoint_auth_methods_supported``), then RFC 8414's
  default. Before the metadata is known, a refresh whose method depends on it
  waits (``can_refresh_token`` says no): the request goes out without the
  expired token, the 401 makes the SDK discover the metadata, and the headless
  refresh then goes to the right endpoint, the right way. So an undecided
  secret is never sent to a guessed ``/token``.

Round 15 (issue 29), on ``_initialize``, ``_add_auth_header`` and the context's lock:

* **Requests to an OAuth server run side by side.** The SDK's flow holds the
  context's lock until the authenticated request's answer has its head, so
  every request to the server waited for the one before it (a slow
  ``tools/call`` held up every other call and listing). In ``run``
  (``side_by_side``), ``_auth_flow`` first puts a valid token on the request
  under the lock and lets it go (``_authorize_unlocked``); only a request
  whose token is refused, or one that finds none valid, runs the SDK's flow
  under its lock; a refused one is handed to that flow as its first answer,
  so it is not sent twice. ``login``'s provider keeps the SDK's order: the
  close of its session must wait for a step-up its handshake met.

Concurrency: the SDK serializes its flow with the context's lock (held only to
read a valid token, for a request that has one); nothing here awaits except
through the SDK's own hooks.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Final

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider, PrivateKeyJWTOAuthProvider
from mcp.client.auth.utils import extract_field_from_www_auth, issuers_match, union_scopes
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER

from supervisor.compat.oauth_context import EarlyRefreshContext, TokenAuthContext
from supervisor.compat.oauth_methods import SPEC_DEFAULT_METHOD, NoUsableMethodOffered, SecretMethod

MAX_AUTHORIZATIONS_PER_STEP_UP: Final = 3
"""How many authorizations one scope step-up may cost before the sidecar stops asking (issue 13)."""
ISSUER_ERRORS: Final = (
    "Authorization response iss mismatch",
    "Authorization response missing iss parameter",
    "Authorization server metadata issuer mismatch",
    "No authorization server metadata discovered for configured issuer",
)
"""The SDK's issuer-check messages (``mcp.client.auth.utils`` and the client-credentials extension)."""


class LoginRequired(OAuthFlowError):
    """Only a person can get new tokens (``mcp-supervisor login``); the message names no secret."""


class StepUpNeeded(LoginRequired):
    """The server wants a scope the tokens lack (403 insufficient_scope): ``login`` asks for the union."""


class StepUpRefused(LoginRequired):
    """A step-up did not get its scope within ``MAX_AUTHORIZATIONS_PER_STEP_UP`` authorizations."""


class AuthorizationServerMoved(LoginRequired):
    """The protected resource names another authorization server than the stored client's."""


class IssuerMismatch(LoginRequired):
    """An RFC 8414 metadata issuer or RFC 9207 ``iss`` did not match: the flow stops, nothing is stored."""


def missing_scopes(wanted: str | None, granted: str | None) -> str:
    """The scopes of ``wanted`` that ``granted`` lacks, space-separated, in ``wanted``'s order."""
    have = set((granted or "").split())
    return " ".join(s for s in (wanted or "").split() if s not in have)


class StepUpAwareProvider(OAuthClientProvider):
    """Notes a step-up challenge, counts its authorizations, and names issuer errors (see the module docstring)."""

    login_required: str | None = None
    side_by_side = True
    """Whether a request with a valid token goes without waiting for the others (``_authorize_unlocked``).

    False for ``login``'s provider: its handshake's last request may be the one
    that meets a step-up, and the session's close must wait for that step-up
    to finish (as the SDK's lock makes it), or the new token is never fetched."""
    step_up_scope: str | None = None
    """The scope the last ``403 insufficient_scope`` asked for (None: this flow saw none)."""

    def _count_step_up(self) -> str:
        """Count one authorization for the current step-up; its scope (raises ``StepUpRefused`` past the cap)."""
        scope = self.context.client_metadata.scope or self.step_up_scope or ""
        counts: Counter[str] = self.__dict__.setdefault("_step_up_counts", Counter())
        counts[scope] += 1
        if counts[scope] > MAX_AUTHORIZATIONS_PER_STEP_UP:
            missing = missing_scopes(scope, self.context.current_tokens.scope if self.context.current_tokens else "")
            self.login_required = (
                f"the server requires scope {missing or scope!r} (insufficient_scope), which the authorization "
                f"server did not grant in {MAX_AUTHORIZATIONS_PER_STEP_UP} authorizations"
            )
            raise StepUpRefused(self.login_required)
        return scope

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        answered: httpx2.Response | None = None
        if self.side_by_side and await self._authorize_unlocked(request):
            answered = yield request
            if not _challenged(answered):
                return
            request.headers.pop("Authorization", None)  # refused: the SDK's flow decides anew, from the top
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            # Only now: the SDK's flow holds the context's lock from its first request on, so a
            # concurrent request's flow cannot clear a step-up this flow is still handling.
            self.step_up_scope = None
            if outgoing is not request:
                answered = None  # a refresh first: the request goes again, with the new token
            while True:
                if answered is not None:  # the refusal the request already had: not sent twice
                    response, answered = answered, None
                else:
                    response = yield outgoing
                if (
                    response.status_code == 403
                    and extract_field_from_www_auth(response, "error") == "insufficient_scope"
                ):
                    self.step_up_scope = extract_field_from_www_auth(response, "scope") or ""
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except OAuthFlowError as exc:
            if isinstance(exc, NoUsableMethodOffered):
                self.login_required = str(exc)  # no retry can help: park, and say what to change
                raise
            if isinstance(exc, LoginRequired) or not str(exc).startswith(ISSUER_ERRORS):
                raise
            self.login_required = (
                f"the authorization server's identity did not check out ({exc}); nothing was stored. This can mean a "
                "misconfigured server or a mix-up attack: check its issuer URL with its administrator"
            )
            raise IssuerMismatch(self.login_required) from exc
        finally:
            await flow.aclose()

    async def _authorize_unlocked(self, request: httpx2.Request) -> bool:
        """Put a valid token on ``request`` under the context's lock, then let the lock go; False: none is valid.

        The SDK's flow holds the lock until the request's answer has its head,
        so every request to an OAuth server waited for the one before it: a slow
        ``tools/call`` held up every other call to that server, listings too
        (5 concurrent POSTs, 0.2 s each: 1.0 s, one at a time). The lock guards
        the tokens, and reading a valid one is all a request needs of them; a
        request whose token is refused (401, or 403 short of a scope) then runs
        the SDK's flow, under the lock, with that refusal as its first answer
        (not sent again, unless the flow refreshes first). With no valid token
        (a refresh is due) the SDK's flow runs at once, as before.
        """
        async with self.context.lock:
            if not self._initialized:
                await self._initialize()
            self.context.protocol_version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
            if not self.context.is_token_valid():
                return False
            self._add_auth_header(request)
            return True


def _challenged(response: httpx2.Response) -> bool:
    """Whether ``response`` refuses the request's token: the SDK's flow's own test (401, or a scope step-up)."""
    return response.status_code == 401 or (
        response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"
    )


class CappedClientCredentialsProvider(StepUpAwareProvider, ClientCredentialsOAuthProvider):
    """The SDK's client-credentials provider; a step-up re-authorizes by itself, at most 3 times (issue 13).

    ``secret_method``: how the secret is sent; ``auto`` leaves it to the metadata (issue 30). The
    SDK's record names a method of its own (it must); the context's table decides at each request.
    """

    def __init__(
        self,
        server_url: str,
        storage: TokenStorage,
        client_id: str,
        client_secret: str,
        *,
        secret_method: SecretMethod,
        scope: str | None,
        issuer: str | None,
    ) -> None:
        forced = SPEC_DEFAULT_METHOD if secret_method == "auto" else secret_method
        super().__init__(
            server_url, storage, client_id, client_secret, token_endpoint_auth_method=forced, scope=scope, issuer=issuer
        )
        sdk = self.context
        self.context = TokenAuthContext(
            server_url=sdk.server_url,
            client_metadata=sdk.client_metadata,
            storage=sdk.storage,
            redirect_handler=sdk.redirect_handler,
            callback_handler=sdk.callback_handler,
            client_metadata_url=sdk.client_metadata_url,
        )
        self.context.configured_client_id = client_id
        self.context.secret_setting = secret_method

    async def _perform_authorization(self) -> httpx2.Request:
        if self.step_up_scope is not None:
            self._count_step_up()
        return await super()._perform_authorization()


class CappedPrivateKeyJWTProvider(StepUpAwareProvider, PrivateKeyJWTOAuthProvider):
    """The SDK's ``private_key_jwt`` provider, with the same step-up cap (issue 13)."""

    async def _perform_authorization(self) -> httpx2.Request:
        if self.step_up_scope is not None:
            self._count_step_up()
        return await super()._perform_authorization()


def _fingerprint(secret: str) -> str:
    """A one-way stand-in for a token, so that not even a debugger's repr of this object shows it."""
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


class SupervisorOAuthProvider(StepUpAwareProvider, OAuthClientProvider):
    """``OAuthClientProvider`` with restart-proof expiry, early refresh and (``headless``) no person in the loop."""

    def __init__(
        self,
        server_url: str,
        client_metadata: OAuthClientMetadata,
        storage: TokenStorage,
        *,
        headless: bool,
        redirect_handler: Callable[[str], Awaitable[None]] | None = None,
        callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None,
        client_metadata_url: str | None = None,
        extra_scope: str | None = None,
        on_step_up: Callable[[str, str], str] | None = None,
        configured_client_id: str | None = None,
        secret_setting: SecretMethod = "auto",
    ) -> None:
        super().__init__(server_url, client_metadata, storage, redirect_handler, callback_handler, client_metadata_url)
        self.context = EarlyRefreshContext(
            server_url=server_url,
            client_metadata=client_metadata,
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
            client_metadata_url=client_metadata_url,
        )
        self.context.configured_client_id = configured_client_id
        self.context.secret_setting = secret_setting
        self._extra_scope = extra_scope
        """``login``: scopes every authorization asks for on top of the SDK's choice (config, a pending step-up)."""
        self._on_step_up = on_step_up
        """Headless: records a step-up (wanted, missing scopes) for the next ``login``; says why a person must act."""
        self._bound_issuer: str | None = None
        self._headless = headless
        self.side_by_side = headless  # ``run``'s; ``login``'s requests wait for each other, as the SDK's do
        self._refreshing_on_401 = False
        self._refreshed_on_401: str | None = None
        self._refresh_refused: int | None = None
        self.login_required: str | None = None
        """Why a person must log in, once the headless flow found that out (no secret in it)."""

    async def _initialize(self) -> None:
        await super()._initialize()
        tokens = self.context.current_tokens
        if tokens is not None and tokens.expires_in is not None:
            self.context.update_token_expiry(tokens)
        if self.context.client_info is not None:
            # The issuer the stored client (and so its tokens) came from. A CIMD client id is portable,
            # but `login` stamps it afresh each time, so a change still means the tokens are another's.
            self._bound_issuer = self.context.client_info.issuer

    def _expected_issuer(self) -> str:
        expected = super()._expected_issuer()
        if self._headless and self._bound_issuer is not None and not issuers_match(self._bound_issuer, expected):
            # Stop before the SDK registers anywhere: only `login` may register with the new server.
            self.login_required = f"its authorization server moved from {self._bound_issuer} to {expected}"
            raise AuthorizationServerMoved(self.login_required)
        return expected

    async def _perform_authorization(self) -> httpx2.Request:
        if not self._headless:
            if self.step_up_scope is not None:
                self._count_step_up()
            self.context.client_metadata.scope = union_scopes(self.context.client_metadata.scope, self._extra_scope)
            return await super()._perform_authorization()
        if self.step_up_scope is not None:
            wanted = self.context.client_metadata.scope  # the SDK's union of what was granted and what is asked
            granted = self.context.current_tokens.scope if self.context.current_tokens else None
            missing = missing_scopes(wanted, granted) or self.step_up_scope
            reason = f"the server requires scope {missing!r} for this request (insufficient_scope)"
            self.login_required = self._on_step_up(wanted or missing, missing) if self._on_step_up else reason
            raise StepUpNeeded(self.login_required)
        tokens = self.context.current_tokens
        if self.context.can_refresh_token() and tokens is not None and tokens.refresh_token:
            fingerprint = _fingerprint(tokens.refresh_token)
            if fingerprint != self._refreshed_on_401:
                # A 401 with a token we thought valid: refresh once; a second 401 on the same refresh token is final.
                self._refreshed_on_401 = fingerprint
                self._refreshing_on_401 = True
                return await self._refresh_token()
        if self._refresh_refused is not None:
            reason = f"the authorization server refused the token refresh (HTTP {self._refresh_refused})"
        elif tokens is None:
            reason = "no usable tokens are stored"
        else:
            reason = "the server refused the access token and there is no refresh token to try"
        self.login_required = reason
        raise LoginRequired(reason)

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        refreshed = await super()._handle_refresh_response(response)
        if not refreshed:
            self._refresh_refused = response.status_code
        return refreshed

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        if not self._refreshing_on_401:
            await super()._handle_token_response(response)
            return
        self._refreshing_on_401 = False
        if not await self._handle_refresh_response(response):
            self.login_required = f"the authorization server refused the token refresh (HTTP {response.status_code})"
            raise LoginRequired(self.login_required)
