"""The search views' BM25 index (``catalog.search``, issue 26): ranking, words, limits, ties, rebuilds."""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from typing import Any

import mcp_types as types
import pytest

from supervisor.catalog import search
from supervisor.catalog.registry import RegisteredTool, Registry
from supervisor.catalog.search import (
    K1,
    NAME_WEIGHT,
    STOP_WORDS,
    TITLE_WEIGHT,
    B,
    ToolIndex,
    describe,
    stem,
    terms,
    tool_terms,
)


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


# -- the one-pass build against the per-tool definition ------------------------------------------


def _reference_terms(text: str) -> list[str]:
    """The module docstring's words, the slow way: a regex and a stem per word, no cache."""
    words = (word.lower() for token in text.split() for word in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", token))
    return [stem(word) for word in words if len(word) > 1 and word not in STOP_WORDS]


def _reference_bag(entry: RegisteredTool) -> Counter[str]:
    """One tool's weighted term counts as the module docstring defines them, field by field."""
    tool = entry.shown
    name = entry.key.removeprefix(f"mcp__{entry.owner}__").replace("_", " ").replace("-", " ")
    text = [entry.owner, tool.description or ""]
    properties = tool.input_schema.get("properties")
    if isinstance(properties, dict):
        for argument, schema in properties.items():
            text.append(str(argument))
            described = schema.get("description") if isinstance(schema, dict) else None
            if isinstance(described, str):
                text.append(described)
    found = _reference_terms(name) * NAME_WEIGHT + _reference_terms(tool.title or "") * TITLE_WEIGHT
    return Counter(found + _reference_terms(" ".join(text)))


def _reference_search(entries: list[RegisteredTool], query: str, limit: int) -> list[tuple[str, float]]:
    """BM25 over ``_reference_bag``s, scored tool by tool and term by term, in the index's order of terms."""
    ordered = sorted(entries, key=lambda entry: entry.key)
    bags = [_reference_bag(entry) for entry in ordered]
    lengths = [sum(bag.values()) for bag in bags]
    average = sum(lengths) / len(lengths)
    scores: dict[int, float] = {}
    for term in set(terms(query)):
        holding = [index for index, bag in enumerate(bags) if term in bag]
        idf = (K1 + 1) * math.log(1 + (len(bags) - len(holding) + 0.5) / (len(holding) + 0.5))
        for index in holding:
            weight = bags[index][term]
            norm = K1 * (1 - B + B * lengths[index] / average)
            scores[index] = scores.get(index, 0.0) + idf * weight / (weight + norm)
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [(ordered[index].key, score) for index, score in best]


_SHARED_ARGUMENTS: dict[str, Any] = {
    "owner": {"type": "string", "description": "The repository owner (a user or an organization)."},
    "repo": {"type": "string", "description": "The repository's name."},
    "page": {"type": "integer", "description": "Page number, from 1."},
    "perPage": {"type": "integer"},
}


def _varied_catalog() -> Registry:
    """Names in every style, titles, punctuation, tokens of several words in prose, odd schemas, shared arguments."""
    rng = random.Random(26)
    verbs = ["list", "get", "create", "delete", "search", "archive", "sync", "export"]
    nouns = ["issues", "pull request", "files", "branches", "HTTP server", "résumé", "directories", "tag"]
    styles = ["_".join, lambda words: words[0] + "".join(word.capitalize() for word in words[1:]), "-".join]
    phrases = [
        "Lists the open issues, newest first.",
        "Use list_files first; then call read_file.",
        "Sign-in with OAuth2 (e.g. GitHub) before it.",
        "Returns at most 100 items per page; see ISO 8601 for dates.",
        "A naïve café-style résumé uploader — don't use it.",
        "file file FILE Files: the same word, four times",
        "Fetches a URL like https://example.com/a_b?c=d and the HTTPServer's reply.",
        "",
    ]
    servers: dict[str, list[types.Tool]] = {}
    for number, server in enumerate(["git-hub", "fs", "crm_v2"]):
        tools = []
        for count in range(30):
            words = [rng.choice(verbs), *rng.choice(nouns).split()]
            name = f"{styles[(number + count) % 3](words)}_{count}"
            arguments = dict(rng.sample(sorted(_SHARED_ARGUMENTS.items()), rng.randint(0, 4)))
            if count % 7 == 0:
                arguments["path"] = {"type": "string", "description": f"Where the {words[-1]} is, e.g. ./src."}
            title = " ".join(word.capitalize() for word in words) if count % 4 == 0 else None
            description = " ".join(rng.sample(phrases, rng.randint(0, 3)))
            tools.append(_tool(name, description, title, **arguments))
        servers[server] = tools
    odd: dict[str, Any] = {"flag": True, "3": {"description": ["not", "text"]}, "when": {"description": None}}
    servers["odd"] = [_tool("oddSchema", "Arguments of every shape", **odd), _tool("plain", "Nothing odd here")]
    return _registry(**servers)


_QUERIES = [
    "list the open issues",
    "can you create a pull request please",
    "listOpenIssues",
    "sign in with oauth",
    "HTTP server reply",
    "résumé café",
    "files",
    "the repository owner",
    "page number",
    "iso 8601 dates",
    "archive branches and tags",
    "fetch https example com",
    "read_file list_files",
    "e.g.",
    "odd arguments shape",
    "text",
    "three",
    "zebra",
    "the and of",
    "",
]


@pytest.mark.parametrize("limit", [1, 3, 10, 200])
def test_the_one_pass_index_ranks_and_scores_as_the_tool_by_tool_definition(limit: int) -> None:
    entries = _varied_catalog().tool_entries()
    index = ToolIndex(entries)
    for query in _QUERIES:
        found = [(match.entry.key, match.score) for match in index.search(query, limit)]
        expected = _reference_search(entries, query, limit)
        assert [key for key, _ in found] == [key for key, _ in expected], query
        assert [score for _, score in found] == pytest.approx([score for _, score in expected], rel=1e-12), query


def test_each_tool_keeps_its_terms_as_often_as_they_count() -> None:
    for entry in _varied_catalog().tool_entries():
        assert Counter(tool_terms(entry)) == _reference_bag(entry), entry.key


def test_a_token_makes_the_words_the_pattern_finds_whichever_way_it_is_split() -> None:
    text = (
        "files Files FILES files. (files) 'Files', listFiles HTTPServer getHTTPResponse v2 ISO8601 8601 "
        "caller's e.g. naïve café résumé a A I x_y list_files sign-in https://example.com/a_b?c=d "
        "the The THE don't ÉCOLE Straße \u2460\u2461 \uff14\uff12 \u2026files"  # circled, full-width digits
    )
    tokens = text.split()
    for token in tokens:
        assert terms(token) == _reference_terms(token), token
    assert terms(text) == _reference_terms(text)


def test_a_description_word_of_several_terms_is_indexed_as_those_terms() -> None:
    terms("list_files")  # the caches already know the token, as an earlier query would have left them
    registry = _registry(fs=[_tool("reader", "Call list_files first"), _tool("other", "Lists nothing")])
    index = ToolIndex(registry.tool_entries())
    assert _keys(index, "files") == ["mcp__fs__reader"]
    reader = index.search("files", 1)[0].entry
    assert Counter(tool_terms(reader)) == Counter(["reader"] * NAME_WEIGHT + ["call", "list", "fil", "first", "fs"])


def test_arguments_of_every_shape_are_read_as_the_definition_says() -> None:
    odd: dict[str, Any] = {
        "flag": True,
        "42": {"description": ["not", "text"]},
        "mode": {"description": None},
        "tone": {"description": "Reasons."},
    }
    entry = _registry(odd=[_tool("shape", **odd)]).tool_entries()[0]
    expected = Counter(["shap"] * NAME_WEIGHT + ["odd", "flag", "42", "mod", "ton", "reason"])
    assert Counter(tool_terms(entry)) == expected == _reference_bag(entry)


def test_a_full_cache_is_cleared_and_the_terms_stay_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    caches = (search._WORD_TERM, search._TOKEN_TERMS, search._TOKEN_TERM, search._TEXT_TERMS, search._SEVERAL)
    for cache in caches:
        cache.clear()  # they only save work: this test must see them fill, not find what earlier tests left
    monkeypatch.setattr(search, "_CACHE_MAX", 5)
    monkeypatch.setattr(search, "_TEXTS_MAX", 5)
    entries = _varied_catalog().tool_entries()
    index = ToolIndex(entries)
    for entry in entries:
        assert Counter(tool_terms(entry)) == _reference_bag(entry), entry.key
    for query in _QUERIES:
        expected = _reference_search(entries, query, 10)
        assert [match.entry.key for match in index.search(query, 10)] == [key for key, _ in expected], query
    assert len(search._TOKEN_TERMS) <= 5
    assert len(search._TEXT_TERMS) <= 5
    assert len(search._TOKEN_TERM) <= 5 + 40, "bounded between two descriptions (of at most 40 tokens here)"


def test_searching_adds_nothing_to_the_index() -> None:
    index = ToolIndex(_registry(files=FILES, git=GIT).tool_entries())
    before = {term: list(held) for term, held in index._postings.items()}
    for query in ("zebra quantum", "read the file", "commit logs", "file file file"):
        index.search(query, 5)
    assert index._postings == before
