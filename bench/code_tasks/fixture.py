"""The world the code-mode tasks run in: a folder tree, a git repository, a memory graph and a small web site.

``build(base)`` makes, under ``base`` (emptied first), the same bytes every time
(a seeded generator, fixed commit dates and authors, so even the commit hashes
repeat): each mode of ``bench.code_mode`` gets a fresh copy at the same paths, so
a task writes into it without changing what another mode measures, and every
path a result names has the same length in every mode.

* ``files/``: what the filesystem server may read: ``docs/`` (12 Markdown pages of
  3-5 KB, some lines saying "deprecated"), ``src/`` (8 Python modules with
  ``TODO(name)`` comments), ``logs/`` (4 service logs of 150-260 lines with
  ``ERROR E<code>`` lines), ``data/`` (a 240-row ``sales.csv``, ``config.json``,
  ``users.json``) and an empty ``notes/`` for the tasks that write;
* ``repo/``: 20 commits by 5 authors (the ``git`` CLI, fixed dates);
* a web site (``build_site``, once per run, elsewhere: nothing writes it): an index
  page linking 6 pages, served by ``bench.code_mode`` over loopback HTTP for the
  fetch server;
* the memory graph is data here (``ENTITIES``, ``RELATIONS``): ``bench.code_mode``
  puts it into the memory server with ``create_entities`` and ``create_relations``
  calls before a mode starts.

Sync functions (file writes and ``git`` subprocesses): callers off the event
loop run them in a worker thread.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

SEED: Final = 58
WORDS: Final = (
    "cache", "request", "token", "server", "client", "session", "handler", "buffer", "stream", "signal",
    "catalog", "listing", "schema", "adapter", "worker", "timeout", "retry", "backoff", "window", "frame",
    "value", "record", "index", "query", "result", "budget", "limit", "policy", "route", "upstream",
)  # fmt: skip
VERBS: Final = ("keeps", "drops", "sends", "reads", "writes", "checks", "moves", "holds", "opens", "closes")
DOCS: Final = (
    "architecture", "configuration", "deployment", "errors", "fleet", "logging",
    "metrics", "names", "reconnect", "search", "security", "views",
)  # fmt: skip
MODULES: Final = ("core", "cache", "config", "wire", "names", "search", "views", "util")
DEVELOPERS: Final = ("ana", "bo", "chen", "dara")
LOG_DAYS: Final = ("2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04")
ERROR_CODES: Final = ("E1042", "E2001", "E2207", "E3100", "E4040", "E5003")
SERVICES: Final = ("api", "auth", "billing", "search")
REGIONS: Final = ("north", "south", "east", "west")
PRODUCTS: Final = ("widget", "gadget", "gizmo", "doohickey")
AUTHORS: Final = (
    ("Ada Lovelace", "ada@example.org"),
    ("Grace Hopper", "grace@example.org"),
    ("Linus Torvalds", "linus@example.org"),
    ("Barbara Liskov", "barbara@example.org"),
    ("Ken Thompson", "ken@example.org"),
)
REPO_FILES: Final = ("README.md", "src/core.py", "src/util.py", "docs/guide.md", "tests/test_core.py", "CHANGELOG.md")
COMMITS: Final = 20
PAGES: Final = ("pricing", "team", "blog", "faq", "careers", "contact")
FRUITS: Final = ("apples", "pears", "plums")

ENTITIES: Final[tuple[dict[str, Any], ...]] = (
    {"name": "Ada", "entityType": "person", "observations": ["writes Python", "leads Atlas", "based in London"]},
    {"name": "Bo", "entityType": "person", "observations": ["writes Rust", "on call in December", "based in Oslo"]},
    {"name": "Chen", "entityType": "person", "observations": ["writes Python and Go", "reviews security changes"]},
    {"name": "Dara", "entityType": "person", "observations": ["writes TypeScript", "based in Lisbon"]},
    {"name": "Eli", "entityType": "person", "observations": ["writes Python", "joined in October"]},
    {"name": "Fay", "entityType": "person", "observations": ["designs dashboards", "based in London"]},
    {"name": "Gus", "entityType": "person", "observations": ["writes Go", "runs the release train"]},
    {"name": "Hana", "entityType": "person", "observations": ["writes Python", "owns the metrics pipeline"]},
    {"name": "Atlas", "entityType": "project", "observations": ["a routing service", "due in Q1", "status: at risk"]},
    {"name": "Beacon", "entityType": "project", "observations": ["a metrics pipeline", "status: on track"]},
    {"name": "Comet", "entityType": "project", "observations": ["a web dashboard", "status: on track"]},
    {"name": "Delta", "entityType": "project", "observations": ["a data migration", "status: at risk"]},
    {"name": "Platform", "entityType": "team", "observations": ["owns the shared infrastructure"]},
    {"name": "Product", "entityType": "team", "observations": ["owns the customer facing apps"]},
    {"name": "Data", "entityType": "team", "observations": ["owns analytics"]},
)  # fmt: skip
RELATIONS: Final[tuple[dict[str, str], ...]] = tuple(
    {"from": source, "to": target, "relationType": kind}
    for source, kind, target in (
        ("Ada", "works_on", "Atlas"), ("Bo", "works_on", "Atlas"), ("Chen", "works_on", "Atlas"),
        ("Dara", "works_on", "Comet"), ("Eli", "works_on", "Beacon"), ("Fay", "works_on", "Comet"),
        ("Gus", "works_on", "Delta"), ("Hana", "works_on", "Beacon"), ("Chen", "works_on", "Delta"),
        ("Ada", "member_of", "Platform"), ("Bo", "member_of", "Platform"), ("Chen", "member_of", "Platform"),
        ("Gus", "member_of", "Platform"), ("Dara", "member_of", "Product"), ("Fay", "member_of", "Product"),
        ("Eli", "member_of", "Data"), ("Hana", "member_of", "Data"),
        ("Platform", "owns", "Atlas"), ("Platform", "owns", "Delta"), ("Product", "owns", "Comet"),
        ("Data", "owns", "Beacon"),
    )
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Fixture:
    """Where one mode's copy of the world is; ``site_url`` ends with ``/``."""

    base: Path
    site: Path
    """The web site's folder (``build_site``), served at ``site_url``."""
    site_url: str

    @property
    def root(self) -> Path:
        return self.base / "files"

    @property
    def repo(self) -> Path:
        return self.base / "repo"

    @property
    def memory_file(self) -> Path:
        return self.base / "memory.jsonl"

    def places(self) -> dict[str, str]:
        """What a program's ``$root``, ``$repo`` and ``$site`` stand for (``Task.program_for``)."""
        return {"root": str(self.root), "repo": str(self.repo), "site": self.site_url}


