"""Every use of private ``httpx2`` / ``httpcore2`` API, in one place (httpx2 2.16).

* ``plain_route``: whether an ``AsyncClient`` would send a request to ``url``
  itself, over HTTP/1.1 on a TCP connection of its own, with nothing between
  (no proxy, no mounted or mock transport, no event hook), and if so the TLS
  context it would use. Its auth flow is the caller's to judge
  (``compat.oauth.authorize``). httpx has no public view of the transport it
  picks for a URL or of that transport's pool; ``upstream.http1`` sends the
  fast path's POSTs itself only where httpx would have done nothing more, and
  with the same trust (the same ``ssl.SSLContext`` object).

``tests/compat/test_compat.py`` holds a test per assumption.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import httpcore2
import httpx2


@dataclass(frozen=True, slots=True)
class PlainRoute:
    """How httpx would reach one URL: directly, with this TLS context (None for ``http``)."""

    ssl_context: ssl.SSLContext | None


def plain_route(client: httpx2.AsyncClient, url: str) -> PlainRoute | None:
    """``client``'s route to ``url`` if it is a plain HTTP/1.1 connection of its own; None otherwise."""
    target = httpx2.URL(url)
    if target.scheme not in ("http", "https") or target.userinfo:
        return None  # credentials in the URL are httpx's basic auth
    if any(client.event_hooks.get(kind) for kind in ("request", "response")):
        return None
    transport = client._transport_for_url(target)
    if transport is not client._transport or type(transport) is not httpx2.AsyncHTTPTransport:
        return None  # a proxy's mount, a mock or a custom transport
    pool = transport._pool
    if type(pool) is not httpcore2.AsyncConnectionPool:
        return None  # an HTTP or SOCKS proxy
    if pool._proxy is not None or pool._uds is not None or pool._http2 or not pool._http1:
        return None
    if pool._local_address is not None or pool._socket_options:
        return None
    return PlainRoute(pool._ssl_context if target.scheme == "https" else None)
