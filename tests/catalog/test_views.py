"""Views are walls (I16), on the catalog side: ``catalog.views.CatalogView`` over a real Registry."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from supervisor.catalog.registry import Registry
from supervisor.catalog.views import CALL_TOOL, SEARCH_TOOL, CatalogView, ViewRules, everything
from supervisor.config.servers import ServerSettings
from supervisor.config.views import ViewSettings


def _tool(name: str, description: str = "", **properties: Any) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema={"type": "object", "properties": properties})


def _servers(**tags: list[str]) -> dict[str, ServerSettings]:
    return {name: ServerSettings(name=name, command="x", tags=labels) for name, labels in tags.items()}


def _registry() -> Registry:
    registry = Registry()
    registry.swap_many(
        "files",
        {
            "tools": [_tool("read_file", "Read a file"), _tool("delete_file", "Delete a file")],
            "prompts": [types.Prompt(name="summarize")],
            "resources": [types.Resource(uri="file:///a", name="a")],
            "templates": [types.ResourceTemplate(uri_template="file:///{path}", name="any")],
        },
    )
    registry.swap_many(
        "git",
        {
            "tools": [_tool("status", "Show the working tree status"), _tool("log", "Show commit logs")],
            "prompts": [types.Prompt(name="commit_message")],
            "resources": [types.Resource(uri="git://head", name="head")],
        },
    )
    return registry


def _view(registry: Registry, **table: Any) -> CatalogView:
    configured = _servers(files=["code"], git=["code", "vcs"])
    return CatalogView(registry, ViewRules.of("v", ViewSettings(**table), configured))


def test_I16_a_view_of_one_server_hides_every_kind_of_the_other() -> None:
    registry = _registry()
    view = _view(registry, servers=["git"])
    assert [tool.name for tool in view.tools()] == ["mcp__git__log", "mcp__git__status"]
    assert [prompt.name for prompt in view.prompts()] == ["mcp__git__commit_message"]
    assert [str(resource.uri) for resource in view.resources()] == ["git://head"]
    assert view.templates() == []
    assert view.lookup("mcp__files__read_file") is None
    assert view.lookup_prompt("mcp__files__summarize") is None
    assert view.resource_owner("file:///a") is None
    assert view.resource_owner("git://head") == "git"
    assert view.shows_server("git") and not view.shows_server("files")


def test_servers_are_chosen_by_name_or_tag_and_tools_by_allow_and_deny_globs() -> None:
    registry = _registry()
    by_tag = _view(registry, servers=["vcs"])
    assert {entry.owner for entry in by_tag.tool_entries()} == {"git"}
    globbed = _view(registry, tools=["mcp__files__*", "mcp__git__status"], exclude_tools=["*__delete_*"])
    assert [tool.name for tool in globbed.tools()] == ["mcp__files__read_file", "mcp__git__status"]
    assert globbed.lookup("mcp__files__delete_file") is None
    # Tool globs filter tools only: both servers' prompts stay.
    assert len(globbed.prompts()) == 2


def test_the_default_view_is_the_registry_itself() -> None:
    registry = _registry()
    view = everything(registry)
    assert view.tools() is registry.tools()
    assert view.lookup("mcp__files__delete_file") is registry.lookup("mcp__files__delete_file")


def test_I16_a_change_the_view_cannot_see_moves_none_of_its_counters() -> None:
    registry = _registry()
    view = _view(registry, servers=["git"])
    before = view.versions
    registry.swap("files", [_tool("read_file", "Read a file"), _tool("write_file")])
    assert view.versions == before, "a hidden server's change must notify no host of this view"
    registry.swap("git", [_tool("status", "Show the working tree status")])
    after = view.versions
    assert after["tools"] == before["tools"] + 1
    assert {k: v for k, v in after.items() if k != "tools"} == {k: v for k, v in before.items() if k != "tools"}


def test_a_hidden_tool_of_a_shown_server_changing_moves_nothing_either() -> None:
    registry = _registry()
    view = _view(registry, tools=["mcp__git__status"])
    before = view.versions
    registry.swap("git", [_tool("status", "Show the working tree status"), _tool("log", "Show the commits")])
    assert view.versions["tools"] != before["tools"], "the git generation is new, status is a new entry"
    before = view.versions
    registry.swap("files", [_tool("read_file")])
    assert view.versions == before


def test_an_edited_rule_moves_every_counter_and_applies_at_once() -> None:
    registry = _registry()
    view = _view(registry, servers=["git"])
    before = view.versions
    servers = _servers(files=["code"], git=["code", "vcs"])
    assert view.update(ViewRules.of("v", ViewSettings(servers=["files"]), servers))
    assert all(view.versions[kind] > before[kind] for kind in before)
    assert [tool.name for tool in view.tools()] == ["mcp__files__delete_file", "mcp__files__read_file"]
    assert not view.update(ViewRules.of("v", ViewSettings(servers=["files"]), servers)), "the same rules: no change"


def test_a_search_view_lists_its_always_visible_tools_and_its_own_two_but_routes_them_all() -> None:
    registry = _registry()
    view = _view(registry, catalog="search", always_visible=["mcp__git__status"])
    assert [tool.name for tool in view.tools()] == [CALL_TOOL, "mcp__git__status", SEARCH_TOOL]
    assert view.lookup("mcp__files__read_file") is not None, "every tool of the view stays callable by name"
    assert view.lookup(SEARCH_TOOL) is None, "its own tools are answered by the Front, not routed"
    best = view.search_index().search("show commit history", 1)
    assert [match.entry.key for match in best] == ["mcp__git__log"]


def test_the_search_index_is_rebuilt_when_the_views_tools_change() -> None:
    registry = _registry()
    view = _view(registry, catalog="search")
    first = view.search_index()
    assert view.search_index() is first, "no change: the same index"
    registry.swap("git", [_tool("blame", "Show who changed each line")])
    rebuilt = view.search_index()
    assert rebuilt is not first
    assert [match.entry.key for match in rebuilt.search("who changed each line", 1)] == ["mcp__git__blame"]


def test_a_views_input_schema_is_the_one_its_hosts_were_shown_and_none_outside_it() -> None:
    # What the SDK's HTTP server checks Mcp-Param-* headers against (Front: Server(get_tool_input_schema=…)).
    registry = _registry()
    view = _view(registry, servers=["git"])
    assert view.input_schema("mcp__git__status") == {"type": "object", "properties": {}}
    assert view.input_schema("mcp__files__read_file") is None
    assert everything(registry).input_schema("mcp__files__read_file") == {"type": "object", "properties": {}}