def _sentence(rng: random.Random, words: int) -> str:
    chosen = [rng.choice(WORDS) if i % 3 else rng.choice(VERBS) for i in range(words)]
    return " ".join(["The", *chosen]) + "."


def _doc(rng: random.Random, topic: str) -> str:
    lines = [f"# {topic.capitalize()}", "", f"How the sidecar handles {topic}.", ""]
    for section in range(rng.randint(4, 6)):
        lines += [f"## {topic.capitalize()} part {section + 1}", ""]
        for _ in range(rng.randint(7, 10)):
            line = _sentence(rng, rng.randint(9, 14))
            if rng.random() < 0.06:
                line = line[:-1] + f", but the {rng.choice(WORDS)} key is deprecated since 0.{rng.randint(2, 9)}."
            lines.append(line)
        lines.append("")
    return "\n".join(lines)


def _module(rng: random.Random, name: str) -> str:
    lines = [f'"""The {name} module."""', "", "from __future__ import annotations", ""]
    for number in range(rng.randint(6, 11)):
        word = rng.choice(WORDS)
        lines += ["", f"def {word}_{number}(value: int) -> int:", f'    """{_sentence(rng, 8)}"""']
        if rng.random() < 0.3:
            lines.append(f"    # TODO({rng.choice(DEVELOPERS)}): {rng.choice(VERBS)} the {rng.choice(WORDS)} first")
        lines += [f"    total = value * {rng.randint(2, 9)}", f"    return total + {rng.randint(0, 99)}", ""]
    return "\n".join(lines)


def _log(rng: random.Random, day: str) -> str:
    lines = []
    for number in range(rng.randint(150, 260)):
        stamp = f"{day}T{number // 10 % 24:02d}:{number % 60:02d}:{rng.randint(0, 59):02d}Z"
        service = rng.choice(SERVICES)
        roll = rng.random()
        if roll < 0.08:
            lines.append(f"{stamp} ERROR {rng.choice(ERROR_CODES)} service={service} {_sentence(rng, 6)}")
        elif roll < 0.2:
            lines.append(f"{stamp} WARN  service={service} latency_ms={rng.randint(200, 2000)} {_sentence(rng, 5)}")
        else:
            lines.append(f"{stamp} INFO  service={service} {_sentence(rng, 7)}")
    return "\n".join(lines) + "\n"


