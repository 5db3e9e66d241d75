"""p11: what a code view's ``search_tools`` finds at equal answer tokens: N signatures against 5 schemas (issue 58).

``python -m bench.code_search [--lexical]`` (or ``python -m bench p11``). Offline, no process and no
host: over ``bench p7``'s retrieval set (``bench.retrieval``: the catalogs of 26 real servers, 413
tools, and 235 requests in a user's words, each with every tool that answers it), each answer is
the exact text the sidecar would send, made by the functions the sidecar calls. Two answers per
request:

* **search@5**, a search view's ``search_tools`` at its default limit (``DEFAULT_SEARCH_LIMIT``):
  ``{"tools": describe(hits), "ranking": ...}`` as ``CatalogSearch`` writes it (``json.dumps``,
  ``ensure_ascii=False``), the name, title, description and full ``inputSchema`` of each hit;
* **code@N**, N = 1..50 (``MAX_SEARCH_LIMIT``), a code view's ``search_tools`` with ``limit = N``
  as ``CodeMode._search`` writes it: ``from tools import <modules>``, then each hit's typed
  signature and its description's first sentence (``ViewApi.signatures``), over the API of every
  tool of the catalog grouped by server as a code view groups them (``ViewApi.of_tools``).

Both rank as a view does (``host.catalog_search.rank``): BM25 (``catalog.search``) fused with the
semantic index (``catalog.fusion.fuse``; the ``search`` extra's wordllama, loaded as ``bench p7``
loads it), what a view answers with once the model is ready, and BM25 alone, what it answers with
before (or without the extra); ``--lexical`` measures that one only, with no model. The fusion is
recomputed for each N: it is not a prefix of a longer one (the lexical best always keeps a place).

**Tokens**: the answer's text block, what a host shows its model (a search view's
``structuredContent`` copy is left out, as in p10), in UTF-8 bytes / ``BYTES_PER_TOKEN``, rounded
up: ``catalog.token_estimate``'s rule. **Recall** R@N: the share of requests with at least one
answering tool among the N hits (``bench.retrieval.scores``' R@k; the run checks its R@5 against it).

Reported: per N, the median and mean tokens of code@N and R@N (overall and per half of the set),
beside search@5's; the largest N whose median *and* mean stay at or under search@5's ("equal answer
tokens") and R@N there; ``detail=true``'s tokens (``ViewApi.details``) for 1 and 3 hits; and the
default ``limit`` it suggests (``recommend``): within the equal-tokens N, the smallest N that finds an
answering tool for as many requests, but one, chosen on the ``tune`` half only (as p7 chooses its
weights) and reported on ``held-out`` too; the largest of the two rankings' (a view answers by BM25
alone until the model is ready, or without the extra).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Final

from bench.retrieval import HALVES, Ask, Rankers, load_catalogs, load_set, scores
from supervisor.catalog.fusion import DEPTH, Scored, fuse
from supervisor.catalog.registry import RegisteredTool
from supervisor.catalog.search import Match, ToolIndex, describe
from supervisor.catalog.semantic import Embedder, load_embedder
from supervisor.catalog.token_estimate import BYTES_PER_TOKEN
from supervisor.code.api import ViewApi
from supervisor.config.views import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT

SEARCH_LIMIT: Final = DEFAULT_SEARCH_LIMIT
"""The search view's answer the code view's is held against: its default limit."""
LIMITS: Final = range(1, MAX_SEARCH_LIMIT + 1)
DETAIL_HITS: Final = (1, 3)
Ranker = Callable[[str, int], list[RegisteredTool]]
"""A view's ranking: the ``limit`` best tools for a query (``host.catalog_search.rank``)."""


def tokens(text: str) -> int:
    """An answer's estimated tokens: its UTF-8 bytes / ``BYTES_PER_TOKEN``, rounded up."""
    return math.ceil(len(text.encode()) / BYTES_PER_TOKEN)


def search_answer(hits: Sequence[RegisteredTool], ranking: str) -> str:
    """A search view's ``search_tools`` text (``CatalogSearch._search``)."""
    payload = {"tools": describe(Match(entry, 0.0) for entry in hits), "ranking": ranking}
    return json.dumps(payload, ensure_ascii=False)


def code_answer(api: ViewApi, hits: Sequence[RegisteredTool], query: str, *, detail: bool = False) -> str:
    """A code view's ``search_tools`` text (``CodeMode._search``)."""
    names = [entry.key for entry in hits]
    text = api.details(names) if detail else api.signatures(names)
    if not text:
        return f"no tool of this view matches {query!r}: try other words"
    if detail:
        return text
    modules = sorted({api.by_public[name].module for name in names if name in api.by_public})
    return f"from tools import {', '.join(modules)}\n{text}"


