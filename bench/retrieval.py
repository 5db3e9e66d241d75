"""p7: search that finds the tool: lexical, semantic and fused retrieval on real catalogs (issue 48).

``python -m bench p7`` (or ``python -m bench.retrieval [--model M --path DIR]``). Offline: the
catalogs are the JSON files of ``bench/catalogs`` (26 real third-party servers, 413 tools,
captured once by ``bench/capture_catalogs.py``), the requests those of ``bench/retrieval_set.toml``
(235 in a user's words, each with every tool that answers it; a fifth and more of them hard).

What it reports:

* **Quality**: R@1, R@5 and MRR@5 for the lexical index alone (``catalog.search``, the
  sidecar's BM25), the semantic index alone (``catalog.semantic``) and the two fused
  (``catalog.fusion.fuse``, what ``search_tools`` answers once the model is ready; and, to
  compare, reciprocal-rank fusion, ``fusion.rrf``, and progressive disclosure, the best
  server first and then its tools: ``Rankers.server_first``), overall, per
  kind, for the hard ones and for each half of the set: ``tune`` (the even-numbered requests,
  on which any weight of the rankers is chosen) and ``held-out`` (the odd ones, which report
  it). The embedded text is the sidecar's (``embedding_text``), with
  each server's line as the sidecar takes it (``semantic.about_line`` of the saved
  description or ``instructions``; ``--no-about`` leaves it out, to see what it adds).
* **Speed**: query p50/p95 for lexical alone and for fused (the query's embedding, the
  vector search, the lexical search to ``DEPTH`` and the fusion) over the real catalog and
  over 5,000 synthetic tools (``bench.search``'s); the lexical build of those 5,000 (first
  build over fresh entries, in this process; ``bench.search`` measures the cold one); the
  first embedding of the 5,000 through ``SemanticEngine`` (wall time and the process's CPU
  time, threads included) and how many tools a restart over the same cache embeds again.
* **Cost**: import time and RSS of the model's library, and RSS with the model loaded
  against without, in fresh interpreters; a search answer's tokens against the full
  listing's (``catalog.token_estimate``).

Timing uses ``time.perf_counter_ns`` and ``resource.getrusage``: the measured code is
synchronous or runs in worker threads; ``trio.current_time`` is for code that awaits.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import mcp_types as types
import trio

from bench.harness import REPO_ROOT, percentile
from bench.search import latency_queries, registry_of, synthetic_tools
from supervisor.catalog.fusion import DEPTH, Scored, fuse, rrf
from supervisor.catalog.registry import RegisteredTool, Registry
from supervisor.catalog.search import ToolIndex, describe
from supervisor.catalog.semantic import Embedder, VectorIndex, about_line, embedding_text, load_embedder
from supervisor.catalog.semantic_engine import SemanticConfig, SemanticEngine
from supervisor.catalog.token_estimate import BYTES_PER_TOKEN, estimate_tokens
from supervisor.catalog.views import search_tools

CATALOGS: Final = Path(__file__).with_name("catalogs")
SET_FILE: Final = Path(__file__).with_name("retrieval_set.toml")
LIMIT: Final = 5
KINDS: Final = ("plain", "synonym", "multi-step", "near-duplicate")
HALVES: Final = ("tune", "held-out")
"""Any weight or setting of the rankers is chosen on ``tune`` alone and reported on ``held-out`` too."""
TARGETS: Final = {"fused R@5": 0.85, "fused R@1": 0.55, "query p50 fused ms": 5.0, "query p50 lexical ms": 1.0}
Ranker = Callable[[str], list[str]]


@dataclass(frozen=True, slots=True)
class Ask:
    ask: str
    tools: frozenset[str]
    kind: str
    half: str
    """``tune`` for the even-numbered requests (from 0, in the file's order), ``held-out`` for the odd ones."""

    @property
    def hard(self) -> bool:
        return self.kind != "plain"


def load_set(path: Path = SET_FILE) -> list[Ask]:
    items = tomllib.loads(path.read_text(encoding="utf-8"))["queries"]
    return [
        Ask(item["ask"], frozenset(item["tools"]), item["kind"], HALVES[number % 2])
        for number, item in enumerate(items)
    ]


def load_catalogs() -> tuple[list[RegisteredTool], dict[str, str], list[types.Tool]]:
    """The saved catalogs as one Registry's entries; each server's instructions; every tool as listed."""
    registry = Registry()
    about: dict[str, str] = {}
    for file in sorted(CATALOGS.glob("*.json")):
        saved = json.loads(file.read_text(encoding="utf-8"))
        registry.swap(saved["server"], [types.Tool.model_validate(tool) for tool in saved["tools"]])
        line = about_line(saved.get("description"), saved.get("instructions"))
        if line:
            about[saved["server"]] = line  # as the sidecar takes it from the server (``Upstream.about``)
    entries = registry.tool_entries()
    return entries, about, [entry.shown for entry in entries]


def scores(ranker: Ranker, asks: Sequence[Ask]) -> dict[str, dict[str, float]]:
    """R@1, R@5 and MRR@5, overall ("all"), per kind and for the hard ones."""
    groups: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for ask in asks:
        ranked = ranker(ask.ask)[:LIMIT]
        first = next((place for place, name in enumerate(ranked, start=1) if name in ask.tools), None)
        row = (float(first == 1), float(first is not None), 1.0 / first if first else 0.0)
        for group in ("all", ask.half, ask.kind, *(("hard",) if ask.hard else ())):
            groups[group].append(row)
    return {
        group: {
            "n": len(rows),
            "R@1": statistics.fmean(r[0] for r in rows),
            "R@5": statistics.fmean(r[1] for r in rows),
            "MRR@5": statistics.fmean(r[2] for r in rows),
        }
        for group, rows in groups.items()
    }


class Rankers:
    """The three rankings over one catalog, as ``search_tools`` computes them."""

    def __init__(self, entries: Sequence[RegisteredTool], model: Embedder | None, about: dict[str, str]) -> None:
        self.lexical_index = ToolIndex(entries)
        self.model = model
        self._entries = list(entries)
        self._about = about
        self._per_server: dict[str, Rankers] = {}
        self.vectors: VectorIndex | None = None
        if model is not None:
            self.vectors = VectorIndex(entries, model.embed([embedding_text(entry, about) for entry in entries]))

    def lexical(self, query: str) -> list[str]:
        return [match.entry.key for match in self.lexical_index.search(query, LIMIT)]

    def _near(self, query: str) -> list[Scored]:
        assert self.model is not None and self.vectors is not None
        return self.vectors.search(self.model.embed([query])[0], DEPTH)

    def _words(self, query: str) -> list[Scored]:
        return [(match.entry, match.score) for match in self.lexical_index.search(query, DEPTH)]

    def semantic(self, query: str) -> list[str]:
        return [entry.key for entry, _ in self._near(query)[:LIMIT]]

    def fused(self, query: str) -> list[str]:
        return [entry.key for entry in fuse(self._words(query), self._near(query), LIMIT)]

    def fused_rrf(self, query: str) -> list[str]:
        return [entry.key for entry in rrf(self._words(query), self._near(query), LIMIT)]

    def server_first(self, query: str) -> list[str]:
        """Progressive disclosure, as a model would use it: pick the server of the best fused match, search in it.

        Issue 48's option 2 (``search_tools`` answering with servers, then a ``server`` filter), simulated with
        the best possible first step a ranking can give: the server of the top fused tool.
        """
        ranked = fuse(self._words(query), self._near(query), 1)
        if not ranked:
            return []
        owner = ranked[0].owner
        if owner not in self._per_server:
            self._per_server[owner] = Rankers([e for e in self._entries if e.owner == owner], self.model, self._about)
        return self._per_server[owner].fused(query)


def latency_ms(ranker: Ranker, queries: Sequence[str], passes: int) -> tuple[float, float]:
    samples = []
    for _ in range(passes):
        for query in queries:
            started = time.perf_counter_ns()
            ranker(query)
            samples.append((time.perf_counter_ns() - started) / 1e6)
    return percentile(samples, 0.5), percentile(samples, 0.95)


def _cpu_sec() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def engine_embedding(entries: Sequence[RegisteredTool], model: Embedder, cache: Path) -> dict[str, float]:
    """One life of a ``SemanticEngine`` over ``entries``: tools embedded, wall and CPU seconds to a full index."""
    engine = SemanticEngine(SemanticConfig(), cache, loader=lambda _model, _path: model)
    started, cpu = time.perf_counter(), _cpu_sec()
    async with trio.open_nursery() as nursery:
        await nursery.start(engine.run)
        await engine.wait_settled()
        while engine.index_for("bench", 1, entries) is None:
            await engine.wait_settled()
        nursery.cancel_scope.cancel()
    return {"embedded": engine.embedded, "wall_s": time.perf_counter() - started, "cpu_s": _cpu_sec() - cpu}


_RSS_PROBE: Final = """
import json, sys, time
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
import supervisor.catalog.search, supervisor.catalog.semantic_engine
without = rss_mb()
started = time.perf_counter()
from supervisor.catalog.semantic import load_embedder
model = load_embedder(sys.argv[1], sys.argv[2] or None)
loaded = time.perf_counter() - started
model.embed(["warm the model up with one query"])
print(json.dumps({"rss_without_mb": without, "rss_with_mb": rss_mb(), "load_s": loaded}))
"""
_IMPORT_PROBE: Final = """
import importlib, sys, time
started = time.perf_counter()
importlib.import_module(sys.argv[1])
print((time.perf_counter() - started) * 1000)
"""


def _python(code: str, *args: str) -> str:
    import subprocess  # noqa: PLC0415 - the probes only

    return subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, cwd=REPO_ROOT
    ).stdout


