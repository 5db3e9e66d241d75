"""p7-lexical: the search views' index, plain BM25 against tantivy and bm25s (issue 26).

``python -m bench.search`` (or ``python -m bench p7-lexical``; ``p7`` is now ``bench.retrieval``). Two parts, one run:

* **Speed, on 5,000 synthetic tools** (100 servers x 50, seeded: varied names in
  snake_case, camelCase, kebab-case, descriptions of 10-40 words, 1-5 described
  arguments; ~1.2 MB of text). Per engine, three builds: *cold*, the first build of
  a fresh interpreter over fresh ``Registry`` entries, and the first query after it
  (medians of several; for the plain index it tokenizes every tool with nothing
  cached); *fresh entries*, a build
  over new entries in this process; *same entries*, a rebuild over the entries just
  indexed (the plain index's terms are kept on them). Then the latency of 200
  queries in a user's words (p50/p95 over every pass). The import time and the RSS
  that importing the engine adds are measured in fresh interpreters (median of
  several): for the plain index, ``supervisor.catalog.search`` after the registry it
  needs (which the sidecar has loaded anyway). Targets: build <= 50 ms, p50 <= 1 ms.
* **Recall, on real third-party servers** (``SERVERS``, installed at pinned versions
  by ``tests/interop/install.sh``): each runs as a real stdio process, its
  ``tools/list`` is swapped into one ``Registry`` under a short name, and the queries
  of ``bench/retrieval_queries.toml`` (a user's words, each naming the tool that
  should answer) give recall@1 and recall@5, overall and per server. The plain
  index's misses are printed. A server not installed is named, with how to install
  it; the queries for it are left out. server-everything is listed by a client that
  declares no roots, sampling or elicitation, so 13 of its tools, not 17.

``tantivy`` and ``bm25s`` are not project dependencies: without them the bench says
so and measures the plain index alone. Each gets what it offers natively (tantivy:
an in-RAM index, its ``en_stem`` analyser, per-field boosts as ours; bm25s: its
English stop words, our ``stem`` as its stemmer since PyStemmer is absent, and the
fields repeated by our weights), and all three see the same text, with tool names
split into words first.

Timing uses ``time.perf_counter_ns``, not trio's clock: the measured code is
synchronous, and ``trio.current_time`` is for code that awaits.
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import mcp_types as types
import trio

from bench.harness import REPO_ROOT, median, open_host, percentile, reap_marked
from supervisor.catalog.registry import RegisteredTool, Registry
from supervisor.catalog.search import NAME_WEIGHT, TITLE_WEIGHT, ToolIndex, stem

SYNTHETIC_TOOLS: Final = 5_000
SYNTHETIC_SERVERS: Final = 100
SEED: Final = 26
LATENCY_QUERIES: Final = 200
LIMIT: Final = 5
BUILD_TARGET_MS: Final = 50.0
QUERY_TARGET_US: Final = 1_000.0
LIST_BOUND_SEC: Final = 60.0
SETTLE_SEC: Final = 5.0
"""How long to wait for a server's ``tools/list_changed`` when it announces tools after the handshake."""
QUERIES_FILE: Final = Path(__file__).with_name("retrieval_queries.toml")
INTEROP: Final = REPO_ROOT / "tests" / "interop"
NOT_INSTALLED: Final = "not installed (pip install tantivy bm25s to compare)"
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


# -- the real servers ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RealServer:
    """One third-party server of the retrieval set: its short name, package and command (paths under tests/interop)."""

    name: str
    package: str
    argv: tuple[str, ...]
    announces_later: bool = False
    """It registers tools after the handshake and says so with ``tools/list_changed``."""

    @property
    def installed(self) -> bool:
        return Path(self.argv[1] if self.argv[0] == "node" else self.argv[0]).exists()


def _npm(package: str, script: str, *args: str) -> tuple[str, ...]:
    return ("node", str(INTEROP / "node_modules" / package / script), *args)


