"""How a client secret reaches the token endpoint: the one decision, and its table (issue 30).

Split from ``compat.oauth`` (whose ``_TokenAuthContext`` asks it at every token
request) because it is a rule, not a hook: pure, and tested by its table.
"""

from __future__ import annotations

from typing import Final, Literal

from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import TokenEndpointAuthMethod


class NoSecretMethodOffered(OAuthFlowError):
    """The client has a secret, and the authorization server's metadata offers no method that sends one."""


SecretMethod = Literal["auto", "client_secret_basic", "client_secret_post"]
"""The setting ``oauth.token_endpoint_auth_method``: how a client secret reaches the token endpoint."""
SPEC_DEFAULT_METHOD: Final = "client_secret_basic"
"""RFC 8414 §2: what an authorization server whose metadata names no methods supports."""


def token_auth_method(setting: SecretMethod, has_secret: bool, offered: list[str] | None) -> TokenEndpointAuthMethod:
    """How the client authenticates at the token endpoint: the one decision, one table.

    ``offered`` is the metadata's ``token_endpoint_auth_methods_supported``
    (None: no metadata yet, or it names none).

    ======  ========================  ===============================  ====================
    secret  setting                   the authorization server offers  method
    ======  ========================  ===============================  ====================
    no      (any)                     (any)                            ``none``
    yes     basic or post             (any)                            that one (forced)
    yes     ``auto``                  nothing said                     ``client_secret_basic``
    yes     ``auto``                  basic (with post or not)         ``client_secret_basic``
    yes     ``auto``                  post, not basic                  ``client_secret_post``
    yes     ``auto``                  neither                          ``NoSecretMethodOffered``
    ======  ========================  ===============================  ====================

    Raises:
        NoSecretMethodOffered: The metadata offers no way to send a client secret.
    """
    if not has_secret:
        return "none"
    if setting != "auto":
        return setting
    if not offered or SPEC_DEFAULT_METHOD in offered:
        return SPEC_DEFAULT_METHOD
    if "client_secret_post" in offered:
        return "client_secret_post"
    raise NoSecretMethodOffered(
        "the authorization server's token endpoint takes no client secret (it offers "
        f"{', '.join(offered)}); set oauth.token_endpoint_auth_method to force one, or use a client it accepts"
    )