def lexical_ranker(entries: Sequence[RegisteredTool]) -> Ranker:
    """BM25 alone, as ``rank`` answers before the model is ready (or without it)."""
    index = ToolIndex(entries)
    return lambda query, limit: [match.entry for match in index.search(query, limit)]


def fused_ranker(rankers: Rankers) -> Ranker:
    """BM25 fused with the semantic index, as ``rank`` answers once the model is ready.

    The two rankings to ``DEPTH`` are made once per query (the last one kept), then fused for each limit.
    """
    model, vectors, index = rankers.model, rankers.vectors, rankers.lexical_index
    assert model is not None and vectors is not None

    @lru_cache(maxsize=1)
    def both(query: str) -> tuple[list[Scored], list[Scored]]:
        words = [(match.entry, match.score) for match in index.search(query, DEPTH)]
        return words, vectors.search(model.embed([query])[0], DEPTH)

    return lambda query, limit: fuse(*both(query), limit)


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer to one request: its estimated tokens, and whether an answering tool is among its hits."""

    tokens: int
    hit: bool


def answered(ask: Ask, hits: Sequence[RegisteredTool]) -> bool:
    """R@k's test: any tool that answers ``ask`` is among ``hits``."""
    return any(entry.key in ask.tools for entry in hits)


@dataclass(frozen=True, slots=True)
class Measured:
    """Every request's answers, in the set's order."""

    asks: Sequence[Ask]
    search: Sequence[Answer]
    """search@``SEARCH_LIMIT``."""
    code: dict[int, Sequence[Answer]]
    """N -> code@N."""
    details: dict[int, Sequence[int]]
    """hits -> ``detail=true``'s tokens."""


def measure(
    asks: Sequence[Ask], entries: Sequence[RegisteredTool], ranker: Ranker, ranking: str, limits: Iterable[int] = LIMITS
) -> Measured:
    """Both views' answers to every request (module docstring); ``ranking`` is what the search view's answer says."""
    api = ViewApi.of_tools(entries)
    limits = list(limits)
    search: list[Answer] = []
    code: dict[int, list[Answer]] = {n: [] for n in limits}
    details: dict[int, list[int]] = {n: [] for n in DETAIL_HITS}
    for ask in asks:
        hits = ranker(ask.ask, SEARCH_LIMIT)
        search.append(Answer(tokens(search_answer(hits, ranking)), answered(ask, hits)))
        for n in limits:
            hits = ranker(ask.ask, n)
            code[n].append(Answer(tokens(code_answer(api, hits, ask.ask)), answered(ask, hits)))
        for n in DETAIL_HITS:
            details[n].append(tokens(code_answer(api, ranker(ask.ask, n), ask.ask, detail=True)))
    return Measured(asks, search, dict(code), dict(details))


@dataclass(frozen=True, slots=True)
class Row:
    """One answer's figures over a set of requests."""

    median: float
    mean: float
    recall: float
    by_half: dict[str, float]
    """``tune`` / ``held-out`` -> R."""


def row(asks: Sequence[Ask], answers: Sequence[Answer]) -> Row:
    """The median and mean tokens of ``answers`` and their recall, overall and per half."""
    halves = {
        half: statistics.fmean(a.hit for ask, a in zip(asks, answers, strict=True) if ask.half == half)
        for half in HALVES
        if any(ask.half == half for ask in asks)
    }
    return Row(
        statistics.median(a.tokens for a in answers),
        statistics.fmean(a.tokens for a in answers),
        statistics.fmean(a.hit for a in answers),
        halves,
    )


def equal_tokens(search: Row, code: dict[int, Row]) -> int | None:
    """The largest N whose median and mean tokens are both at or under the search view's (None: not even 1)."""
    fits = [n for n, r in code.items() if r.median <= search.median and r.mean <= search.mean]
    return max(fits, default=None)


def recommend(measured: Measured, half: str = HALVES[0]) -> tuple[int, int]:
    """The equal-tokens N on ``half`` and the default it suggests: the smallest N that finds the tool for as many
    of ``half``'s requests as the equal-tokens N does, but one (as much recall, within one request, for fewer
    tokens). None fitting the search view's tokens: 1."""
    picked = [i for i, ask in enumerate(measured.asks) if ask.half == half]
    asks = [measured.asks[i] for i in picked]
    search = row(asks, [measured.search[i] for i in picked])
    code = {n: row(asks, [answers[i] for i in picked]) for n, answers in measured.code.items()}
    top = equal_tokens(search, code) or min(code)
    found = {n: sum(answers[i].hit for i in picked) for n, answers in measured.code.items()}
    return top, min(n for n in code if n <= top and found[n] >= found[top] - 1)