SERVERS: Final = (
    RealServer(
        "everything",
        "npm @modelcontextprotocol/server-everything",
        _npm("@modelcontextprotocol/server-everything", "dist/index.js", "stdio"),
        announces_later=True,
    ),
    RealServer(
        "fs",
        "npm @modelcontextprotocol/server-filesystem",
        _npm("@modelcontextprotocol/server-filesystem", "dist/index.js", "{tmp}"),
    ),
    RealServer(
        "memory",
        "npm @modelcontextprotocol/server-memory",
        _npm("@modelcontextprotocol/server-memory", "dist/index.js"),
    ),
    RealServer(
        "thinking",
        "npm @modelcontextprotocol/server-sequential-thinking",
        _npm("@modelcontextprotocol/server-sequential-thinking", "dist/index.js"),
    ),
    RealServer(
        "github",
        "npm @modelcontextprotocol/server-github",
        _npm("@modelcontextprotocol/server-github", "dist/index.js"),
    ),
    RealServer("playwright", "npm @playwright/mcp", _npm("@playwright/mcp", "cli.js", "--headless")),
    RealServer("notion", "npm @notionhq/notion-mcp-server", _npm("@notionhq/notion-mcp-server", "bin/cli.mjs")),
    RealServer("time", "PyPI mcp-server-time", (str(INTEROP / ".venv-time/bin/mcp-server-time"),)),
    RealServer("git", "PyPI mcp-server-git", (str(INTEROP / ".venv-servers/bin/mcp-server-git"),)),
    RealServer("fetch", "PyPI mcp-server-fetch", (str(INTEROP / ".venv-servers/bin/mcp-server-fetch"),)),
)


async def _list_one(server: RealServer, tmp: str, into: dict[str, list[types.Tool]]) -> None:
    argv = [arg.replace("{tmp}", tmp) for arg in server.argv]
    with trio.fail_after(LIST_BOUND_SEC):
        # An empty PYTHONPATH: a bench run that borrows tantivy and bm25s by PYTHONPATH must not lend the
        # project's mcp 2.x to mcp-server-time's own venv.
        async with open_host(argv, mode="legacy", listen=False, env={"PYTHONPATH": ""}) as host:
            if server.announces_later:
                with trio.move_on_after(SETTLE_SEC):
                    await host.wait_notice(after=0)
            tools: list[types.Tool] = []
            cursor: str | None = None
            while True:
                page = await host.session.list_tools(cursor=cursor, cache_mode="bypass")
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
    into[server.name] = tools


