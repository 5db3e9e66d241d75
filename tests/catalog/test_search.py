"""The search views' BM25 index (``catalog.search``, issue 26): ranking, words, limits, ties, rebuilds."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from supervisor.catalog.registry import RegisteredTool, Registry
from supervisor.catalog.search import ToolIndex, describe, terms, tool_terms


def _tool(name: str, description: str = "", title: str | None = None, **properties: Any) -> types.Tool:
    schema = {"type": "object", "properties": properties}
    return types.Tool(name=name, title=title, description=description, input_schema=schema)


def _registry(**servers: list[types.Tool]) -> Registry:
    registry = Registry()
    for server, tools in servers.items():
        registry.swap(server, tools)
    return registry


FILES = [
    _tool("read_file", "Read the contents of a file as text", path={"type": "string", "description": "Where it is"}),
    _tool("write_file", "Create or overwrite a file with new content"),
    _tool("list_directory", "List the entries of a folder"),
]
GIT = [
    _tool("git_log", "Show the commit logs"),
    _tool("git_status", "Show the working tree status"),
]


def _keys(index: ToolIndex, query: str, limit: int = 5) -> list[str]:
    return [match.entry.key for match in index.search(query, limit)]


def test_the_tool_that_clearly_matches_ranks_first() -> None:
    index = ToolIndex(_registry(files=FILES, git=GIT).tool_entries())
    assert _keys(index, "read the contents of a file")[0] == "mcp__files__read_file"
    assert _keys(index, "show the commit logs")[0] == "mcp__git__git_log"


def test_camel_case_and_snake_case_names_are_split_into_words() -> None:
    assert terms("listOpenIssues") == terms("list open issues") == terms("list_open_issues")
    assert terms("HTTPServer") == terms("http server"), "an acronym ends where the next word starts"
    index = ToolIndex(
        _registry(gh=[_tool("listOpenIssues"), _tool("merge_pull_request"), _tool("fork-repo")]).tool_entries()
    )
    assert _keys(index, "open issues") == ["mcp__gh__listOpenIssues"]
    assert _keys(index, "pull request") == ["mcp__gh__merge_pull_request"]
    assert _keys(index, "repo") == ["mcp__gh__fork-repo"]


def test_plural_ing_ed_and_silent_e_forms_meet() -> None:
    assert terms("listing branches") == terms("list branch")
    assert terms("directories") == terms("directory")
    assert terms("staged changes") == terms("stage change") == terms("staging changing")
    index = ToolIndex(_registry(git=[_tool("create_branch"), _tool("delete_tag")]).tool_entries())
    assert _keys(index, "creating branches") == ["mcp__git__create_branch"]


def test_a_query_that_shares_no_term_with_any_tool_finds_nothing() -> None:
    index = ToolIndex(_registry(files=FILES, git=GIT).tool_entries())
    assert index.search("zebra quantum", 5) == []
    assert index.search("what is the", 5) == [], "stop words alone share nothing"
    assert ToolIndex([]).search("file", 5) == []


def test_limit_is_honoured() -> None:
    tools = [_tool(f"file_tool_{number}", "Works on a file") for number in range(8)]
    index = ToolIndex(_registry(files=tools).tool_entries())
    assert len(index.search("file", 3)) == 3
    assert len(index.search("file", 20)) == 8
    assert index.search("file", 0) == []


def test_ties_are_broken_by_public_name_whatever_order_the_entries_come_in() -> None:
    same = _tool("fetch", "Fetch a URL")
    entries = _registry(zeta=[same], alpha=[same], mid=[same]).tool_entries()
    for order in (entries, entries[::-1]):
        found = ToolIndex(order).search("fetch url", 3)
        assert [match.entry.key for match in found] == ["mcp__alpha__fetch", "mcp__mid__fetch", "mcp__zeta__fetch"]
        assert len({match.score for match in found}) == 1, "a true tie: equal scores"
    assert _keys(ToolIndex(entries[::-1]), "fetch url", 1) == ["mcp__alpha__fetch"], "the cut keeps the first name"


def test_an_index_rebuilt_over_a_changed_list_reflects_the_change_and_the_old_one_stays_as_it_was() -> None:
    registry = _registry(files=FILES, git=GIT)
    before = ToolIndex(registry.tool_entries())
    registry.swap("git", [_tool("git_blame", "Show who changed each line")])
    after = ToolIndex(registry.tool_entries())
    assert _keys(after, "who changed each line", 1) == ["mcp__git__git_blame"]
    assert "mcp__git__git_log" not in _keys(after, "commit logs")
    assert _keys(before, "commit logs", 1) == ["mcp__git__git_log"], "an index never changes once built"
    assert before.search("who changed each line", 5) == []
    assert (len(before), len(after)) == (5, 4)


def test_terms_are_made_once_per_entry_and_a_changed_listing_remakes_only_its_servers() -> None:
    registry = _registry(files=FILES, git=GIT)
    ToolIndex(registry.tool_entries())
    kept = {entry.key: entry.search_terms for entry in registry.tool_entries()}
    assert all(kept.values())
    registry.swap("git", GIT)
    assert registry.tool_entries()[-1].search_terms is kept["mcp__git__git_status"], "the same listing: kept"
    registry.swap("git", [GIT[0], _tool("git_status", "Show the working tree status, briefly")])
    entries: dict[str, RegisteredTool] = {entry.key: entry for entry in registry.tool_entries()}
    assert entries["mcp__git__git_log"].search_terms is None, "a new generation of git: new entries"
    assert tool_terms(entries["mcp__files__read_file"]) is kept["mcp__files__read_file"], "files untouched: kept"
    assert "briefly" in tool_terms(entries["mcp__git__git_status"])
    assert entries["mcp__git__git_status"].search_terms is not None


def test_the_name_counts_more_than_the_description() -> None:
    index = ToolIndex(
        _registry(s=[_tool("archive", "Moves an item away"), _tool("move", "Archives an item")]).tool_entries()
    )
    assert _keys(index, "archive") == ["mcp__s__archive", "mcp__s__move"]
    assert _keys(index, "move") == ["mcp__s__move", "mcp__s__archive"]


def test_describe_gives_the_public_name_title_description_and_input_schema() -> None:
    registry = _registry(files=[*FILES, _tool("stat", "File facts", title="File info")])
    index = ToolIndex(registry.tool_entries())
    read, stat = describe(index.search("read the contents of a file", 1)), describe(index.search("file facts", 1))
    assert read == [
        {
            "name": "mcp__files__read_file",
            "description": "Read the contents of a file as text",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string", "description": "Where it is"}}},
        }
    ], "no title: no title key"
    assert stat[0]["name"] == "mcp__files__stat"
    assert stat[0]["title"] == "File info"
