"""The Registry (DESIGN §4 I3): atomic, all-or-nothing generation swaps; squatters untouched."""

from __future__ import annotations

import pytest

from supervisor.catalog.naming import public_tool_name
from supervisor.catalog.registry import DuplicateToolName, RegisteredTool, Registry
from supervisor.errors import RegistryConflict
from tests.fakes import tool


class _ChangeCounter:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def _state(registry: Registry) -> dict[str, tuple[str, str, dict[str, object]]]:
    """Everything a host or a router can observe, as plain data."""
    return {
        public: (held.owner, held.raw_name, held.definition.model_dump())
        for public, held in ((t.name, registry.lookup(t.name)) for t in registry.tools())
        if held is not None
    }


def test_I3_a_swap_registers_namespaced_definitions_that_route_to_the_raw_name() -> None:
    registry = Registry()
    result = registry.swap("srv", [tool("echo", "says it back"), tool("get.time")])
    assert result.changed
    assert result.conflicts == ()
    echo = registry.lookup("mcp__srv__echo")
    assert echo == RegisteredTool("mcp__srv__echo", "srv", "echo", tool("echo", "says it back"))
    assert echo.definition == tool("mcp__srv__echo", "says it back")
    assert echo.definition is echo.definition  # made once
    odd = registry.lookup(public_tool_name("srv", "get.time"))
    assert odd is not None
    assert odd.raw_name == "get.time"
    assert [t.name for t in registry.tools()] == sorted(["mcp__srv__echo", public_tool_name("srv", "get.time")])
    assert [t.public_name for t in registry.owned_by("srv")] == [t.name for t in registry.tools()]


def test_I3_a_swap_replaces_the_previous_generation_entirely() -> None:
    registry = Registry()
    registry.swap("other", [tool("keep")])
    registry.swap("srv", [tool("a"), tool("b", "v1")])
    registry.swap("srv", [tool("b", "v2"), tool("c")])
    assert sorted(_state(registry)) == ["mcp__other__keep", "mcp__srv__b", "mcp__srv__c"]
    held = registry.lookup("mcp__srv__b")
    assert held is not None
    assert held.definition.description == "v2"


def test_I3_a_conflicting_swap_keeps_the_previous_generation_identical_and_the_squatter_untouched() -> None:
    registry = Registry()
    registry.swap("srv", [tool("stable", "old"), tool("gone")])
    registry.claim("squatter", public_tool_name("srv", "taken"), tool("mine", "the squatter's"))
    before = _state(registry)
    version = registry.version

    result = registry.swap("srv", [tool("stable", "new"), tool("taken"), tool("fresh")])

    assert not result.changed
    assert [(c.name, c.owner, c.claimant) for c in result.conflicts] == [("mcp__srv__taken", "squatter", "srv")]
    assert _state(registry) == before
    assert registry.version == version
    squatter = registry.lookup("mcp__srv__taken")
    assert squatter == RegisteredTool("mcp__srv__taken", "squatter", "mine", tool("mine", "the squatter's"))
    assert squatter.definition == tool("mcp__srv__taken", "the squatter's")


def test_I3_a_first_swap_with_a_conflict_registers_no_tools_at_all() -> None:
    registry = Registry()
    registry.swap("other", [tool("x")])
    registry.claim("reserved", public_tool_name("srv", "taken"), tool("taken"))
    before = _state(registry)

    result = registry.swap("srv", [tool("a"), tool("taken"), tool("b")])

    assert len(result.conflicts) == 1
    assert registry.owned_by("srv") == []
    assert registry.lookup("mcp__srv__a") is None
    assert _state(registry) == before


def test_I3_duplicate_raw_names_raise_and_change_nothing() -> None:
    changes = _ChangeCounter()
    registry = Registry(on_change=changes)
    registry.swap("srv", [tool("a")])
    before, version, notified = _state(registry), registry.version, changes.count

    with pytest.raises(DuplicateToolName, match="'b' more than once"):
        registry.swap("srv", [tool("b"), tool("c"), tool("b")])

    assert _state(registry) == before
    assert (registry.version, changes.count) == (version, notified)


def test_I3_on_change_fires_only_when_the_catalog_really_changes_and_version_bumps_with_it() -> None:
    changes = _ChangeCounter()
    registry = Registry(on_change=changes)
    assert registry.version == 0

    registry.swap("srv", [tool("a")])
    assert (changes.count, registry.version) == (1, 1)

    assert not registry.swap("srv", [tool("a")]).changed  # identical generation
    assert (changes.count, registry.version) == (1, 1)

    assert registry.swap("srv", [tool("a", "new description")]).changed
    assert (changes.count, registry.version) == (2, 2)

    registry.claim("squatter", public_tool_name("srv", "b"), tool("b"))
    assert (changes.count, registry.version) == (3, 3)
    assert registry.swap("srv", [tool("a"), tool("b")]).conflicts  # refused: nothing changed
    assert (changes.count, registry.version) == (3, 3)

    assert registry.withdraw("srv")
    assert (changes.count, registry.version) == (4, 4)
    assert not registry.withdraw("srv")  # nothing left to withdraw
    assert not registry.swap("srv", []).changed
    assert (changes.count, registry.version) == (4, 4)


def test_I3_the_snapshot_is_rebuilt_after_a_change_and_shared_between_changes() -> None:
    registry = Registry()
    registry.swap("srv", [tool("a")])
    first = registry.tools()
    assert registry.tools() is first
    registry.swap("srv", [tool("a"), tool("b")])
    assert [t.name for t in registry.tools()] == ["mcp__srv__a", "mcp__srv__b"]
    assert [t.name for t in first] == ["mcp__srv__a"]


def test_withdraw_removes_only_that_owners_tools() -> None:
    registry = Registry()
    registry.swap("one", [tool("a")])
    registry.swap("two", [tool("a")])
    assert registry.withdraw("one")
    assert sorted(_state(registry)) == ["mcp__two__a"]
    assert len(registry) == 1


def test_a_swap_to_an_empty_listing_removes_the_owner() -> None:
    registry = Registry()
    registry.swap("srv", [tool("a")])
    assert registry.swap("srv", []).changed
    assert registry.owned_by("srv") == []
    assert len(registry) == 0


def test_claim_refuses_a_name_held_by_another_owner() -> None:
    registry = Registry()
    registry.swap("srv", [tool("a")])
    with pytest.raises(RegistryConflict) as caught:
        registry.claim("squatter", "mcp__srv__a", tool("a"))
    assert (caught.value.name, caught.value.owner, caught.value.claimant) == ("mcp__srv__a", "srv", "squatter")
    held = registry.lookup("mcp__srv__a")
    assert held is not None
    assert held.owner == "srv"


def test_the_registry_does_not_share_definitions_with_the_caller() -> None:
    registry = Registry()
    raw = tool("a")
    registry.swap("srv", [raw])
    raw.input_schema["properties"] = {"x": {"type": "string"}}
    held = registry.lookup("mcp__srv__a")
    assert held is not None
    assert held.definition.input_schema == {"type": "object"}
    assert raw.name == "a"
