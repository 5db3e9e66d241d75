"""BM25 search over a view's tools: the index behind a search view's ``search_tools`` (issue 26).

One ``ToolIndex`` holds one catalog: it is built whole from a list of entries
and never changed afterwards, so a rebuild is atomic by construction (the view
swaps its reference to the new index in one synchronous step).

What is indexed, per tool, as term counts in one bag of words (a BM25F-style
field weighting by repetition): the public name without its ``mcp__<server>__``
prefix (x3), the title (x2), and once each the server's name, the description,
and each argument's name and description. Text is split at whitespace, then at
anything but letters and digits and at camelCase humps; words are lower-cased,
one-letter words and English function words dropped, and each word cut to a
light stem (plural, ``-ing``, ``-ed``, silent ``e``), so "listing branches"
finds ``list_branches``. Queries go through the same ``terms``.

Why a plain implementation and not ``tantivy`` or ``bm25s``: ``bench/search.py``
(p7) measures all three on the same 5,000 synthetic tools, and their recall on
90 requests in a user's words over 127 tools of 10 real servers (a box with
``python loop`` ~50 ms; ``bench/RESULTS.md``, "Search (issue 26)"):

=======  ===========  =====================  ==========  ==================  ==========
engine   first build  rebuild, same entries  query p50   import, RSS         recall@1/5
=======  ===========  =====================  ==========  ==================  ==========
plain    79-85 ms     17-18 ms               228-233 µs  3 ms, +0.3 MB       0.47/0.70
tantivy  58-62 ms     51-54 ms               114 µs      2-3 ms, +4.1 MB     0.41/0.67
bm25s    155-166 ms   151-159 ms             55-66 µs    167-189 ms, +37 MB  0.46/0.73
=======  ===========  =====================  ==========  ==================  ==========

Neither library wins both the targets (build <= 50 ms, p50 <= 1 ms) and recall:
tantivy's first build is faster (~24 ms of it is Python gathering the text, as
here) but still over 50 ms, it rebuilds from scratch every time and ranks worse;
bm25s costs numpy and scipy. The plain one adds no dependency,
leaves the sidecar's import time and RSS alone for users who never search, and
rebuilds from terms kept on the entries: each entry's are made once per
generation (``Registered.search_terms``), and the registry keeps an unchanged
server's entries across a relist. It misses the build target only on a first
build of 5,000 new tools: splitting their ~1.2 MB of text into words alone takes
~23 ms on this box.

Concurrency: plain synchronous code, never interleaved. The one piece of state
beyond an index is ``_TOKEN_TERMS`` (token → terms, process-wide, bounded: it is
cleared when full), a cache that only saves work. A build is one step that
blocks the trio loop: ~80 ms for 5,000 new tools, ~17 ms when their terms are
kept, run only when a search view's catalog changed and a host searches.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import Any, Final, cast

from supervisor.catalog.registry import RegisteredTool

K1: Final = 1.2
B: Final = 0.75
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
"""Words, split at camelCase humps and at anything but letters and digits ("listFiles" → list, Files)."""
STOP_WORDS: Final = frozenset(
    # English function words, which say nothing about which tool is meant: pronouns and
    # determiners, articles, auxiliary and modal verbs, conjunctions, question words, the
    # prepositions that carry no operation (not off, up/down, before/after, between), the
    # stubs contractions leave ("you're" → re), politeness; and "get" and "use", which are
    # in so many tool names and descriptions that they tell none apart.
    """
    i me my mine myself we us our ours you your yours he him his she her it its they them their this that
    these those there here a an the am is are was were be been being have has had do does did done can could
    will would shall should may might must and or but if so than then because while what when where which who
    whom whose why how about as at by for from in into of on onto to via with re ll ve don please just also get
    gets use used uses using
    """.split()  # noqa: SIM905 - a literal list would be formatted a word a line, 100 lines
)
NAME_WEIGHT: Final = 3
"""How many times a word of the tool's name counts, against once for a word of its other text."""
TITLE_WEIGHT: Final = 2


def stem(word: str) -> str:
    """A light English stem, so that plural, ``-ing``, ``-ed`` and silent-``e`` forms meet.

    ``files``, ``file``, ``filed`` → ``fil``; ``branches`` → ``branch``; ``directories`` →
    ``directory``; ``staging``, ``staged``, ``stage`` → ``stag``. A suffix goes only if a
    vowel stays before it (``string`` keeps its ``-ing``). Not Porter's: no ``-ion``,
    ``-er`` or ``-ly``, so words that differ in meaning more often stay apart.
    """
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ing") and _VOWELS.intersection(word[:-3]):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed") and not word.endswith("eed") and _VOWELS.intersection(word[:-2]):
        word = word[:-2]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


_VOWELS: Final = frozenset("aeiouy")