def model_costs(model: str, path: str | None, runs: int) -> dict[str, float]:
    """RSS without and with the model, its load time, and its library's import time: medians of fresh interpreters."""
    module = {"sentence-transformers": "sentence_transformers", "bert": "tokenizers"}.get(model, model)
    probes = [json.loads(_python(_RSS_PROBE, model, path or "")) for _ in range(runs)]
    imports = [float(_python(_IMPORT_PROBE, module)) for _ in range(runs)]
    return {
        "rss_without_mb": statistics.median(p["rss_without_mb"] for p in probes),
        "rss_with_mb": statistics.median(p["rss_with_mb"] for p in probes),
        "load_s": statistics.median(p["load_s"] for p in probes),
        "import_ms": statistics.median(imports),
    }


def token_share(
    tools: Sequence[types.Tool], entries: Sequence[RegisteredTool], asks: Sequence[Ask]
) -> dict[str, float]:
    """A search answer's tokens (``LIMIT`` matches, as JSON) over the full listing's: median and largest of the asks.

    The view's own listing (``search_tools`` and ``call_tool``) is reported beside it.
    """
    listing = estimate_tokens(tools)
    index = ToolIndex(entries)
    answers = []
    for ask in asks:
        payload = json.dumps({"tools": describe(index.search(ask.ask, LIMIT)), "ranking": "fused"})
        # The answer's text block, at the estimator's bytes per token (its JSON is the same kind of text).
        answers.append(math.ceil(len(payload.encode()) / BYTES_PER_TOKEN))
    return {
        "listing_tokens": listing,
        "search_view_listing_tokens": estimate_tokens(entry.shown for entry in search_tools(LIMIT)),
        "answer_median_share": statistics.median(answers) / listing,
        "answer_p90_share": percentile(answers, 0.9) / listing,
        "answer_max_share": max(answers) / listing,
    }