async def list_real_servers() -> tuple[dict[str, list[types.Tool]], list[RealServer]]:
    """Every installed server's tools, listed concurrently from real processes; and the servers not installed."""
    present = [server for server in SERVERS if server.installed]
    missing = [server for server in SERVERS if not server.installed]
    listed: dict[str, list[types.Tool]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with trio.open_nursery() as nursery:
            for server in present:
                nursery.start_soon(_list_one, server, tmp, listed)
    await reap_marked("p7")
    return {server.name: listed[server.name] for server in present}, missing


# -- the synthetic 5,000 ------------------------------------------------------------------

_DOMAINS: Final = {
    "tracker": ["issue", "ticket", "label", "milestone", "comment", "sprint", "epic", "assignee"],
    "code": ["repository", "branch", "commit", "pull request", "tag", "release", "workflow", "review"],
    "chat": ["channel", "message", "thread", "reaction", "user", "mention", "emoji", "reminder"],
    "files": ["file", "folder", "document", "attachment", "permission", "share link", "version", "trash"],
    "crm": ["customer", "contact", "deal", "lead", "account", "note", "pipeline", "activity"],
    "billing": ["invoice", "payment", "subscription", "refund", "coupon", "price", "receipt", "tax rate"],
    "cloud": ["instance", "bucket", "volume", "snapshot", "cluster", "pod", "secret", "load balancer"],
    "observability": ["metric", "log", "trace", "alert", "dashboard", "monitor", "incident", "span"],
    "calendar": ["event", "calendar", "meeting", "attendee", "room", "availability", "invitation", "timezone"],
    "data": ["table", "row", "column", "query", "schema", "view", "index", "backup"],
}
_VERBS: Final = [
    ("list", "Lists"), ("get", "Retrieves"), ("create", "Creates"), ("update", "Updates"), ("delete", "Deletes"),
    ("search", "Searches for"), ("archive", "Archives"), ("restore", "Restores"), ("export", "Exports"),
    ("import", "Imports"), ("move", "Moves"), ("copy", "Copies"), ("assign", "Assigns"), ("close", "Closes"),
    ("sync", "Synchronizes"), ("count", "Counts"), ("watch", "Watches"), ("schedule", "Schedules"),
]  # fmt: skip
_PHRASES: Final = [
    "for the current workspace", "matching the given filters", "that the caller can access", "in a single request",
    "and returns their identifiers", "with pagination through a cursor", "sorted by the most recent first",
    "including archived items when asked", "owned by a specific team", "created within a date range",
    "so that other tools can use the result", "after checking the caller's permissions", "using the service's API",
]  # fmt: skip
_NOTES: Final = [
    "Fails when the item does not exist.", "Requires write access.", "Results are cached for a minute.",
    "Large results are truncated.", "Returns at most one hundred items per page.", "Idempotent.",
    "The change is visible to every member immediately.", "Use the id returned by the list tool.",
]  # fmt: skip
_ARGUMENTS: Final = [
    ("id", "The unique identifier of the {noun}."), ("query", "Free text to search for in {noun} names and content."),
    ("limit", "The maximum number of items to return."), ("cursor", "An opaque cursor from a previous page."),
    ("owner", "The user or team that owns the {noun}."), ("since", "Only items changed after this ISO 8601 time."),
    ("status", "Filter by status, such as open or closed."), ("tags", "Labels to attach to the {noun}."),
    ("includeArchived", "Also return archived items."), ("sort_order", "Ascending or descending order."),
    ("parent_id", "The container the {noun} belongs to."), ("name", "A human readable name for the {noun}."),
]  # fmt: skip
_ASKS: Final = ["", "please ", "can you ", "i need to ", "help me ", "show me how to "]


def _styled(words: list[str], style: int) -> str:
    if style == 0:
        return "_".join(words)
    if style == 1:
        return words[0] + "".join(word.capitalize() for word in words[1:])
    return "-".join(words)


def synthetic_tools(count: int = SYNTHETIC_TOOLS, seed: int = SEED) -> dict[str, list[types.Tool]]:
    """``count`` varied tool definitions over ``SYNTHETIC_SERVERS`` servers, the same for the same seed."""
    rng = random.Random(seed)
    per_server = count // SYNTHETIC_SERVERS
    servers: dict[str, list[types.Tool]] = {}
    domains = list(_DOMAINS)
    for number in range(SYNTHETIC_SERVERS):
        domain = domains[number % len(domains)]
        style = rng.randrange(3)
        names: set[str] = set()
        tools: list[types.Tool] = []
        while len(tools) < per_server:
            verb, verb_text = rng.choice(_VERBS)
            noun = rng.choice(_DOMAINS[domain])
            plural = verb in ("list", "search", "export", "import", "count", "sync")
            noun_text = f"{noun}s" if plural and not noun.endswith("s") else noun
            name = _styled([verb, *noun_text.split()], style)
            if name in names:
                name = _styled([verb, *noun_text.split(), rng.choice(["batch", "v2", "bulk", "by", "all"])], style)
            if name in names:
                continue
            names.add(name)
            words = [f"{verb_text} {noun_text}", *rng.sample(_PHRASES, rng.randint(1, 3))]
            description = " ".join(words) + ". " + " ".join(rng.sample(_NOTES, rng.randint(0, 3)))
            while len(description.split()) < 10:
                description += " " + rng.choice(_NOTES)
            description = " ".join(description.split()[:40])
            arguments = rng.sample(_ARGUMENTS, rng.randint(1, 5))
            schema = {
                "type": "object",
                "properties": {
                    arg: {"type": "string", "description": text.format(noun=noun)} for arg, text in arguments
                },
                "required": [arguments[0][0]],
            }
            tools.append(types.Tool(name=name, description=description, input_schema=schema))
        servers[f"{domain}{number // len(domains)}"] = tools
    return servers


def latency_queries(count: int = LATENCY_QUERIES, seed: int = SEED) -> list[str]:
    """Queries in a user's words over the synthetic vocabulary ("can you list open invoices since monday")."""
    rng = random.Random(seed + 1)
    queries = []
    for _ in range(count):
        nouns = _DOMAINS[rng.choice(list(_DOMAINS))]
        verb = rng.choice(_VERBS)[0]
        extra = rng.choice(["", " that are open", " for my team", " from last week", " by name", " in bulk"])
        queries.append(f"{rng.choice(_ASKS)}{verb} the {rng.choice(nouns)}s{extra}")
    return queries


def registry_of(listings: dict[str, list[types.Tool]]) -> list[RegisteredTool]:
    """Fresh entries (no kept search terms) for ``listings``, as one Registry holds them."""
    registry = Registry()
    for server, tools in listings.items():
        registry.swap(server, tools)
    return registry.tool_entries()


# -- the engines --------------------------------------------------------------------------


class Engine(Protocol):
    def build(self, entries: Sequence[RegisteredTool]) -> None: ...
    def search(self, query: str, limit: int) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class Fields:
    """The text of one tool that the libraries index, as ``tool_terms`` reads it: name, title, the rest.

    The name is split into words first (tantivy's and bm25s's tokenizers split neither
    camelCase nor snake_case); the rest is the server's name, the description and each
    argument's name and description.
    """

    key: str
    name: str
    title: str
    text: str

    @classmethod
    def of(cls, entry: RegisteredTool) -> Fields:
        tool = entry.shown
        text = [entry.owner, tool.description or ""]
        properties = tool.input_schema.get("properties") if isinstance(tool.input_schema, dict) else None
        for argument, schema in (properties if isinstance(properties, dict) else {}).items():
            text.append(_split(str(argument)))
            if isinstance(schema, dict) and isinstance(schema.get("description"), str):
                text.append(schema["description"])
        name = entry.key.removeprefix(f"mcp__{entry.owner}__")
        return cls(key=entry.key, name=_split(name), title=tool.title or "", text=" ".join(text))


def _split(name: str) -> str:
    return " ".join(_NAME_WORDS.findall(name))


class Plain:
    def __init__(self) -> None:
        self.index = ToolIndex([])

    def build(self, entries: Sequence[RegisteredTool]) -> None:
        self.index = ToolIndex(entries)

    def search(self, query: str, limit: int) -> list[str]:
        return [match.entry.key for match in self.index.search(query, limit)]


_BOOSTS: Final = {"name": float(NAME_WEIGHT), "title": float(TITLE_WEIGHT), "text": 1.0}


class Tantivy:
    def __init__(self) -> None:
        self.lib = importlib.import_module("tantivy")
        self.index: Any = None
        self.searcher: Any = None

    def build(self, entries: Sequence[RegisteredTool]) -> None:
        builder = self.lib.SchemaBuilder()
        builder.add_text_field("key", stored=True, tokenizer_name="raw")
        for field in _BOOSTS:
            builder.add_text_field(field, tokenizer_name="en_stem", index_option="freq")
        self.index = self.lib.Index(builder.build())  # no path: in RAM
        writer = self.index.writer()
        for entry in entries:
            fields = Fields.of(entry)
            writer.add_document(self.lib.Document(**{name: [getattr(fields, name)] for name in ("key", *_BOOSTS)}))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, query: str, limit: int) -> list[str]:
        words = re.findall(r"\w+", query.lower())  # the query language's operators and syntax, left out
        if not words:
            return []
        parsed = self.index.parse_query(" ".join(words), list(_BOOSTS), field_boosts=_BOOSTS)
        hits = self.searcher.search(parsed, limit).hits
        return [self.searcher.doc(address)["key"][0] for _score, address in hits]