class _TokenTerms(dict[str, tuple[str, ...]]):
    """Each whitespace-separated token's index terms, made on first sight and kept (bounded).

    A catalog's text repeats a small vocabulary, so a token is split, lower-cased and
    stemmed once, and every later sight is one dict lookup: looking tokens up through
    ``map`` keeps the per-token work in C, where a Python loop per word cost most of a
    cold build (``bench/search.py``).
    """

    __slots__ = ()

    def __missing__(self, token: str) -> tuple[str, ...]:
        if len(self) >= _TOKEN_TERMS_MAX:
            self.clear()
        made = tuple(
            stem(word) for word in map(str.lower, _WORDS.findall(token)) if len(word) > 1 and word not in STOP_WORDS
        )
        self[token] = made
        return made


_TOKEN_TERMS_MAX: Final = 50_000
_TOKEN_TERMS: Final = _TokenTerms()


def terms(text: str) -> list[str]:
    """The index terms of ``text``, in order (a query goes through the same function)."""
    return list(chain.from_iterable(map(_TOKEN_TERMS.__getitem__, text.split())))


def tool_terms(entry: RegisteredTool) -> dict[str, float]:
    """``entry``'s weighted term frequencies, made once and kept on it."""
    kept = entry.search_terms
    if kept is not None:
        return kept
    tool = entry.shown
    # The public name without its "mcp__<server>__" prefix, split at "_" and "-" before the
    # lookup (a name is unique, its words are not); the server's name counts as text.
    name = entry.key.removeprefix(f"mcp__{entry.owner}__").replace("_", " ").replace("-", " ")
    text = [entry.owner, tool.description or ""]
    properties = tool.input_schema.get("properties") if isinstance(tool.input_schema, dict) else None
    if isinstance(properties, dict):
        for argument, schema in properties.items():
            text.append(str(argument))
            description = schema.get("description") if isinstance(schema, dict) else None
            if isinstance(description, str):
                text.append(description)
    # Whole-number weights: repeating a field's terms and counting them all at once (``Counter``,
    # in C) costs a fraction of a weighted sum per word, and all the text is tokenized in one go.
    found = terms(name) * NAME_WEIGHT
    if tool.title:
        found += terms(tool.title) * TITLE_WEIGHT
    found += terms(" ".join(text))
    # Counts are ints, which are valid floats; the registry keeps them as they are.
    made = cast("dict[str, float]", Counter(found))
    entry.keep_search_terms(made)
    return made


@dataclass(frozen=True, slots=True)
class Match:
    """One search hit: the entry and its BM25 score."""

    entry: RegisteredTool
    score: float


class ToolIndex:
    """A BM25 index over one fixed list of tools; build a new one when the list changes."""

    __slots__ = ("_docs", "_entries", "_idf", "_norms", "_weights")

    def __init__(self, entries: Sequence[RegisteredTool]) -> None:
        # In public-name order, so that a lower position breaks a tie (the registry's order already).
        self._entries = sorted(entries, key=attrgetter("key"))
        docs: dict[str, list[int]] = {}
        weights: dict[str, list[float]] = {}
        lengths: list[float] = []
        for index, entry in enumerate(self._entries):
            counts = tool_terms(entry)
            lengths.append(sum(counts.values()))
            for term, weight in counts.items():
                held = docs.get(term)
                if held is None:
                    docs[term] = [index]
                    weights[term] = [weight]
                else:
                    held.append(index)
                    weights[term].append(weight)
        count = len(lengths)
        average = (sum(lengths) / count) if count else 1.0
        self._docs = docs
        self._weights = weights
        self._norms = [K1 * (1 - B + B * length / average) for length in lengths]
        """Per tool: BM25's ``k1 * (1 - b + b * length / average)``."""
        self._idf = {
            term: (K1 + 1) * math.log(1 + (count - len(held) + 0.5) / (len(held) + 0.5)) for term, held in docs.items()
        }

    def __len__(self) -> int:
        return len(self._entries)

    def search(self, query: str, limit: int = 5) -> list[Match]:
        """The ``limit`` best matches for ``query``, best first (ties: by public name); none for no shared term."""
        if limit <= 0:
            return []
        scores: dict[int, float] = {}
        score_of = scores.get
        norms = self._norms
        for term in set(terms(query)):
            held = self._docs.get(term)
            if held is None:
                continue
            idf = self._idf[term]
            for index, weight in zip(held, self._weights[term], strict=True):
                scores[index] = score_of(index, 0.0) + idf * weight / (weight + norms[index])
        if len(scores) > limit:
            cutoff = heapq.nlargest(limit, scores.values())[-1]
            best = [(index, score) for index, score in scores.items() if score >= cutoff]
        else:
            best = list(scores.items())
        best.sort(key=_best_first)
        return [Match(self._entries[index], score) for index, score in best[:limit]]


def _best_first(item: tuple[int, float]) -> tuple[float, int]:
    return -item[1], item[0]


def describe(matches: Iterable[Match]) -> list[dict[str, Any]]:
    """What ``search_tools`` answers per match: public name, title, description and input schema."""
    described = []
    for match in matches:
        tool = match.entry.shown
        item: dict[str, Any] = {"name": match.entry.key}
        if tool.title:
            item["title"] = tool.title
        if tool.description:
            item["description"] = tool.description
        item["inputSchema"] = tool.input_schema
        described.append(item)
    return described
