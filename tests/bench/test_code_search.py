"""p11's core on a tiny in-memory catalog: the answers are the sidecar's own, their tokens and recall add up.

No process and no model: the ranking is BM25 alone, which both views answer with before a model is ready.
"""

from __future__ import annotations

import json
import math
from typing import Any, cast

import mcp_types as types
import trio

from bench.code_search import (
    Answer,
    Measured,
    Row,
    code_answer,
    equal_tokens,
    lexical_ranker,
    measure,
    recommend,
    row,
    search_answer,
    tokens,
)
from bench.retrieval import Ask
from supervisor.catalog.registry import RegisteredTool, Registry
from supervisor.catalog.search import ToolIndex
from supervisor.catalog.token_estimate import BYTES_PER_TOKEN
from supervisor.catalog.views import SEARCH_TOOL, CatalogView, ViewRules
from supervisor.code.api import ViewApi
from supervisor.host.catalog_search import CatalogSearch
from supervisor.host.code_mode import CodeMode

BOUND_SEC = 10.0
_PATH = {"type": "object", "properties": {"path": {"type": "string", "description": "Where"}}, "required": ["path"]}


def _registry() -> Registry:
    registry = Registry()
    registry.swap(
        "files",
        [
            types.Tool(name="read_file", description="Read a file. Returns its text, café too.", input_schema=_PATH),
            types.Tool(name="write_file", description="Write text to a file.", input_schema=_PATH),
            types.Tool(
                name="stat",
                title="File size",
                description="How large a file is, in bytes.",
                input_schema=_PATH,
                output_schema={"type": "object", "properties": {"bytes": {"type": "integer"}}},
            ),
        ],
    )
    registry.swap(
        "git-local",
        [
            types.Tool(name="git_log", description="Show the commit history.", input_schema={"type": "object"}),
            types.Tool(name="git_status", description="Show the working tree's status.", input_schema=_PATH),
        ],
    )
    return registry


def _catalog() -> list[RegisteredTool]:
    return _registry().tool_entries()


ASKS = [
    Ask("read a file's text", frozenset({"mcp__files__read_file"}), "plain", "tune"),
    Ask("commit history", frozenset({"mcp__git-local__git_log"}), "plain", "held-out"),
    Ask("write down the file size", frozenset({"mcp__git-local__git_log", "mcp__files__stat"}), "synonym", "tune"),
    Ask("weather in Paris", frozenset({"mcp__files__write_file"}), "plain", "held-out"),
]


def test_tokens_are_the_utf8_bytes_over_bytes_per_token_rounded_up() -> None:
    assert BYTES_PER_TOKEN == 4.0
    assert [tokens(text) for text in ("", "a", "abcd", "abcde", "éé", "ééé")] == [0, 1, 1, 2, 1, 2]


def test_the_code_api_has_a_module_per_server_of_the_catalog() -> None:
    assert list(ViewApi.of_tools(_catalog()).servers.values()) == ["files", "git-local"]


async def test_the_answers_are_the_text_the_sidecar_sends_for_the_same_query_and_limit() -> None:
    registry = _registry()
    entries = registry.tool_entries()

    async def settled() -> None:
        pass

    code_view = CatalogView(registry, ViewRules("code", search=True, code=True))
    search_view = CatalogView(registry, ViewRules("search", search=True))
    coding = CodeMode(cast(Any, None), code_view, settled)  # a search reaches neither the Front nor the sandbox
    searching = CatalogSearch(search_view, settled)
    ranker, api = lexical_ranker(entries), ViewApi.of_tools(entries)
    ctx: Any = None
    with trio.fail_after(BOUND_SEC):
        for ask in ASKS:
            for limit in (1, 2, 5):
                hits = ranker(ask.ask, limit)
                for detail in (False, True):
                    got = await coding.call(ctx, _search(ask.ask, limit=limit, detail=detail), _no)
                    assert _text(got) == code_answer(api, hits, ask.ask, detail=detail)
                got = await searching.call(ctx, _search(ask.ask, limit=limit), _no)
                assert _text(got) == search_answer(hits, "lexical")