def _files(root: Path, rng: random.Random) -> None:
    for folder in ("docs", "src", "logs", "data", "notes"):
        (root / folder).mkdir(parents=True)
    for topic in DOCS:
        (root / "docs" / f"{topic}.md").write_text(_doc(rng, topic))
    for name in MODULES:
        (root / "src" / f"{name}.py").write_text(_module(rng, name))
    for day in LOG_DAYS:
        (root / "logs" / f"app-{day}.log").write_text(_log(rng, day))
    rows = ["date,region,product,units,amount"]
    for number in range(240):
        units = rng.randint(1, 40)
        rows.append(
            f"2026-10-{number % 28 + 1:02d},{rng.choice(REGIONS)},{rng.choice(PRODUCTS)},{units},"
            f"{units * rng.choice((5, 12, 20))}"
        )
    (root / "data" / "sales.csv").write_text("\n".join(rows) + "\n")
    config = {
        "service": {"name": "router", "port": 8931, "workers": 4},
        "cache": {"ttl_ms": 300000, "backend": "file", "max_entries": 5000},
        "upstreams": [
            {"name": name, "timeout_ms": rng.choice((500, 1000, 2500)), "retries": rng.randint(0, 5)}
            for name in SERVICES
        ],
        "features": {word: rng.random() < 0.5 for word in WORDS[:12]},
    }
    (root / "data" / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    users = [
        {
            "id": 1000 + n,
            "name": f"user{n:02d}",
            "team": rng.choice(("platform", "product", "data")),
            "active": n % 4 != 0,
        }
        for n in range(50)
    ]
    (root / "data" / "users.json").write_text(json.dumps(users, indent=2) + "\n")


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """The output of ``git -C repo args`` (expected answers read the repository with it too)."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    return done.stdout


def _repo(repo: Path, rng: random.Random) -> None:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for path in REPO_FILES:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
    for number in range(COMMITS):
        name, email = AUTHORS[rng.randrange(len(AUTHORS))] if number else AUTHORS[0]
        touched = REPO_FILES if number == 0 else rng.sample(REPO_FILES, rng.randint(1, 3))
        for path in touched:
            with (repo / path).open("a") as file:
                file.writelines(f"{_sentence(rng, 8)}\n" for _ in range(rng.randint(2, 8)))
        git(repo, "add", "--", *touched)
        date = f"2026-09-{number + 1:02d}T10:00:00+00:00"
        kind = "init" if number == 0 else rng.choice(("feat", "fix", "docs", "refactor"))
        stamp = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        people = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email}
        committer = {"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}
        message = f"{kind}: {rng.choice(VERBS)} the {rng.choice(WORDS)} in {touched[0]}"
        git(repo, "commit", "-q", "--no-gpg-sign", "-m", message, env=stamp | people | committer)
    git(repo, "branch", "release-1.0", "HEAD~5")
    git(repo, "branch", "topic/search")
    with (repo / "docs" / "guide.md").open("a") as file:
        file.write("An edit that is not committed yet.\n")


def build_site(site: Path) -> None:
    """The web site (module docstring), once per run: it is only read, so every mode shares it."""
    rng = random.Random(SEED)
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    links = "".join(f'<li><a href="{page}.html">{page.capitalize()}</a></li>' for page in PAGES)
    (site / "index.html").write_text(
        f"<html><head><title>Example Co</title></head><body><h1>Example Co</h1><ul>{links}</ul></body></html>"
    )
    for page in PAGES:
        paragraphs = [_sentence(rng, rng.randint(10, 18)) for _ in range(rng.randint(8, 14))]
        for index in rng.sample(range(len(paragraphs)), 2):
            paragraphs[index] = paragraphs[index][:-1] + f" with {rng.choice(FRUITS)}."
        body = "".join(f"<p>{text}</p>" for text in paragraphs)
        (site / f"{page}.html").write_text(
            f"<html><head><title>{page.capitalize()}</title></head><body><h1>{page.capitalize()} at Example Co</h1>"
            f"{body}</body></html>"
        )


def build(base: Path, site: Path, site_url: str) -> Fixture:
    """A fresh copy of the files and the repository under ``base``; the memory graph is left to the caller."""
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    rng = random.Random(SEED)
    fixture = Fixture(base, site, site_url)
    _files(fixture.root, rng)
    _repo(fixture.repo, rng)
    return fixture