def table(measured: Measured, ranking: str) -> str:
    """The report: search@5 against code@N, per N (markdown)."""
    asks = measured.asks
    search = row(asks, measured.search)
    code = {n: row(asks, answers) for n, answers in measured.code.items()}
    equal = equal_tokens(search, code)
    by_median = max((n for n, r in code.items() if r.median <= search.median), default=None)
    by_mean = max((n for n, r in code.items() if r.mean <= search.mean), default=None)
    tune, default = recommend(measured)
    there = "no N fits"
    if equal is not None:
        there = (
            f"R@{equal} {code[equal].recall:.3f} against search@{SEARCH_LIMIT}'s R@{SEARCH_LIMIT} {search.recall:.3f}, "
            f"at {code[equal].median:g} median tokens against {search.median:g}"
        )
    halves = " | ".join(f"R {half}" for half in HALVES)
    lines = [
        f"ranking: {ranking}; {len(asks)} requests; tokens = ceil(UTF-8 bytes / {BYTES_PER_TOKEN:g})",
        "",
        f"| answer | median tokens | mean tokens | R | {halves} |",
        "|---|---:|---:|---:|" + "---:|" * len(HALVES),
        _line(f"search@{SEARCH_LIMIT} (schemas)", search),
    ]
    for n, r in code.items():
        mark = " ← equal tokens" if n == equal else ""
        mark += " ← suggested default" if n == default else ""
        lines.append(_line(f"code@{n}{mark}", r))
    lines += [
        "",
        f"equal answer tokens: code@{equal} (median alone: code@{by_median}, mean alone: code@{by_mean}); {there}",
        f"on the tune half: equal tokens at code@{tune}; suggested default (the smallest N that finds as many "
        f"there, but one): {default}, R@{default} tune {code[default].by_half.get(HALVES[0], math.nan):.3f}, "
        f"held-out {code[default].by_half.get(HALVES[1], math.nan):.3f}, at {code[default].median:g} median tokens "
        f"({code[default].median / search.median:.0%} of search@{SEARCH_LIMIT}'s)",
    ]
    for n, figures in measured.details.items():
        lines.append(
            f"detail=true, {n} hit{'s' if n > 1 else ''}: median {statistics.median(figures):g}, "
            f"mean {statistics.fmean(figures):.1f} tokens"
        )
    return "\n".join(lines)


def _line(name: str, r: Row) -> str:
    halves = " | ".join(f"{r.by_half.get(half, math.nan):.3f}" for half in HALVES)
    return f"| {name} | {r.median:g} | {r.mean:.1f} | {r.recall:.3f} | {halves} |"


def _checked(measured: Measured, ranker: Ranker) -> None:
    """This bench's R@5 is ``bench p7``'s (``retrieval.scores``) for the same ranking."""
    ours = statistics.fmean(answer.hit for answer in measured.search)
    theirs = scores(lambda query: [entry.key for entry in ranker(query, SEARCH_LIMIT)], measured.asks)["all"]["R@5"]
    assert math.isclose(ours, theirs), (ours, theirs)


async def run(quick: bool = False, lexical: bool = False, model_name: str = "wordllama") -> dict[str, Any]:
    """Measure with both rankings (BM25 alone with ``lexical``), print the reports; ``quick`` changes nothing."""
    del quick  # one pass is the whole measurement: nothing here is timed
    asks = load_set()
    entries, about, _ = load_catalogs()
    print(f"\n== p11: a code view's search_tools against a search view's, {len(entries)} tools, {len(asks)} requests")
    model: Embedder | None = None if lexical else load_embedder(model_name, None)
    rankers: list[tuple[str, Ranker]] = [("lexical", lexical_ranker(entries))]
    if model is not None:
        rankers.insert(0, ("fused", fused_ranker(Rankers(entries, model, about))))
    report: dict[str, Any] = {}
    for ranking, ranker in rankers:
        measured = measure(asks, entries, ranker, ranking)
        _checked(measured, ranker)
        print(f"\n{table(measured, ranking)}")
        code = {n: row(asks, answers) for n, answers in measured.code.items()}
        search = row(asks, measured.search)
        tune, default = recommend(measured)
        report[ranking] = {
            f"search@{SEARCH_LIMIT}": asdict(search),
            "code": {n: asdict(r) for n, r in code.items()},
            "equal_tokens": equal_tokens(search, code),
            "equal_tokens_tune": tune,
            "suggested": default,
        }
    # One default serves every ranking: a view answers by BM25 alone until the model is ready, or without it.
    suggested = max(figures["suggested"] for figures in report.values())
    print(f"\nsuggested default limit of a code view (the largest of the rankings' suggestions): {suggested}")
    return {"p11": {**report, "suggested_default": suggested}}


def main() -> None:
    import trio  # noqa: PLC0415 - only to run ``run`` as ``bench.__main__`` does

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lexical", action="store_true", help="BM25 alone (no model)")
    parser.add_argument("--model", default="wordllama", help="the semantic model (bench p7's --model)")
    args = parser.parse_args()
    trio.run(lambda: run(lexical=args.lexical, model_name=args.model))


if __name__ == "__main__":
    main()