def _search(query: str, **arguments: Any) -> types.CallToolRequestParams:
    return types.CallToolRequestParams(name=SEARCH_TOOL, arguments={"query": query, **arguments})


async def _no(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    raise AssertionError("search_tools called a tool")


def _text(result: types.CallToolResult | types.InputRequiredResult) -> str:
    assert isinstance(result, types.CallToolResult)
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def test_each_answer_costs_its_own_text_and_hits_when_an_answering_tool_is_among_its_hits() -> None:
    entries = _catalog()
    ranker, api = lexical_ranker(entries), ViewApi.of_tools(entries)
    measured = measure(ASKS, entries, ranker, "lexical", limits=[1, 2, 5])
    index = ToolIndex(entries)
    for number, ask in enumerate(ASKS):
        for n, answers in measured.code.items():
            hits = [match.entry for match in index.search(ask.ask, n)]
            text = code_answer(api, hits, ask.ask)
            assert answers[number] == Answer(math.ceil(len(text.encode()) / 4), bool(ask.tools & {e.key for e in hits}))
        top = [match.entry for match in index.search(ask.ask, 5)]
        payload = json.loads(search_answer(top, "lexical"))
        assert [tool["name"] for tool in payload["tools"]] == [entry.key for entry in top]
        assert measured.search[number].tokens == tokens(search_answer(top, "lexical"))
        assert measured.details[1][number] == tokens(code_answer(api, top[:1], ask.ask, detail=True))
    first = measured.code[1]
    assert [answer.hit for answer in first] == [True, True, False, False]
    assert [answer.hit for answer in measured.code[2]] == [True, True, True, False], "stat comes second"
    assert [answer.hit for answer in measured.search] == [True, True, True, False]
    assert first[3].tokens == tokens("no tool of this view matches 'weather in Paris': try other words")
    code_one = "from tools import files\nfiles.read_file(*, path: str) -> str\n    Read a file"
    assert first[0].tokens == math.ceil(len(code_one.encode()) / 4)


def test_a_row_has_the_median_and_mean_tokens_and_the_share_of_requests_answered_per_half() -> None:
    answers = [Answer(10, True), Answer(30, False), Answer(20, True), Answer(100, True)]
    assert row(ASKS, answers) == Row(25, 40, 0.75, {"tune": 1.0, "held-out": 0.5})


def test_equal_tokens_is_the_largest_n_within_both_the_median_and_the_mean() -> None:
    search = Row(100, 120, 0.5, {})
    code = {
        1: Row(40, 50, 0.4, {}),
        2: Row(90, 110, 0.6, {}),
        3: Row(100, 125, 0.7, {}),  # the median fits, the mean does not
        4: Row(130, 118, 0.8, {}),
    }
    assert equal_tokens(search, code) == 2
    assert equal_tokens(Row(30, 30, 0.5, {}), code) is None


def test_the_suggested_default_is_the_smallest_n_that_finds_as_many_tune_requests_but_one() -> None:
    def answers(cost: int, *hits: bool) -> list[Answer]:
        return [Answer(cost, hit) for hit in hits]

    # On the tune half (requests 0 and 2): 1 to 3 fit search@5's 25 tokens; 1 finds none, 2 one, 3 both.
    measured = Measured(
        ASKS,
        answers(25, False, True, True, True),
        {
            1: answers(5, False, False, False, False),
            2: answers(15, True, False, False, False),
            3: answers(25, True, False, True, False),
            4: answers(35, True, True, True, True),
        },
        {},
    )
    assert recommend(measured) == (3, 2)
    assert recommend(measured, "held-out") == (3, 1), "finding none of the held-out half at 3, 1 finds as many"
