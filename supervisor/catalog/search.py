"""BM25 search over a view's tools: the index behind a search view's ``search_tools`` (issue 26).

One ``ToolIndex`` holds one catalog: it is built whole from a list of entries
and never changed afterwards, so a rebuild is atomic by construction (the view
swaps its reference to the new index in one synchronous step).

What is indexed, per tool, as one bag of terms, each as often as it counts (a
BM25F-style field weighting by repetition): the public name without its
``mcp__<server>__`` prefix (x3), the title (x2), and once each the server's
name, the description, and each argument's name and description. Text is split
at whitespace, then at anything but letters and digits and at camelCase humps;
words are lower-cased, one-letter words and English function words dropped, and
each word cut to a light stem (plural, ``-ing``, ``-ed``, silent ``e``), so
"listing branches" finds ``list_branches``. Queries go through the same ``terms``.

How a first build stays fast without changing a score (``tests/catalog/test_search.py``
compares every ranking and score with a tool-by-tool definition): each whitespace token
is split and stemmed once per process (``_TOKEN_TERMS``, a regex only for tokens that are
not one plain word); a description is looked up through single terms (``_TOKEN_TERM``),
not tuples to chain; the texts a server's tools repeat (its name, argument names and
descriptions) are tokenized once per text (``_TEXT_TERMS``); a tool's bag is one list,
kept on its entry (``Registered.search_terms``); the postings hold a tool's position once
per occurrence, filled by one plain loop, and a query counts them (``Counter``, in C)
where the build used to count per tool, and works out the idf of its own terms only.
That count is what a query pays for it: ~50-70 µs more at p50 than before.

Why a plain implementation and not ``tantivy`` or ``bm25s``: ``bench/search.py``
(p7) measures all three on the same 5,000 synthetic tools, and their recall on
90 requests in a user's words over 127 tools of 10 real servers (a box with
``python loop`` ~50 ms; ``bench/RESULTS.md``, "Search (issue 26)"; the libraries'
rows are from the earlier run, before the plain index's first build was reworked):

=============  ===========  =====================  ==========  ==================  ==========
engine         first build  rebuild, same entries  query p50   import, RSS         recall@1/5
=============  ===========  =====================  ==========  ==================  ==========
plain          46-54 ms     9-11 ms                290-400 µs  3-4 ms, +0.5 MB     0.47/0.70
plain, before  79-116 ms    17-20 ms               228-239 µs  3 ms, +0.3 MB       0.47/0.70
tantivy        58-62 ms     51-54 ms               114 µs      2-3 ms, +4.1 MB     0.41/0.67
bm25s          155-166 ms   151-159 ms             55-66 µs    167-189 ms, +37 MB  0.46/0.73
=============  ===========  =====================  ==========  ==================  ==========

Neither library wins both the targets (build <= 50 ms, p50 <= 1 ms) and recall:
tantivy rebuilds from scratch every time and ranks worse; bm25s costs numpy and
scipy. The plain one adds no dependency, leaves the sidecar's import time and RSS
alone for users who never search, and rebuilds from the bags kept on the entries
(the registry keeps an unchanged server's entries across a relist). Its first build
of 5,000 new tools is at the 50 ms target on this box, under it or a few ms over as
the box's speed drifts; the first query after it takes ~0.8 ms. Where that build
goes (instructions under callgrind, which do not drift: 410 M, against 762 M
before): descriptions 28% (``str.split`` 10%, the lookups 17%), the server's name
and the arguments 20%, the postings loop 19%, the names 11%, the entries'
properties and keeping the bag 12%, tokens seen for the first time 6%, the rest 4%.
Most of it is a fixed price per word or per term occurrence (a new string, its hash,
a dict lookup), paid in C; what is left in Python is per tool and per posting.

Concurrency: plain synchronous code, never interleaved. The state beyond an index
is four process-wide caches (word, token, description token and short text → terms)
and ``_SEVERAL``, which only save work and are bounded: a full one is cleared (the word
cache with the token cache, the description tokens' between two descriptions). A build
is one step that blocks the trio loop, ~50 ms for 5,000 new tools and ~10 ms when
their bags are kept, run only when a search view's catalog changed and a host searches.
"""

from __future__ import annotations

import heapq
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter
from typing import Any, Final

from supervisor.catalog.naming import tool_part
from supervisor.catalog.registry import RegisteredTool

