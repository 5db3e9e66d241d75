"""The semantic index and its fusion with BM25 (issue 48), on the real catalogs saved in bench/catalogs.

The model is the one the ``search`` extra ships (WordLlama, weights in its wheel), loaded for real
with every socket refused, so a test fails if loading reaches for a network. The engine's worker
threads are real too: waits are bounded by ``trio.fail_after`` and end on the engine's own progress
event (``wait_settled``), never on a sleep.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final, cast

import mcp_types as types
import pytest
import trio

from supervisor.catalog import semantic
from supervisor.catalog.fusion import fuse, rrf
from supervisor.catalog.registry import Registry
from supervisor.catalog.semantic import (
    ABOUT_MAX_CHARS,
    Embedder,
    SemanticUnavailable,
    about_line,
    embedding_text,
    first_sentence,
    load_embedder,
)
from supervisor.catalog.semantic_engine import SemanticConfig, SemanticEngine
from supervisor.catalog.views import CatalogView, ViewRules
from supervisor.host.catalog_search import CatalogSearch

CATALOGS: Final = Path(__file__).parents[2] / "bench" / "catalogs"
BOUND_SEC: Final = 60.0
FOUND_ONLY_BY_WORDS: Final = {
    "stage these two files": "mcp__git__git_add",
    "take a picture of what the page looks like": "mcp__playwright__browser_take_screenshot",
    "accept the popup alert": "mcp__playwright__browser_handle_dialog",
}
"""Requests whose tool BM25 ranks first and the embedding not in the first five (measured; the set's first three).

The fused scores alone would leave most such tools out (the semantic weight is 0.8): ``fuse`` keeps the
lexical ranking's first tool among the five, and these fail if it does not."""
FOUND_ONLY_BY_MEANING: Final = {
    "find repositories about rust web frameworks": "mcp__github__search_repositories",
    "make a brand new repo on github": "mcp__github__create_repository",
    "reply on issue 42": "mcp__github__add_issue_comment",
    "open notes.txt and show me its text": "mcp__fs__read_text_file",
}
"""Requests whose tool the embedding ranks first and BM25 not in the first five (measured)."""


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may download: every socket connection fails."""

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("no network in the semantic index's tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def saved_registry(servers: Sequence[str] | None = None) -> Registry:
    registry = Registry()
    for file in sorted(CATALOGS.glob("*.json")):
        saved = json.loads(file.read_text())
        if servers is None or saved["server"] in servers:
            registry.swap(saved["server"], [types.Tool.model_validate(tool) for tool in saved["tools"]])
    return registry


def search_view(registry: Registry, engine: SemanticEngine | None) -> CatalogView:
    view = CatalogView(registry, ViewRules("pick", search=True))
    view.semantic = engine
    return view


async def found(search: CatalogSearch, query: str, limit: int = 5) -> tuple[list[str], str]:
    params = types.CallToolRequestParams(name="search_tools", arguments={"query": query, "limit": limit})

    async def no_call(*_args: object) -> types.CallToolResult:
        raise AssertionError("search_tools calls no tool")

    result = await search.call(cast("Any", None), params, no_call)
    assert isinstance(result, types.CallToolResult)
    payload = cast("dict[str, Any]", result.structured_content)
    return [tool["name"] for tool in payload["tools"]], payload["ranking"]


async def nothing() -> None:
    pass


def test_the_packaged_model_loads_with_no_network_and_embeds_unit_rows() -> None:
    model = load_embedder()
    rows = model.embed(["list the files in a folder", "read one file", "what time is it in Tokyo"])
    assert rows.shape == (3, 256)
    similarity = rows @ rows.T
    assert abs(float(similarity[0, 0]) - 1.0) < 1e-4
    assert similarity[0, 1] > similarity[0, 2], "files are nearer files than clocks"
    assert "wordllama" in model.model_id


def test_a_model_that_needs_a_path_or_a_missing_library_is_refused_with_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SemanticUnavailable, match="needs 'path'"):
        load_embedder("sentence-transformers")
    monkeypatch.setitem(semantic._REQUIRES, "wordllama", "wordllama_hidden_for_this_test")
    with pytest.raises(SemanticUnavailable, match=r"pip install 'trio-mcp-supervisor\[search\]'"):
        load_embedder()


def test_the_embedded_text_holds_the_server_the_name_in_words_and_the_descriptions_first_sentence() -> None:
    (entry,) = [e for e in saved_registry(["git"]).tool_entries() if e.key == "mcp__git__git_diff_staged"]
    text = embedding_text(entry, {"git": "a local git checkout"})
    assert text == "git: a local git checkout. git diff staged. Shows changes that are staged for commit"
    assert "repo_path" in entry.shown.input_schema["properties"], "the arguments are the lexical index's alone"
    (long,) = [e for e in saved_registry(["fs"]).tool_entries() if e.key == "mcp__fs__list_directory"]
    assert embedding_text(long) == (
        "fs. list directory. List Directory. Get a detailed listing of all files and directories in a specified path."
    ), "the usage notes after the first sentence are the lexical index's alone"


def test_a_first_sentence_ends_at_a_full_stop_question_or_exclamation_mark_before_a_space() -> None:
    assert first_sentence("Read a file.  Then more.") == "Read a file."
    assert first_sentence("Is it v1.2?\nYes.") == "Is it v1.2?"
    assert first_sentence("No end\n  here") == "No end here"


@pytest.mark.parametrize(
    ("description", "instructions", "line"),
    [
        ("Files on this machine.", "Use read_file first. Then write.", "Files on this machine."),
        (
            None,
            "GitLab projects, issues and merge requests. Always pass the project id.\nMore.",
            "GitLab projects, issues and merge requests.",
        ),
        (None, "  A   browser\n driven by Playwright  ", "A browser driven by Playwright"),
        (None, None, ""),
        ("x" * 500, None, "x" * ABOUT_MAX_CHARS),
    ],
)
def test_a_servers_line_is_its_description_else_the_first_sentence_of_its_instructions(
    description: str | None, instructions: str | None, line: str
) -> None:
    assert about_line(description, instructions) == line


def test_fusion_adds_the_normalized_scores_and_breaks_ties_for_the_lexical_ranking() -> None:
    a, b, c = saved_registry(["time"]).tool_entries()[0], *saved_registry(["fetch", "thinking"]).tool_entries()
    # b: half of the best BM25 and the best cosine (0.1 + 0.8); a: the best BM25 alone (0.2); c: the lowest cosine.
    assert [e.key for e in fuse([(a, 8.0), (b, 4.0)], [(b, 0.9), (c, 0.1)], 3)] == [b.key, a.key, c.key]
    assert [e.key for e in fuse([(a, 2.0)], [(c, 0.7)], 2)] == [a.key, c.key], "a tie goes to the words"
    assert [e.key for e in rrf([(a, 8.0), (b, 4.0)], [(b, 0.9), (c, 0.1)], 3)] == [b.key, a.key, c.key]


def test_fusion_keeps_the_lexical_rankings_first_tool_among_the_answer_in_its_last_place() -> None:
    first, *others = saved_registry(["github"]).tool_entries()[:11]
    lexical = [(first, 9.0)]
    semantic = [(entry, 0.9 - 0.05 * place) for place, entry in enumerate(others)]
    # The ten semantic tools score 0.8 down to 0; first, the words' best alone, 0.2: eighth by the scores.
    assert [e.key for e in fuse(lexical, semantic, 5)] == [e.key for e in others[:4]] + [first.key]
    assert [e.key for e in fuse(lexical, semantic, 1)] == [others[0].key], "the first place is the scores'"
    assert [e.key for e in fuse(lexical, semantic[:2], 5)] == [others[0].key, first.key, others[1].key]


@pytest.fixture(scope="module")
def packaged_model() -> Iterator[Embedder]:
    yield load_embedder()


async def test_search_fuses_so_both_what_only_words_find_and_what_only_meaning_finds_are_in_the_first_five(
    packaged_model: Embedder,
) -> None:
    engine = SemanticEngine(SemanticConfig(), None, loader=lambda _model, _path: packaged_model)
    view = search_view(saved_registry(), engine)
    search = CatalogSearch(view, nothing)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(engine.run)
            await engine.wait_settled()
            assert view.semantic_index() is None, "the first look asks for the vectors"
            await engine.wait_settled()
            assert view.semantic_index() is not None
            for query, tool in {**FOUND_ONLY_BY_WORDS, **FOUND_ONLY_BY_MEANING}.items():
                names, ranking = await found(search, query)
                assert ranking == "fused"
                assert tool in names, f"{query!r}: {tool} not in {names}"
            nursery.cancel_scope.cancel()


async def test_search_answers_lexically_while_the_model_loads_and_the_view_it_asked_for_is_indexed_once_loaded(
    packaged_model: Embedder,
) -> None:
    release = threading.Event()

    def slow_loader(_model: str, _path: str | None) -> Embedder:
        release.wait(BOUND_SEC)
        return packaged_model

    engine = SemanticEngine(SemanticConfig(), None, loader=slow_loader)
    view = search_view(saved_registry(["git", "fs"]), engine)
    search = CatalogSearch(view, nothing)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(engine.run)  # returns while the loader still blocks
            try:
                assert engine.state == "loading"
                assert "lexical until it is ready" in engine.describe()
                names, ranking = await found(search, "stage these two files")
                assert ranking == "lexical"
                assert "mcp__git__git_add" in names
            finally:
                release.set()
            await engine.wait_settled()  # loaded, then the view asked for while loading: no second ask
            assert (await found(search, "stage these two files"))[1] == "fused"
            assert engine.describe().startswith("semantic index active (wordllama")
            nursery.cancel_scope.cancel()


async def test_a_restart_over_the_same_catalog_embeds_nothing_and_a_changed_tool_alone_is_embedded(
    tmp_path: Path, packaged_model: Embedder
) -> None:
    registry = saved_registry()
    count = len(registry.tool_entries())

    async def one_life(registry: Registry) -> int:
        engine = SemanticEngine(SemanticConfig(), tmp_path, loader=lambda _model, _path: packaged_model)
        view = search_view(registry, engine)
        async with trio.open_nursery() as nursery:
            await nursery.start(engine.run)
            await engine.wait_settled()
            view.semantic_index()
            await engine.wait_settled()
            assert view.semantic_index() is not None
            nursery.cancel_scope.cancel()
        return engine.embedded

    with trio.fail_after(BOUND_SEC):
        assert await one_life(registry) == count
        assert list((tmp_path / "search").glob("*.npz")), "the vectors are saved beside the state"
        assert await one_life(saved_registry()) == 0, "a restart embeds nothing again"
        changed = saved_registry()
        tool = changed.tool_entries()[0]
        changed.swap(
            tool.owner,
            [
                e.shown.model_copy(update={"description": "Changed."}) if e.key == tool.key else e.shown
                for e in changed.tool_entries()
                if e.owner == tool.owner
            ],
        )
        assert await one_life(changed) == 1


async def test_without_the_extra_search_stays_lexical_and_the_engine_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(semantic._REQUIRES, "wordllama", "wordllama_hidden_for_this_test")
    engine = SemanticEngine(SemanticConfig(), None)
    view = search_view(saved_registry(["git", "fs"]), engine)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(engine.run)
            await engine.wait_settled()
            assert engine.state == "failed"
            assert "pip install 'trio-mcp-supervisor[search]'" in engine.describe()
            names, ranking = await found(CatalogSearch(view, nothing), "stage these two files")
            assert ranking == "lexical"
            assert "mcp__git__git_add" in names
            nursery.cancel_scope.cancel()