def _stem_words(words: list[str]) -> list[str]:
    return [stem(word) for word in words]


class Bm25s:
    def __init__(self) -> None:
        self.lib = importlib.import_module("bm25s")
        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG, to the root handler
        self.retriever: Any = None
        self.keys: list[str] = []

    def build(self, entries: Sequence[RegisteredTool]) -> None:
        corpus = []
        for entry in entries:
            f = Fields.of(entry)
            # No field weights in bm25s: repeat each field by our weight, as tool_terms does.
            corpus.append(" ".join([f.name] * NAME_WEIGHT + [f.title] * TITLE_WEIGHT + [f.text]))
        tokens = self.lib.tokenize(corpus, stopwords="en", stemmer=_stem_words, show_progress=False)
        self.retriever = self.lib.BM25()
        self.retriever.index(tokens, show_progress=False)
        self.keys = [entry.key for entry in entries]

    def search(self, query: str, limit: int) -> list[str]:
        tokens = self.lib.tokenize([query], stopwords="en", stemmer=_stem_words, show_progress=False, return_ids=False)
        if not tokens[0]:
            return []
        found, scores = self.retriever.retrieve(tokens, k=min(limit, len(self.keys)), show_progress=False)
        return [self.keys[int(doc)] for doc, score in zip(found[0], scores[0], strict=True) if score > 0]


