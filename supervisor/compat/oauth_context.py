"""The SDK's ``OAuthContext`` with the sidecar's two decisions on it (issues 13, 30, 46).

* ``TokenAuthContext``: how the client authenticates at the token endpoint is
  decided at every token request by ``compat.oauth_methods.token_auth_method``
  (the record's origin, what its registration named, the setting, the metadata
  known then), on a copy of the record for that request only; a refresh whose
  method depends on the metadata waits until it is known.
* ``EarlyRefreshContext``: a token counts as expired ``refresh_margin_sec``
  before it does, so a call does not meet its expiry on the way.

Split from ``compat.oauth`` (the providers), which sets these contexts on the
SDK's providers. Both override the context's public hooks only
(``prepare_token_auth``, ``can_refresh_token``, ``update_token_expiry``).

Concurrency: plain synchronous code, called by the SDK under its flow's lock;
a record swapped for one request is restored before anything awaits.
"""

from __future__ import annotations

from typing import Final

from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from supervisor.compat.oauth_methods import ClientOrigin, SecretMethod, needs_metadata, token_auth_method

MAX_REFRESH_MARGIN_SEC: Final = 60.0
REFRESH_MARGIN_FRACTION: Final = 0.25


def refresh_margin_sec(expires_in: int) -> float:
    """How long before expiry a token is refreshed: a quarter of its lifetime, at most a minute."""
    return min(MAX_REFRESH_MARGIN_SEC, max(0.0, expires_in * REFRESH_MARGIN_FRACTION))


class TokenAuthContext(OAuthContext):
    """The SDK's context; the token-endpoint method comes from one table (``token_auth_method``, issues 30, 46).

    At every token request the method is decided from the record's origin, what
    its registration named, the setting and the metadata known then, and put on
    a copy of the record for that request only: the stored record stays as the
    authorization server (or the settings) made it. A record whose decision
    waits for the metadata does not refresh before it is known.
    """

    configured_client_id: str | None = None
    """The client id the settings name (pre-registered, ``client_credentials``); None: dynamic registration."""
    secret_setting: SecretMethod = "auto"
    """``oauth.token_endpoint_auth_method``: how a configured client's secret is sent."""

    def _origin(self, client: OAuthClientInformationFull) -> ClientOrigin:
        # CIMD: the metadata document's URL is the client id, and it is the settings' own.
        configured = client.client_id is not None and client.client_id in (
            self.configured_client_id,
            self.client_metadata_url,
        )
        return "configured" if configured else "registered"

    def can_refresh_token(self) -> bool:
        client = self.client_info
        # Undecided without the metadata, a secret waits for it: the SDK's flow then sends the request without the
        # expired token, discovers on the 401, and the (headless) refresh asks again once it knows.
        waits = (
            client is not None
            and self.oauth_metadata is None
            and needs_metadata(
                self._origin(client),
                registered=client.token_endpoint_auth_method,
                setting=self.secret_setting,
                has_secret=bool(client.client_secret),
            )
        )
        return super().can_refresh_token() and not waits

    def prepare_token_auth(
        self, data: dict[str, str], headers: dict[str, str] | None = None
    ) -> tuple[dict[str, str], dict[str, str]]:
        client = self.client_info
        if client is None:
            return super().prepare_token_auth(data, headers)
        method = token_auth_method(
            self._origin(client),
            registered=client.token_endpoint_auth_method,
            setting=self.secret_setting,
            has_secret=bool(client.client_secret),
            offered=self.oauth_metadata.token_endpoint_auth_methods_supported if self.oauth_metadata else None,
        )
        if method == client.token_endpoint_auth_method:
            return super().prepare_token_auth(data, headers)
        # For this request only (no await in between): each token request decides from the metadata known then.
        self.client_info = client.model_copy(update={"token_endpoint_auth_method": method})
        try:
            return super().prepare_token_auth(data, headers)
        finally:
            self.client_info = client


class EarlyRefreshContext(TokenAuthContext):
    """The token-auth context, and a token refreshed ``refresh_margin_sec`` before it expires (issue 13)."""

    def update_token_expiry(self, token: OAuthToken) -> None:
        super().update_token_expiry(token)
        if self.token_expiry_time is not None and token.expires_in is not None:
            self.token_expiry_time -= refresh_margin_sec(int(token.expires_in))
