"""The Registry keeps a handed-over listing (``OwnedListing``) and copies any other (``registry``)."""

from __future__ import annotations

import mcp_types as types

from supervisor.registry import OwnedListing, Registry
from tests.fakes import tool


def test_an_owned_listing_is_kept_renamed_without_a_deep_copy() -> None:
    registry = Registry()
    handed_over = tool("a")
    registry.swap_many("srv", {"tools": OwnedListing([handed_over])})
    held = registry.lookup("mcp__srv__a")
    assert held is not None
    assert held.definition.name == "mcp__srv__a"
    assert handed_over.name == "a", "the rename is a new model, never an edit of the listing's"
    assert held.definition.input_schema is handed_over.input_schema


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