ENGINES: Final[dict[str, tuple[str | None, Callable[[], Engine]]]] = {
    "plain": (None, Plain),
    "tantivy": ("tantivy", Tantivy),
    "bm25s": ("bm25s", Bm25s),
}


# -- measuring ------------------------------------------------------------------------------


def _ms(started_ns: int) -> float:
    return (time.perf_counter_ns() - started_ns) / 1e6


def build_ms(engine: Engine, listings: dict[str, list[types.Tool]], rounds: int) -> tuple[float, float]:
    """Median build over fresh entries (new each round) and rebuild over the same entries again, in ms."""
    fresh, warm = [], []
    for _ in range(rounds):
        entries = registry_of(listings)
        gc.collect()
        started = time.perf_counter_ns()
        engine.build(entries)
        fresh.append(_ms(started))
        gc.collect()
        started = time.perf_counter_ns()
        engine.build(entries)
        warm.append(_ms(started))
    return median(fresh), median(warm)


def first_build_ms(engine: str) -> tuple[float, float]:
    """One build over fresh entries, the first of its process (nothing of the engine warmed up), in ms.

    And the first query after it, in ms: an index that left work for its first query would
    show it here, so the two add up to what the host that searched first waited for.
    """
    entries = registry_of(synthetic_tools())
    query = latency_queries(1)[0]
    built = ENGINES[engine][1]()
    gc.collect()
    started = time.perf_counter_ns()
    built.build(entries)
    build = _ms(started)
    started = time.perf_counter_ns()
    built.search(query, LIMIT)
    return build, _ms(started)


def cold_build_ms(engine: str, runs: int) -> tuple[float, float]:
    """Medians of ``first_build_ms`` (the build, its first query) over ``runs`` fresh interpreters."""
    probe = f"from bench.search import first_build_ms; print(*first_build_ms({engine!r}))"
    samples = [tuple(map(float, _python(probe).split())) for _ in range(runs)]
    return median([build for build, _ in samples]), median([query for _, query in samples])


def _python(code: str, *args: str) -> str:
    """The output of ``code`` in a fresh interpreter of this one (its ``sys.path`` by PYTHONPATH, run from the repo)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, cwd=REPO_ROOT
    ).stdout


def query_us(engine: Engine, queries: Sequence[str], passes: int) -> tuple[float, float]:
    """p50 and p95 of one ``search`` each, in µs, over ``passes`` passes of ``queries``."""
    samples = []
    for _ in range(passes):
        for query in queries:
            started = time.perf_counter_ns()
            engine.search(query, LIMIT)
            samples.append((time.perf_counter_ns() - started) / 1e3)
    return percentile(samples, 0.5), percentile(samples, 0.95)


_IMPORT_PROBE: Final = """
import importlib, json, sys, time
def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
for name in sys.argv[2:]:
    importlib.import_module(name)
