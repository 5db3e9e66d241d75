"""The Registry keeps a handed-over listing (``OwnedListing``) and copies any other (``registry``, ``catalog_sync``)."""

from __future__ import annotations

from typing import cast

import mcp_types as types
import trio
from mcp.client.caching import CacheMode

from supervisor.catalog.mailbox import SyncOutcome, SyncRequest
from supervisor.catalog.registry import Definition, Kind, OwnedListing, Registry
from supervisor.catalog_sync import CatalogSync
from supervisor.config.servers import ServerSettings
from supervisor.seams import UpstreamSession
from supervisor.upstream.session import Identity
from tests.fakes import tool

BOUND_SEC = 10.0


def test_an_owned_listing_is_kept_as_listed_and_renamed_only_when_read() -> None:
    registry = Registry()
    handed_over = tool("a")
    registry.swap_many("srv", {"tools": OwnedListing([handed_over])})
    held = registry.lookup("mcp__srv__a")
    assert held is not None
    assert held.source is handed_over
    assert held._definition is None, "no renamed copy is made at the swap"
    assert held.definition.name == "mcp__srv__a"
    assert handed_over.name == "a", "the rename is a new model, never an edit of the listing's"
    assert held.definition.input_schema is handed_over.input_schema
    assert registry.tools() == [held.definition]


def test_a_plain_listing_is_still_deep_copied() -> None:
    registry = Registry()
    raw = tool("a")
    registry.swap("srv", [raw])
    held = registry.lookup("mcp__srv__a")
    assert held is not None
    assert held.definition.input_schema is not raw.input_schema


def test_owned_resources_are_kept_as_listed_and_plain_ones_copied() -> None:
    registry = Registry()
    owned = types.Resource(uri="file:///a", name="a")
    plain = types.Resource(uri="file:///b", name="b")
    registry.swap_many("x", {"resources": OwnedListing([owned])})
    registry.swap_many("y", {"resources": [plain]})
    kept, copied = registry.resources()
    assert kept is owned
    assert copied == plain and copied is not plain


class _OwnedUpstream:
    """Just enough of an ``UpstreamSession`` for one sync: a tools listing handed over as an ``OwnedListing``."""

    def __init__(self, listing: OwnedListing) -> None:
        self.listing = listing
        self.identity = Identity("owned", "1.0")
        self.kinds = frozenset({"tools"})

    async def list_all(self, kind: Kind, cache_mode: CacheMode) -> list[Definition]:
        await trio.lowlevel.checkpoint()
        return self.listing


async def test_a_sync_through_an_allow_list_still_hands_the_listing_over() -> None:
    kept, dropped = tool("read_a"), tool("write_a")
    registry = Registry()
    settings = ServerSettings(name="srv", command="x", enabled_tools=["read_*"])
    upstream = _OwnedUpstream(OwnedListing([kept, dropped]))
    sync = CatalogSync(
        settings,
        registry,
        cache=None,
        current_upstream=lambda: cast(UpstreamSession, upstream),
        transition=lambda *args, **kwargs: None,
        log_fields=dict,
        events=None,
    )
    reply_send, reply_recv = trio.open_memory_channel[SyncOutcome](1)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sync.serve)
            sync.post(SyncRequest("refresh", "initial", reply=reply_send))
            assert (await reply_recv.receive()).ok
            nursery.cancel_scope.cancel()
    held = registry.lookup("mcp__srv__read_a")
    assert held is not None and held.definition.input_schema is kept.input_schema
    assert registry.lookup("mcp__srv__write_a") is None
