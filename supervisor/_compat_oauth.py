"""The one place that overrides private hooks of the SDK's OAuth client provider (mcp 2.3).

Kept apart from :mod:`supervisor._compat` (same rule: an SDK upgrade that moves
one of these breaks here, loudly; ``tests/test_oauth_unit.py`` checks each hook
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

Concurrency: the SDK serializes its flow with the context's lock; nothing here
awaits except through the SDK's own hooks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Final

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, TokenStorage
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata, OAuthToken

MAX_REFRESH_MARGIN_SEC: Final = 60.0
REFRESH_MARGIN_FRACTION: Final = 0.25


def refresh_margin_sec(expires_in: int) -> float:
    """How long before expiry a token is refreshed: a quarter of its lifetime, at most a minute."""
    return min(MAX_REFRESH_MARGIN_SEC, max(0.0, expires_in * REFRESH_MARGIN_FRACTION))


class LoginRequired(OAuthFlowError):
    """Only a person can get new tokens (``mcp-supervisor login``); the message names no secret."""


class _EarlyRefreshContext(OAuthContext):
    def update_token_expiry(self, token: OAuthToken) -> None:
        super().update_token_expiry(token)
        if self.token_expiry_time is not None and token.expires_in is not None:
            self.token_expiry_time -= refresh_margin_sec(int(token.expires_in))


def _fingerprint(secret: str) -> str:
    """A one-way stand-in for a token, so that not even a debugger's repr of this object shows it."""
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


class SupervisorOAuthProvider(OAuthClientProvider):
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
    ) -> None:
        super().__init__(server_url, client_metadata, storage, redirect_handler, callback_handler)
        self.context = _EarlyRefreshContext(
            server_url=server_url,
            client_metadata=client_metadata,
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        self._headless = headless
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

    async def _perform_authorization(self) -> httpx2.Request:
        if not self._headless:
            return await super()._perform_authorization()
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
