"""The private ``mcp`` SDK API the raw ``tools/list`` path needs (mcp 2.3), in one place.

A module of its own, like ``compat.oauth``: it belongs to one concern
(``upstream.listing``), and ``tests/compat/test_compat_listing.py`` holds one test per
assumption, so that an SDK upgrade breaks here, loudly.

``Client.list_tools`` is ``Client._cached_fetch`` around ``ClientSession.list_tools``;
the raw path repeats that composition over a raw request, and needs for it:

* ``response_cache``: the client's ``ClientResponseCache`` (``Client._response_cache``),
  whose public methods (``read``, ``capture``, ``write``, ``evict_method``) keep
  the SEP-2549 keys, arms, lifetimes and eviction generations exactly the SDK's.
* ``absorb_tool_listing``: ``ClientSession._absorb_tool_listing``, which the SDK
  runs on every listing it returns, fetched or served from the cache: the
  2026 ``x-mcp-header`` filter and maps, and the output schemas that
  ``call_tool`` validates results against.
* ``shape_inbound_result``: what ``ClientSession.send_request`` does to a raw
  result before it validates it: clamp a negative ``ttlMs`` to 0, and drop
  the fields of a later protocol revision than the negotiated one
  (``_clamp_inbound_ttl``, ``_later_revision_fields``).

Concurrency: plain functions; nothing here awaits.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.caching import ClientResponseCache
from mcp.client.session import ClientSession, _clamp_inbound_ttl, _later_revision_fields

__all__ = ["absorb_tool_listing", "response_cache", "shape_inbound_result"]


def response_cache(client: Client) -> ClientResponseCache | None:
    """The client's response cache (None when the client was built with ``cache=None``)."""
    cache: ClientResponseCache | None = client._response_cache
    return cache


def absorb_tool_listing(
    session: ClientSession, page: types.ListToolsResult, *, complete: bool
) -> types.ListToolsResult:
    """Let the session derive its per-tool state from ``page`` (in place), as its own ``list_tools`` does."""
    return session._absorb_tool_listing(page, complete=complete)


def shape_inbound_result(method: str, version: str, raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` as ``ClientSession.send_request`` validates it: ``ttlMs`` clamped, later-revision keys dropped."""
    _clamp_inbound_ttl(raw)
    foreign = _later_revision_fields(method, version)
    if foreign.isdisjoint(raw):
        return raw
    return {key: value for key, value in raw.items() if key not in foreign}
