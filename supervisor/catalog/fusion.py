"""Fusion of the lexical and the semantic rankings into the one ``search_tools`` answers (issue 48).

``fuse`` (what the sidecar uses): a convex combination of the two scores, each
normalized over its own ranking read to ``DEPTH`` places, with equal weights:

    score = 0.5 * bm25 / best_bm25 + 0.5 * (cosine - lowest) / (best - lowest)

A tool that only one ranking holds gets only that half. ``rrf`` is reciprocal-rank
fusion (Cormack et al. 2009, ``K = 60``): ranks only, so no calibration.
``bench p7`` measured both on its 235 requests over 413 real tools, with the
packaged WordLlama and with all-MiniLM-L6-v2 (fused R@1/R@5/MRR@5):

===============  ==================  ==================
fusion           WordLlama           MiniLM-L6
===============  ==================  ==================
RRF, k = 60      0.426/0.706/0.524   0.464/0.787/0.583
scores, 0.5/0.5  0.426/0.740/0.536   0.498/0.787/0.616
===============  ==================  ==================

The scores keep what ranks throw away: how far ahead the best match is. A query
whose words name the tool exactly gives one BM25 score far above the rest, and
a paraphrase gives a cosine well above the rest; RRF scores both as "first".
The weights are equal on purpose, not fitted to the bench's requests (0.3 and
0.7 were measured too, and neither is better for both models).

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
SEMANTIC_WEIGHT: Final = 0.5
K: Final = 60
"""RRF's constant."""


def fuse(lexical: Sequence[Scored], semantic: Sequence[Scored], limit: int) -> list[RegisteredTool]:
    """The ``limit`` best tools of the two scored rankings (best first), by their normalized scores' mean."""
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
    return _best(scores, lexical, semantic, limit)


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