before, started = rss_kb(), time.perf_counter_ns()
importlib.import_module(sys.argv[1])
print(json.dumps({"ms": (time.perf_counter_ns() - started) / 1e6, "mb": (rss_kb() - before) / 1024}))
"""


def import_cost(module: str, *preloaded: str, runs: int) -> tuple[float, float]:
    """Median import time (ms) and RSS added (MiB) of ``module`` in fresh interpreters that loaded ``preloaded``."""
    samples = [json.loads(_python(_IMPORT_PROBE, module, *preloaded)) for _ in range(runs)]
    return statistics.median(s["ms"] for s in samples), statistics.median(s["mb"] for s in samples)


@dataclass(frozen=True, slots=True)
class Query:
    ask: str
    tool: str

    @property
    def server(self) -> str:
        return self.tool.removeprefix("mcp__").split("__", 1)[0]


def load_queries(path: Path = QUERIES_FILE) -> list[Query]:
    return [Query(item["ask"], item["tool"]) for item in tomllib.loads(path.read_text(encoding="utf-8"))["queries"]]


def recall(
    engine: Engine, queries: Sequence[Query]
) -> tuple[dict[str, tuple[float, float]], list[tuple[Query, list[str]]]]:
    """recall@1 and recall@5, overall ("all") and per server; and the misses at 1 with what came first."""
    hits: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    misses = []
    for query in queries:
        found = engine.search(query.ask, LIMIT)
        at_1, at_5 = found[:1] == [query.tool], query.tool in found
        hits["all"].append((at_1, at_5))
        hits[query.server].append((at_1, at_5))
        if not at_1:
            misses.append((query, found[:3]))
    by = {
        group: (sum(a for a, _ in rows) / len(rows), sum(b for _, b in rows) / len(rows))
        for group, rows in hits.items()
    }
    return by, misses


def _engines() -> Iterator[tuple[str, Engine | None]]:
    for name, (_module, factory) in ENGINES.items():
        try:
            yield name, factory()
        except ImportError:
            yield name, None


def _import_of(name: str, runs: int) -> tuple[float, float]:
    module = ENGINES[name][0]
    if module is None:  # the plain index: its module, after the registry the sidecar has loaded anyway
        return import_cost("supervisor.catalog.search", "supervisor.catalog.registry", runs=runs)
    return import_cost(module, runs=runs)


async def run(quick: bool = False) -> dict[str, Any]:
    rounds, passes, runs = (3, 2, 3) if quick else (7, 5, 5)
    listings = synthetic_tools()
    queries = latency_queries()
    real, missing = await list_real_servers()
    asks = [query for query in load_queries() if query.server in real]
    real_entries = registry_of(real)
    out: dict[str, Any] = {"p7_tools": SYNTHETIC_TOOLS, "p7_latency_queries": len(queries)}
    out |= {"p7_real_servers": len(real), "p7_real_tools": len(real_entries), "p7_recall_queries": len(asks)}
    print(f"p7: {SYNTHETIC_TOOLS} synthetic tools, {len(queries)} queries; ", end="")
    print(f"{len(real)} real servers, {len(real_entries)} tools, {len(asks)} retrieval queries")
    for server in missing:
        print(f"  {server.name} ({server.package}) is not installed: run tests/interop/install.sh")
    for name, engine in _engines():
        if engine is None:
            print(f"  {name}: {NOT_INSTALLED}")
            out[f"p7_{name}"] = NOT_INSTALLED
            continue
        cold, cold_query = cold_build_ms(name, runs)
        fresh, warm = build_ms(engine, listings, rounds)
        p50, p95 = query_us(engine, queries, passes)
        import_ms, import_mb = _import_of(name, runs)
        engine.build(real_entries)
        by_server, misses = recall(engine, asks)
        overall = by_server.pop("all")
        out[f"p7_{name}"] = {
            "build_cold_ms": round(cold, 1),
            "build_cold_first_query_ms": round(cold_query, 2),
            "build_fresh_ms": round(fresh, 1),
            "build_warm_ms": round(warm, 1),
            "query_p50_us": round(p50, 1),
            "query_p95_us": round(p95, 1),
            "import_ms": round(import_ms, 1),
            "import_rss_mb": round(import_mb, 1),
            "recall_at_1": round(overall[0], 3),
            "recall_at_5": round(overall[1], 3),
            "recall_by_server": {server: [round(a, 2), round(b, 2)] for server, (a, b) in sorted(by_server.items())},
            "misses": [query.ask for query, _ in misses],
        }
        print(
            f"  {name}: build cold {cold:.1f} ms (its first query {cold_query:.2f} ms), fresh entries {fresh:.1f} ms, "
            f"same entries {warm:.1f} ms; "
            f"query p50 {p50:.0f} µs, p95 {p95:.0f} µs; import {import_ms:.1f} ms, +{import_mb:.1f} MB RSS; "
            f"recall@1 {overall[0]:.3f}, @5 {overall[1]:.3f}"
        )
        print("    per server (@1/@5): " + ", ".join(f"{s} {a:.2f}/{b:.2f}" for s, (a, b) in sorted(by_server.items())))
        if name == "plain":
            verdict = [
                f"build cold {'met' if cold <= BUILD_TARGET_MS else 'MISSED'}",
                f"fresh {'met' if fresh <= BUILD_TARGET_MS else 'MISSED'}",
                f"same entries {'met' if warm <= BUILD_TARGET_MS else 'MISSED'}",
                f"query p50 {'met' if p50 <= QUERY_TARGET_US else 'MISSED'}",
            ]
            print(
                f"    targets (build <= {BUILD_TARGET_MS:.0f} ms, p50 <= {QUERY_TARGET_US:.0f} µs): "
                + ", ".join(verdict)
            )
            for query, found in misses:
                print(f"    miss: {query.ask!r} -> want {query.tool}, got {found}")
    return out


if __name__ == "__main__":
    print(json.dumps(trio.run(run)))