K1: Final = 2.0
B: Final = 1.0
"""BM25's saturation and length normalization, chosen on ``bench p7``'s even-numbered requests only
(issue 48; k1 in 1.2-4.0 and b in 0.75-1.0): MRR@5 there 0.446 -> 0.487, and on the odd half, which
the choice never saw, 0.492 -> 0.510 (R@5 0.650 -> 0.684). A tool's long description (a browser's
usage notes) dilutes its name's words less when every length is normalized in full (b = 1), and a
term repeated in the name (x3) keeps earning with the larger k1."""
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


class _WordTerm(dict[str, str]):
    """Each word's index term ("" for none), made on first sight and kept (cleared with ``_TOKEN_TERMS``).

    A word is what ``_WORDS`` finds in a token, its case kept: lower-cased, dropped if it has one
    letter or is a stop word, else stemmed. The stem is interned, so that every occurrence of a
    term is one object and a lookup of it in the postings ends at an identity test.
    """

    __slots__ = ()

    def __missing__(self, word: str) -> str:
        lower = word.lower()
        made = "" if len(lower) < 2 or lower in STOP_WORDS else sys.intern(stem(lower))
        self[word] = made
        return made


class _TokenTerms(dict[str, tuple[str, ...]]):
    """Each whitespace-separated token's index terms, made on first sight and kept (bounded).

    A catalog's text repeats a small vocabulary, so a token is split, lower-cased and stemmed
    once, and every later sight is one dict lookup, made through ``map`` so that the per-token
    work stays in C.
    """

    __slots__ = ()

    def __missing__(self, token: str) -> tuple[str, ...]:
        if len(self) >= _CACHE_MAX:
            self.clear()
            _WORD_TERM.clear()
        if token.isalpha() and token.isascii() and (token.islower() or token.istitle() or token.isupper()):
            term = _WORD_TERM[token]  # one word, the whole token, as ``_WORDS`` would find it
            made: tuple[str, ...] = (term,) if term else ()
        else:
            made = tuple(filter(None, map(_WORD_TERM.__getitem__, _WORDS.findall(token))))
        self[token] = made
        return made


class _TokenTerm(dict[str, str]):
    """A description token's one term: "" for none, and for several (those go in ``_SEVERAL`` too).

    Most tokens of prose make one term or none, so a description is looked up through this one:
    its terms come out as strings, not as tuples to chain (a third fewer instructions, measured).
    Bounded by ``tool_terms``, between two descriptions, so that ``_SEVERAL`` always holds every
    token of several terms that the description at hand has.
    """

    __slots__ = ()

    def __missing__(self, token: str) -> str:
        made = _TOKEN_TERMS[token]
        if len(made) > 1:
            _SEVERAL.add(token)
        term = made[0] if len(made) == 1 else ""
        self[token] = term
        return term


class _TextTerms(dict[str, tuple[str, ...]]):
    """The terms of a short text that tools repeat: a server's name, an argument's name or description (bounded).

    A server's tools share arguments (``owner``, ``repo``, ``page``, ``cursor``) and describe them
    alike, so each such text is tokenized once for the catalog, not once per tool.
    """

    __slots__ = ()

    def __missing__(self, text: str) -> tuple[str, ...]:
        if not isinstance(text, str):
            raise TypeError(f"not text: {text!r}")  # ``tool_terms`` then reads the arguments the slow way
        if len(self) >= _TEXTS_MAX:
            self.clear()
        made = tuple(chain.from_iterable(map(_TOKEN_TERMS.__getitem__, text.split())))
        self[text] = made
        return made


_SEVERAL: Final[set[str]] = set()
"""The tokens ``_TokenTerm`` has seen that make several terms ("list_files", "sign-in", "HTTPServer")."""
_CACHE_MAX: Final = 50_000
"""Words or tokens per cache; a full cache is cleared (they only save work)."""
_TEXTS_MAX: Final = 20_000
"""Texts ``_TEXT_TERMS`` keeps: an argument's description may be a paragraph (~2 MB at 100 characters each)."""
_WORD_TERM: Final = _WordTerm()
_TOKEN_TERMS: Final = _TokenTerms()
_TOKEN_TERM: Final = _TokenTerm()
_TEXT_TERMS: Final = _TextTerms()
_token_terms: Final = _TOKEN_TERMS.__getitem__
_token_term: Final = _TOKEN_TERM.__getitem__
_text_terms: Final = _TEXT_TERMS.__getitem__


def terms(text: str) -> list[str]:
    """The index terms of ``text``, in order (a query goes through the same function)."""
    return list(chain.from_iterable(map(_token_terms, text.split())))


