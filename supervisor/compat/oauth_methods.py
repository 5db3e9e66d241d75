"""How a client authenticates at the token endpoint: the one decision, and its table (issues 30, 46).

Split from ``compat.oauth`` (whose ``compat.oauth_context.TokenAuthContext`` asks it at every token
request) because it is a rule, not a hook: pure, and tested by its table.

Where the answer comes from depends on where the client record came from:

* a **registered** client (dynamic client registration, RFC 7591) authenticates
  the way its registration response says (``token_endpoint_auth_method``): that
  is the authorization server's word on this client. A response that names no
  method leaves the one the client asked for (a public client, ``none``), unless
  the metadata offers no ``none`` and a secret method it can use;
* a **configured** client (pre-registered ``oauth.client_id``, a CIMD client id,
  ``client_credentials``) follows the setting ``oauth.token_endpoint_auth_method``,
  then the authorization server's metadata (``token_endpoint_auth_methods_supported``),
  then RFC 8414's default (``client_secret_basic``).

A secret only ever goes out under a method that sends one, so a public client is
never refused because a server handed it a secret it did not ask for.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import TokenEndpointAuthMethod


class NoUsableMethodOffered(OAuthFlowError):
    """The authorization server's metadata offers no token-endpoint method this client can use."""


SecretMethod = Literal["auto", "client_secret_basic", "client_secret_post"]
"""The setting ``oauth.token_endpoint_auth_method``: how a configured client secret reaches the token endpoint."""
ClientOrigin = Literal["registered", "configured"]
"""Where the client record came from: a dynamic registration's response, or the settings (and CIMD)."""
SPEC_DEFAULT_METHOD: Final = "client_secret_basic"
"""RFC 8414 §2: what an authorization server whose metadata names no methods supports."""
REGISTRATION_METHOD: Final = "none"
"""What a dynamic registration asks for: the sidecar registers as a public client (PKCE, no secret)."""
_SECRET_METHODS: Final = ("client_secret_basic", "client_secret_post")
_KNOWN_METHODS: Final[tuple[str, ...]] = get_args(TokenEndpointAuthMethod)


def token_auth_method(
    origin: ClientOrigin,
    *,
    registered: str | None,
    setting: SecretMethod,
    has_secret: bool,
    offered: list[str] | None,
) -> TokenEndpointAuthMethod:
    """How the client authenticates at the token endpoint: the one decision, one table.

    ``registered`` is the record's ``token_endpoint_auth_method`` (for a
    registered client, what the registration response named); ``offered`` is the
    metadata's ``token_endpoint_auth_methods_supported`` (None: no metadata yet,
    or it names none).

    ==========  ====================  ======  ========  ==============================  =========================
    client      registration named    secret  setting   the authorization server offers method
    ==========  ====================  ======  ========  ==============================  =========================
    registered  a method              (any)   (any)     (any)                           that method
    registered  nothing               no      (any)     (any)                           ``none``
    registered  nothing               yes     (any)     nothing said, or ``none``       ``none`` (what it asked)
    registered  nothing               yes     (any)     basic (with post or not)        ``client_secret_basic``
    registered  nothing               yes     (any)     post, not basic                 ``client_secret_post``
    configured  (n/a)                 no      (any)     (any)                           ``none``
    configured  (n/a)                 yes     forced    (any)                           that one
    configured  (n/a)                 yes     ``auto``  nothing said                    ``client_secret_basic``
    configured  (n/a)                 yes     ``auto``  basic (with post or not)        ``client_secret_basic``
    configured  (n/a)                 yes     ``auto``  post, not basic                 ``client_secret_post``
    configured  (n/a)                 yes     ``auto``  ``none``, neither secret method ``none``
    (either)    (as above)            yes     ``auto``  only methods this client lacks  ``NoUsableMethodOffered``
    ==========  ====================  ======  ========  ==============================  =========================

    Raises:
        NoUsableMethodOffered: The metadata offers only methods this client cannot use
            (e.g. ``private_key_jwt`` for a client that holds a secret, not a key).
    """
    if origin == "registered":
        if registered in _KNOWN_METHODS:
            return registered  # type: ignore[return-value]  # narrowed by the membership test
        if not has_secret or not offered or REGISTRATION_METHOD in offered:
            return REGISTRATION_METHOD
        return _secret_method_offered(offered)
    if not has_secret:
        return "none"
    if setting != "auto":
        return setting
    if not offered:
        return SPEC_DEFAULT_METHOD
    if any(method in offered for method in _SECRET_METHODS):
        return _secret_method_offered(offered)
    if "none" in offered:
        return "none"
    return _secret_method_offered(offered)


def needs_metadata(origin: ClientOrigin, *, registered: str | None, setting: SecretMethod, has_secret: bool) -> bool:
    """Whether :func:`token_auth_method` would answer from the metadata: then no token request goes before it is known.

    A guess would send a secret to a ``/token`` guessed from the server's
    origin, or send it the wrong way; waiting costs one discovery.
    """
    if not has_secret:
        return False
    if origin == "registered":
        return registered not in _KNOWN_METHODS
    return setting == "auto"


def _secret_method_offered(offered: list[str]) -> TokenEndpointAuthMethod:
    if SPEC_DEFAULT_METHOD in offered:
        return SPEC_DEFAULT_METHOD
    if "client_secret_post" in offered:
        return "client_secret_post"
    raise NoUsableMethodOffered(
        "the authorization server's token endpoint takes no method this client can use (it offers "
        f"{', '.join(offered)}); set oauth.token_endpoint_auth_method to force one, or use a client it accepts"
    )