def _print_quality(table: dict[str, dict[str, dict[str, float]]]) -> None:
    groups = ["all", *HALVES, "hard", *KINDS]
    print(f"{'ranking':10} " + " ".join(f"{group:>22}" for group in groups))
    print(f"{'':10} " + " ".join(f"{'R@1  R@5  MRR@5 (n)':>22}" for _ in groups))
    for name, by_group in table.items():
        cells = []
        for group in groups:
            row = by_group.get(group)
            cells.append(
                f"{row['R@1']:.3f} {row['R@5']:.3f} {row['MRR@5']:.3f} ({int(row['n'])})".rjust(22) if row else " " * 22
            )
        print(f"{name:10} " + " ".join(cells))


async def run(
    quick: bool = False, model_name: str = "wordllama", path: str | None = None, about_servers: bool = True
) -> dict[str, Any]:
    asks = load_set()
    entries, about, tools = load_catalogs()
    servers = len({entry.owner for entry in entries})
    print(f"\n== p7: retrieval on {servers} real servers, {len(entries)} tools, {len(asks)} requests "
          f"({sum(a.hard for a in asks)} hard); model {model_name}{f' at {path}' if path else ''}")  # fmt: skip
    model = load_embedder(model_name, path)
    rankers = Rankers(entries, model, about if about_servers else {})
    quality = {
        "lexical": scores(rankers.lexical, asks),
        "semantic": scores(rankers.semantic, asks),
        "fused": scores(rankers.fused, asks),
        "fused RRF": scores(rankers.fused_rrf, asks),
        "srv first": scores(rankers.server_first, asks),
    }
    _print_quality(quality)

    passes = 1 if quick else 3
    real_queries = [ask.ask for ask in asks]
    speed: dict[str, Any] = {
        "real lexical p50/p95 ms": latency_ms(rankers.lexical, real_queries, passes),
        "real fused p50/p95 ms": latency_ms(rankers.fused, real_queries, passes),
    }
    synthetic = registry_of(synthetic_tools())
    builds = []
    for _ in range(1 if quick else 3):
        fresh = registry_of(synthetic_tools())
        started = time.perf_counter_ns()
        ToolIndex(fresh)
        builds.append((time.perf_counter_ns() - started) / 1e6)
    speed["5,000 lexical build ms (fresh entries, median)"] = statistics.median(builds)
    with tempfile.TemporaryDirectory() as cache:
        first = await engine_embedding(synthetic, model, Path(cache))
        again = await engine_embedding(registry_of(synthetic_tools()), model, Path(cache))
    speed["5,000 first embedding"] = first
    speed["5,000 after a restart"] = again
    big = Rankers(synthetic, model, {})
    queries = latency_queries()
    speed["5,000 lexical p50/p95 ms"] = latency_ms(big.lexical, queries, passes)
    speed["5,000 fused p50/p95 ms"] = latency_ms(big.fused, queries, passes)
    for name, value in speed.items():
        print(f"{name}: {value}")
    costs = model_costs(model_name, path, 1 if quick else 3)
    print(f"model costs (fresh interpreters, median): {costs}")
    share = token_share(tools, entries, asks)
    print(f"search answer / full listing, tokens: {share}")
    return {"p7": {"quality": quality, "speed": speed, "costs": costs, "token_share": share, "model": model_name}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--model", default="wordllama", help="wordllama | bert | model2vec | sentence-transformers")
    parser.add_argument("--path", default=None, help="the model's directory (all but wordllama; bert: optional)")
    parser.add_argument("--no-about", action="store_true", help="leave each server's line out of its tools' texts")
    args = parser.parse_args()
    trio.run(lambda: run(args.quick, args.model, args.path, not args.no_about))


if __name__ == "__main__":
    main()