def tool_terms(entry: RegisteredTool) -> Sequence[str]:
    """``entry``'s index terms, each as often as it counts; made once and kept on it.

    The name's terms ``NAME_WEIGHT`` times, the title's ``TITLE_WEIGHT`` times, and once the
    description's, the server's name's and each argument's name's and description's: a term's
    count in the bag is its weighted frequency (field weights by repetition).
    """
    kept = entry.search_terms
    if kept is not None:
        return kept
    if len(_TOKEN_TERM) >= _CACHE_MAX:
        _TOKEN_TERM.clear()
        _SEVERAL.clear()
    tool = entry.shown
    # The public name without its "mcp__<server>__" prefix, split at "_" and "-" before the
    # lookup (a name is unique, its words are not); the server's name counts as text.
    name = tool_part(entry.key, entry.owner).replace("_", " ").replace("-", " ")
    made = list(chain.from_iterable(map(_token_terms, name.split())))
    made *= NAME_WEIGHT
    if tool.title:
        made += list(chain.from_iterable(map(_token_terms, tool.title.split()))) * TITLE_WEIGHT
    if tool.description:
        words = tool.description.split()
        start = len(made)
        made += filter(None, map(_token_term, words))
        if _SEVERAL and not _SEVERAL.isdisjoint(words):  # a token of several terms ("list_files"): the general way
            del made[start:]
            made += chain.from_iterable(map(_token_terms, words))
    made += _text_terms(entry.owner)
    properties = tool.input_schema.get("properties")
    if isinstance(properties, dict):
        start = len(made)
        try:
            described = map(dict.get, properties.values(), repeat("description"), repeat(""))
            made += chain.from_iterable(map(_text_terms, chain(properties, described)))
        except TypeError:  # an argument schema that is not an object, or a name or description that is not text
            del made[start:]
            made += chain.from_iterable(map(_text_terms, _argument_texts(properties)))
    entry.keep_search_terms(made)
    return made


def _argument_texts(properties: dict[Any, Any]) -> list[str]:
    """Each argument's name and, if it is text, description: what ``tool_terms`` reads, the slow way."""
    texts = [str(argument) for argument in properties]
    for schema in properties.values():
        described = schema.get("description") if isinstance(schema, dict) else None
        if isinstance(described, str):
            texts.append(described)
    return texts


@dataclass(frozen=True, slots=True)
class Match:
    """One search hit: the entry and its BM25 score."""

    entry: RegisteredTool
    score: float


class ToolIndex:
    """A BM25 index over one fixed list of tools; build a new one when the list changes."""

    __slots__ = ("_entries", "_norms", "_postings")

    def __init__(self, entries: Sequence[RegisteredTool]) -> None:
        # In public-name order, so that a lower position breaks a tie (the registry's order already).
        self._entries = sorted(entries, key=attrgetter("key"))
        found = list(map(tool_terms, self._entries))
        postings: defaultdict[str, list[int]] = defaultdict(list)
        # Per term, the position of each tool it occurs in, once per occurrence (``search`` counts
        # them). A plain loop: the interpreter specializes its subscript and ``append`` (3.11), which
        # a ``map(list.append, ...)`` pipeline would pay a C call for each (~25% slower, measured).
        for index, bag in enumerate(found):
            for term in bag:
                postings[term].append(index)
        self._postings: dict[str, list[int]] = postings
        """Read with ``get`` only: a subscript would add a term."""
        lengths = list(map(len, found))
        count = len(lengths)
        average = (sum(lengths) / count) if count else 1.0
        self._norms = [K1 * (1 - B + B * length / average) for length in lengths]
        """Per tool: BM25's ``k1 * (1 - b + b * length / average)``."""

    def __len__(self) -> int:
        return len(self._entries)

    def search(self, query: str, limit: int = 5) -> list[Match]:
        """The ``limit`` best matches for ``query``, best first (ties: by public name); none for no shared term."""
        if limit <= 0:
            return []
        scores: dict[int, float] = {}
        score_of = scores.get
        norms = self._norms
        count = len(norms)
        for term in set(terms(query)):
            held = self._postings.get(term)
            if held is None:
                continue
            weights = Counter(held)  # position -> the term's weighted frequency there, in position order
            idf = (K1 + 1) * math.log(1 + (count - len(weights) + 0.5) / (len(weights) + 0.5))
            for index, weight in weights.items():
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
