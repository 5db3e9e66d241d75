"""Fusion of the lexical and the semantic rankings into the one ``search_tools`` answers (issue 48).

``fuse`` (what the sidecar uses): a convex combination of the two scores, each
normalized over its own ranking read to ``DEPTH`` places:

    score = 0.2 * bm25 / best_bm25 + 0.8 * (cosine - lowest) / (best - lowest)

A tool that only one ranking holds gets only that part. ``rrf`` is reciprocal-rank
fusion (Cormack et al. 2009, ``K = 60``): ranks only, so no calibration.

The scores keep what ranks throw away: how far ahead the best match is. A query
whose words name the tool exactly gives one BM25 score far above the rest, and
a paraphrase gives a cosine well above the rest; RRF scores both as "first".

The semantic weight (``SEMANTIC_WEIGHT``) was chosen on ``bench p7``'s even-numbered
requests only, by fused MRR@5 averaged over the packaged WordLlama and MiniLM-L6
(the weights 0.5 to 0.9; the lexical index and the embedded text as they are now),
and is reported on the odd-numbered ones, which the choice never saw
(R@1/R@5/MRR@5):

======  =================  =================  =================  =================
weight  WordLlama, even    WordLlama, odd     MiniLM-L6, even    MiniLM-L6, odd
======  =================  =================  =================  =================
0.5     0.415/0.780/0.559  0.479/0.769/0.589  0.534/0.797/0.632  0.556/0.829/0.661
0.7     0.458/0.763/0.584  0.453/0.752/0.573  0.568/0.797/0.657  0.556/0.803/0.649
0.8     0.475/0.746/0.589  0.453/0.744/0.561  0.593/0.788/0.668  0.556/0.803/0.646
0.9     0.492/0.729/0.587  0.453/0.709/0.551  0.559/0.771/0.645  0.530/0.803/0.630
======  =================  =================  =================  =================

0.8 is best on the tuning half for both models; on the held-out half it is no
better than 0.5 to 0.7 (the halves are 117 and 118 requests: one request is 0.0085
of R@1), so it buys R@1 at some R@5 and no more than that should be read into it.
Fused, the lexical index still decides between tools the embedding puts close
together, and an exact name still lifts its tool by up to 0.2.

With that weight a tool that only the words find (a request that names it)
would rarely reach the first five, so ``fuse`` keeps the lexical ranking's first
tool among them: it takes the last place if the scores leave it out (never the
first, so R@1 is the scores'). Chosen the same way, on the tuning half at 0.8
(R@5, even / odd): WordLlama 0.746 -> 0.763 / 0.744 -> 0.769, MiniLM-L6 0.788
-> 0.797 / 0.803 -> 0.803. Keeping the semantic ranking's first tool too was
measured and adds nothing at this weight.

Ties (same fused score) go to the tool the lexical ranking put first, then to
the semantic one's order: an exact name match should not lose to a paraphrase.

Pure functions; nothing here awaits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from supervisor.catalog.registry import RegisteredTool

Scored = tuple[RegisteredTool, float]
DEPTH: Final = 50
"""How far down each ranking is read."""
SEMANTIC_WEIGHT: Final = 0.8
"""The semantic score's share of the fused one (chosen on the tuning half; see above)."""
K: Final = 60
"""RRF's constant."""


def fuse(lexical: Sequence[Scored], semantic: Sequence[Scored], limit: int) -> list[RegisteredTool]:
    """The ``limit`` best tools of the two scored rankings (best first), by their normalized scores' weighted sum.

    The lexical ranking's first tool is always among them (in the last place if the scores leave it out),
    when ``limit`` is 2 or more: see the module's docstring.
    """
    scores: dict[str, float] = {}
    if lexical:
        best = max(score for _, score in lexical[:DEPTH]) or 1.0
        for entry, score in lexical[:DEPTH]:
            scores[entry.key] = (1 - SEMANTIC_WEIGHT) * score / best
    if semantic:
        cosines = [score for _, score in semantic[:DEPTH]]
        high, low = max(cosines), min(cosines)
        span = (high - low) or 1.0
        for entry, score in semantic[:DEPTH]:
            scores[entry.key] = scores.get(entry.key, 0.0) + SEMANTIC_WEIGHT * (score - low) / span
    fused = _best(scores, lexical, semantic, limit)
    if limit >= 2 and lexical and len(fused) == limit and lexical[0][0].key not in {e.key for e in fused}:
        fused[-1] = lexical[0][0]
    return fused


def rrf(lexical: Sequence[Scored], semantic: Sequence[Scored], limit: int, *, k: int = K) -> list[RegisteredTool]:
    """The ``limit`` best tools by reciprocal-rank fusion (``bench p7`` compares it with ``fuse``)."""
    scores: dict[str, float] = {}
    for ranking in (lexical, semantic):
        for rank, (entry, _) in enumerate(ranking[:DEPTH], start=1):
            scores[entry.key] = scores.get(entry.key, 0.0) + 1.0 / (k + rank)
    return _best(scores, lexical, semantic, limit)


def _best(
    scores: dict[str, float], lexical: Sequence[Scored], semantic: Sequence[Scored], limit: int
) -> list[RegisteredTool]:
    order: dict[str, tuple[int, int]] = {}
    entries: dict[str, RegisteredTool] = {}
    for which, ranking in enumerate((lexical, semantic)):
        for rank, (entry, _) in enumerate(ranking[:DEPTH]):
            order.setdefault(entry.key, (which, rank))
            entries.setdefault(entry.key, entry)
    best = sorted(scores, key=lambda key: (-scores[key], order[key]))
    return [entries[key] for key in best[:limit]]


__all__ = ["DEPTH", "SEMANTIC_WEIGHT", "K", "Scored", "fuse", "rrf"]
