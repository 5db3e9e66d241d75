"""Reciprocal-rank fusion of the lexical and the semantic rankings (issue 48).

A tool's fused score is the sum over the rankings it appears in of
``weight / (k + rank)`` (rank from 1). Ranks, not scores: BM25 scores and
cosine similarities live on scales that do not compare, and RRF needs no
calibration per catalog. ``K = 60`` is the constant of Cormack et al. (2009),
kept rather than tuned on the bench's queries. Each ranking is read to
``DEPTH`` places, so a tool that is fifth in one and fortieth in the other still
gains from both.

Ties (same fused score) go to the tool the lexical ranking put first, then to
the semantic one's order: the lexical ranking is the one the sidecar had
before, and an exact name match should not lose to a paraphrase.

Pure functions; nothing here awaits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from supervisor.catalog.registry import RegisteredTool

K: Final = 60
DEPTH: Final = 50
"""How far down each ranking is read."""


def fuse(
    lexical: Sequence[RegisteredTool],
    semantic: Sequence[RegisteredTool],
    limit: int,
    *,
    k: int = K,
) -> list[RegisteredTool]:
    """The ``limit`` best tools of the two rankings (best first), by reciprocal-rank fusion."""
    scores: dict[str, float] = {}
    order: dict[str, tuple[int, int]] = {}
    entries: dict[str, RegisteredTool] = {}
    for which, ranking in enumerate((lexical, semantic)):
        for rank, entry in enumerate(ranking[:DEPTH], start=1):
            scores[entry.key] = scores.get(entry.key, 0.0) + 1.0 / (k + rank)
            entries.setdefault(entry.key, entry)
            order.setdefault(entry.key, (which, rank))
    best = sorted(scores, key=lambda key: (-scores[key], order[key]))
    return [entries[key] for key in best[:limit]]


__all__ = ["DEPTH", "K", "fuse"]
