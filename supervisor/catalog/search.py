"""BM25 search over a view's tools: the index behind a search view's ``search_tools`` (issue 26).

One ``ToolIndex`` holds one catalog: it is built whole from a list of entries
and never changed afterwards, so a rebuild is atomic by construction (the view
swaps its reference to the new index in one synchronous step).

What is indexed, per tool, as weighted term frequencies (a BM25F-style field
weighting, folded into one bag of words): the public name (x3), the title
(x2), the description (x1), the server's name (x1), each argument's name
(x1.5) and description (x0.5). Text is split on anything but letters and
digits and at camelCase humps, lower-cased, stop words dropped, and each word
cut to a crude stem (plural, ``-ing``, ``-ed``), so "listing files" finds
``list_files``.

Status (issue 26, open): a plain implementation, with no native dependency,
that re-tokenizes only the entries that changed (each entry's terms are made
once per generation and kept on it, ``Registered.search_terms``). It does NOT
meet the issue's targets yet: on 5,000 synthetic tools over a small, dense
vocabulary it measured a 288 ms cold build (61 ms warm) and a 9.9 ms p50 query,
against 50 ms and 1 ms. Whether to optimise it or to use ``tantivy`` or
``bm25s`` is still to be measured and decided.

Concurrency: plain synchronous code; a build runs in one step, only when a
search view's catalog changed and a host searches.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from supervisor.catalog.registry import RegisteredTool

K1: Final = 1.2
B: Final = 0.75
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
"""Words, split at camelCase humps and at anything but letters and digits ("listFiles" → list, Files)."""
STOP_WORDS: Final = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "for",
        "from",
        "get",
        "has",
        "have",
        "how",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "use",
        "used",
        "uses",
        "using",
        "was",
        "what",
        "when",
        "where",
        "which",
        "will",
        "with",
        "you",
        "your",
    ]
)
NAME_WEIGHT: Final = 3.0
TITLE_WEIGHT: Final = 2.0
ARGUMENT_NAME_WEIGHT: Final = 1.5
ARGUMENT_DESCRIPTION_WEIGHT: Final = 0.5


def stem(word: str) -> str:
    """A crude English stem: enough that plural, ``-ing`` and ``-ed`` forms meet (``files`` → ``file``)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    """The index terms of ``text``, in order (a query goes through the same function)."""
    out = []
    for word in _WORDS.findall(text):
        lowered = word.lower()
        if lowered not in STOP_WORDS:
            out.append(stem(lowered))
    return out


def tool_terms(entry: RegisteredTool) -> dict[str, float]:
    """``entry``'s weighted term frequencies, made once per entry and kept on it."""
    kept = entry.search_terms
    if kept is not None:
        return kept
    tool = entry.shown
    weights: dict[str, float] = {}

    def add(text: str | None, weight: float) -> None:
        if text:
            for term in terms(text):
                weights[term] = weights.get(term, 0.0) + weight

    add(entry.key.removeprefix("mcp__").replace("__", " "), NAME_WEIGHT)
    add(tool.title, TITLE_WEIGHT)
    add(tool.description, 1.0)
    properties = tool.input_schema.get("properties") if isinstance(tool.input_schema, dict) else None
    if isinstance(properties, dict):
        for name, schema in properties.items():
            add(str(name), ARGUMENT_NAME_WEIGHT)
            if isinstance(schema, dict) and isinstance(schema.get("description"), str):
                add(schema["description"], ARGUMENT_DESCRIPTION_WEIGHT)
    made = weights
    entry.keep_search_terms(made)
    return made


@dataclass(frozen=True, slots=True)
class Match:
    """One search hit: the entry and its BM25 score."""

    entry: RegisteredTool
    score: float


class ToolIndex:
    """A BM25 index over one fixed list of tools; build a new one when the list changes."""

    __slots__ = ("_average_length", "_entries", "_idf", "_lengths", "_postings")

    def __init__(self, entries: Sequence[RegisteredTool]) -> None:
        self._entries = list(entries)
        postings: dict[str, list[tuple[int, float]]] = {}
        lengths: list[float] = []
        for index, entry in enumerate(self._entries):
            weights = tool_terms(entry)
            lengths.append(sum(weights.values()))
            for term, weight in weights.items():
                held = postings.get(term)
                if held is None:
                    postings[term] = [(index, weight)]
                else:
                    held.append((index, weight))
        count = len(self._entries)
        self._postings = postings
        self._lengths = lengths
        self._average_length = (sum(lengths) / count) if count else 1.0
        self._idf = {
            term: math.log(1 + (count - len(held) + 0.5) / (len(held) + 0.5)) for term, held in postings.items()
        }

    def __len__(self) -> int:
        return len(self._entries)

    def search(self, query: str, limit: int = 5) -> list[Match]:
        """The ``limit`` best matches for ``query``, best first (ties: by public name); none for no shared term."""
        scores: dict[int, float] = {}
        lengths, average = self._lengths, self._average_length
        for term in set(terms(query)):
            held = self._postings.get(term)
            if held is None:
                continue
            idf = self._idf[term]
            for index, weight in held:
                norm = K1 * (1 - B + B * lengths[index] / average)
                scores[index] = scores.get(index, 0.0) + idf * weight * (K1 + 1) / (weight + norm)
        best = sorted(scores.items(), key=lambda item: (-item[1], self._entries[item[0]].key))[: max(limit, 0)]
        return [Match(self._entries[index], score) for index, score in best]


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
