"""Tool transforms (issue 26, item 3): the definition hosts see and the arguments upstreams get."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from supervisor.catalog.registry import DuplicateName, Registry
from supervisor.catalog.transforms import ToolTransform, compile_transforms, transform_warnings
from supervisor.config.models import Settings, SupervisorSection
from supervisor.config.names import NamesSettings
from supervisor.config.servers import ServerSettings
from supervisor.config.transforms import ToolTransformSettings

SEARCH = types.Tool(
    name="search_issues",
    title="Search issues",
    description="Search the issues of an organisation.",
    input_schema={
        "type": "object",
        "properties": {
            "org": {"type": "string", "description": "The organisation"},
            "q": {"type": "string", "description": "The query"},
            "per_page": {"type": "integer"},
        },
        "required": ["org", "q"],
    },
    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
    _meta={"vendor/keep": 1},
)


def _transform(**table: Any) -> ToolTransform:
    return ToolTransform.of(ToolTransformSettings.model_validate(table))


def test_shape_sets_texts_and_merges_annotations_and_meta_over_the_upstreams() -> None:
    shaped = _transform(
        title="Find issues",
        description="Find issues by words.",
        annotations={"openWorldHint": False, "idempotentHint": True},
        meta={"anthropic/alwaysLoad": True},
    ).shape(SEARCH)
    assert (shaped.title, shaped.description) == ("Find issues", "Find issues by words.")
    assert shaped.annotations is not None
    assert (shaped.annotations.read_only_hint, shaped.annotations.open_world_hint) == (True, False)
    assert shaped.annotations.idempotent_hint is True
    assert shaped.meta == {"vendor/keep": 1, "anthropic/alwaysLoad": True}
    assert SEARCH.title == "Search issues" and SEARCH.meta == {"vendor/keep": 1}, "the upstream's is untouched"


def test_without_meta_the_upstreams_meta_passes_untouched() -> None:
    assert _transform(description="x").shape(SEARCH).meta == {"vendor/keep": 1}


def test_arguments_are_renamed_redescribed_defaulted_and_hidden_in_the_schema() -> None:
    transform = _transform(
        arguments={
            "org": {"hide": True, "default": "acme"},
            "q": {"rename": "query", "description": "Words to look for"},
            "per_page": {"default": 20},
        }
    )
    schema = transform.shape(SEARCH).input_schema
    assert schema["properties"] == {
        "query": {"type": "string", "description": "Words to look for"},
        "per_page": {"type": "integer", "default": 20},
    }
    assert schema["required"] == ["query"]
    assert SEARCH.input_schema["required"] == ["org", "q"], "the upstream's schema is untouched"


def test_upstream_arguments_rename_back_fill_defaults_and_always_inject_hidden_ones() -> None:
    transform = _transform(
        arguments={"org": {"hide": True, "default": "acme"}, "q": {"rename": "query"}, "per_page": {"default": 20}}
    )
    host = {"query": "bug", "org": "evil"}
    assert transform.upstream_arguments(host) == {"q": "bug", "org": "acme", "per_page": 20}
    assert host == {"query": "bug", "org": "evil"}, "the host's arguments are untouched"
    assert transform.upstream_arguments({"query": "x", "per_page": 5}) == {"q": "x", "per_page": 5, "org": "acme"}
    assert transform.upstream_arguments(None) == {"org": "acme", "per_page": 20}


def test_a_transform_that_leaves_arguments_alone_hands_them_on_as_they_are() -> None:
    arguments = {"q": "bug"}
    assert _transform(description="x").upstream_arguments(arguments) is arguments


def test_the_registry_applies_the_public_name_override_and_drops_disabled_tools() -> None:
    registry = Registry()
    other = types.Tool(name="close_issue", input_schema={"type": "object"})
    transforms = compile_transforms(
        {
            "search_issues": ToolTransformSettings(name="find_issues", description="Find."),
            "close_issue": ToolTransformSettings(enabled=False),
        }
    )
    registry.swap("gh", [SEARCH, other], transforms=transforms)
    entries = registry.tool_entries()
    assert [entry.key for entry in entries] == ["mcp__gh__find_issues"]
    (entry,) = entries
    assert entry.raw_name == "search_issues", "the raw name still goes upstream"
    assert entry.definition.name == "mcp__gh__find_issues" and entry.definition.description == "Find."
    assert registry.tools()[0].description == "Find."


def test_an_override_that_takes_another_tools_name_rejects_the_listing() -> None:
    registry = Registry()
    status = types.Tool(name="status", input_schema={"type": "object"})
    with pytest.raises(DuplicateName, match="mcp__gh__status"):
        registry.swap(
            "gh",
            [SEARCH, status],
            transforms=compile_transforms({"search_issues": ToolTransformSettings(name="status")}),
        )


def test_a_changed_transform_is_a_changed_entry_for_the_swap() -> None:
    registry = Registry()
    registry.swap("gh", [SEARCH], transforms=compile_transforms({"search_issues": ToolTransformSettings(title="A")}))
    version = registry.version
    changed = registry.swap(
        "gh", [SEARCH], transforms=compile_transforms({"search_issues": ToolTransformSettings(title="B")})
    )
    assert changed.changed and registry.version > version
    assert registry.tools()[0].title == "B"


def test_transforms_naming_what_the_server_does_not_list_are_warnings() -> None:
    transforms = compile_transforms(
        {
            "search_issues": ToolTransformSettings.model_validate({"arguments": {"labels": {"description": "x"}}}),
            "gone": ToolTransformSettings(title="x"),
            "other": ToolTransformSettings.model_validate({"arguments": {"a": {"rename": "b"}}}),
        }
    )
    other = types.Tool(name="other", input_schema={"type": "object", "properties": {"a": {}, "b": {}}})
    assert transform_warnings(transforms, {"search_issues": SEARCH, "other": other}) == [
        "tools.gone: the server lists no tool 'gone'",
        "tools.other.arguments.a.rename: the tool already has an argument 'b'",
        "tools.search_issues.arguments.labels: the tool has no argument 'labels'",
    ]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"arguments": {"org": {"hide": True}}}, "arguments.org: hide = true needs a default"),
        ({"name": "has space"}, "name must be 1 to 64 characters"),
        ({"annotations": {"readOnly": True}}, "annotations.readOnly is not an MCP tool annotation"),
        ({"annotations": {"readOnlyHint": "yes"}}, "annotations.readOnlyHint must be a bool"),
        ({"arguments": {"a": {"rename": "b"}, "b": {}}}, "would both be called 'b'"),
    ],
)
def test_a_transform_table_that_cannot_work_is_refused_naming_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ToolTransformSettings.model_validate(table)


def test_an_override_too_long_for_a_public_name_or_used_twice_is_refused() -> None:
    long_name = {"a": ToolTransformSettings(name="n" * 60)}
    with pytest.raises(ValueError, match=r"mcp_servers\.gh\.tools\.a\.name makes the public name"):
        Settings(mcp_servers={"gh": ServerSettings(name="gh", command="x", tools=long_name)})
    # The length counts the host's prefix: 44 characters fit the short form's 48, not under a 30-character host prefix.
    fits = {"gh": ServerSettings(name="gh", command="x", tools={"a": ToolTransformSettings(name="n" * 40)})}
    assert Settings(mcp_servers=fits).supervisor.names.limit == 48
    with pytest.raises(ValueError, match=r"with \[supervisor.names\] public names have at most 34"):
        Settings(supervisor=SupervisorSection(names=NamesSettings(host_prefix="h" * 30)), mcp_servers=fits)
    with pytest.raises(ValueError, match=r"tools\.b\.name and tools\.a\.name are both 'same'"):
        ServerSettings(
            name="gh",
            command="x",
            tools={"a": ToolTransformSettings(name="same"), "b": ToolTransformSettings(name="same")},
        )
