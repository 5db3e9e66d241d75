"""The tasks over the memory server's knowledge graph (``memory``), and one that joins it with ``git``.

The graph is ``fixture.ENTITIES`` and ``fixture.RELATIONS``; the expected answers
are read from that data. ``open_nodes`` and ``search_nodes`` answer the matching
entities and every relation with an end among them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from bench.code_tasks.fixture import ENTITIES, RELATIONS, Fixture, git
from bench.code_tasks.task import Calls, Task


def _related(kind: str, relations: Iterable[dict[str, str]] = RELATIONS) -> list[tuple[str, str]]:
    return [(relation["from"], relation["to"]) for relation in relations if relation["relationType"] == kind]


def _observations(name: str) -> list[str]:
    return next(entity["observations"] for entity in ENTITIES if entity["name"] == name)


def _city(observations: Iterable[str]) -> str | None:
    return next((text.removeprefix("based in ") for text in observations if text.startswith("based in ")), None)


# -- who works on Atlas, in which team ----------------------------------------------------------------


async def _atlas(calls: Calls, fx: Fixture) -> Any:
    atlas = (await calls("memory__open_nodes", {"names": ["Atlas"]})).json()
    people = sorted(source for source, target in _related("works_on", atlas["relations"]) if target == "Atlas")
    graph = (await calls("memory__open_nodes", {"names": people})).json()
    return dict(sorted((source, team) for source, team in _related("member_of", graph["relations"])))


def _atlas_expected(fx: Fixture) -> Any:
    people = {source for source, target in _related("works_on") if target == "Atlas"}
    return dict(sorted((source, team) for source, team in _related("member_of") if source in people))


ATLAS_TEAMS = Task(
    name="atlas_people_teams",
    ask="Who works on the Atlas project, and which team is each of them in?",
    tools=("memory__open_nodes",),
    plain=_atlas,
    expected=_atlas_expected,
    code_query="open nodes of the knowledge graph",
    program="""\
from tools import memory
atlas = await memory.open_nodes(names=["Atlas"])
people = sorted(r["from"] for r in atlas["relations"] if r["relationType"] == "works_on" and r["to"] == "Atlas")
graph = await memory.open_nodes(names=people)
dict(sorted((r["from"], r["to"]) for r in graph["relations"] if r["relationType"] == "member_of"))
""",
)


# -- one search: who writes Python ------------------------------------------------------------------------


async def _python(calls: Calls, fx: Fixture) -> Any:
    found = (await calls("memory__search_nodes", {"query": "Python"})).json()
    return sorted(entity["name"] for entity in found["entities"] if entity["entityType"] == "person")


PYTHON_PEOPLE = Task(
    name="python_people",
    ask="Who in the knowledge graph writes Python?",
    tools=("memory__search_nodes",),
    plain=_python,
    expected=lambda fx: sorted(
        e["name"]
        for e in ENTITIES
        if e["entityType"] == "person" and any("python" in o.lower() for o in e["observations"])
    ),
    code_query="search the knowledge graph",
    program="""\
from tools import memory
found = await memory.search_nodes(query="Python")
sorted(entity["name"] for entity in found["entities"] if entity["entityType"] == "person")
""",
)


# -- the projects at risk: owner, people, where they are ------------------------------------------------------


async def _at_risk(calls: Calls, fx: Fixture) -> Any:
    found = (await calls("memory__search_nodes", {"query": "at risk"})).json()
    projects = sorted(entity["name"] for entity in found["entities"] if entity["entityType"] == "project")
    people = sorted({source for source, target in _related("works_on", found["relations"]) if target in projects})
    graph = (await calls("memory__open_nodes", {"names": people})).json()
    cities = {entity["name"]: _city(entity["observations"]) for entity in graph["entities"]}
    owners = dict((target, source) for source, target in _related("owns", found["relations"]))
    return {
        project: {
            "owner": owners[project],
            "people": {p: cities[p] for p, t in sorted(_related("works_on", found["relations"])) if t == project},
        }
        for project in projects
    }


def _at_risk_expected(fx: Fixture) -> Any:
    projects = sorted(
        e["name"] for e in ENTITIES if e["entityType"] == "project" and "status: at risk" in e["observations"]
    )
    owners = {target: source for source, target in _related("owns")}
    return {
        project: {
            "owner": owners[project],
            "people": {p: _city(_observations(p)) for p, t in sorted(_related("works_on")) if t == project},
        }
        for project in projects
    }


AT_RISK = Task(
    name="at_risk_projects",
    ask="Which projects are at risk: their owning team, and where each person on them is based?",
    tools=("memory__search_nodes", "memory__open_nodes"),
    plain=_at_risk,
    expected=_at_risk_expected,
    code_query="search and open nodes of the knowledge graph",
    program="""\
from tools import memory
found = await memory.search_nodes(query="at risk")
projects = sorted(e["name"] for e in found["entities"] if e["entityType"] == "project")
relations = [(r["from"], r["to"]) for r in found["relations"] if r["relationType"] == "works_on"]
works = sorted((person, project) for person, project in relations if project in projects)
owners = {r["to"]: r["from"] for r in found["relations"] if r["relationType"] == "owns"}
graph = await memory.open_nodes(names=sorted({person for person, _ in works}))
cities = {}
for entity in graph["entities"]:
    based = [o[9:] for o in entity["observations"] if o.startswith("based in ")]
    cities[entity["name"]] = based[0] if based else None
{p: {"owner": owners[p], "people": {who: cities[who] for who, what in works if what == p}} for p in projects}
""",
)


# -- London: who, on what, in what state -----------------------------------------------------------------------


async def _london(calls: Calls, fx: Fixture) -> Any:
    found = (await calls("memory__search_nodes", {"query": "London"})).json()
    people = {entity["name"] for entity in found["entities"]}
    works = sorted((s, t) for s, t in _related("works_on", found["relations"]) if s in people)
    projects = (await calls("memory__open_nodes", {"names": sorted({t for _, t in works})})).json()
    status = {
        e["name"]: next(o[8:] for o in e["observations"] if o.startswith("status: ")) for e in projects["entities"]
    }
    return {person: {project: status[project]} for person, project in works}


def _london_expected(fx: Fixture) -> Any:
    people = {e["name"] for e in ENTITIES if "based in London" in e["observations"]}
    status = {e["name"]: o[8:] for e in ENTITIES for o in e["observations"] if o.startswith("status: ")}
    return {person: {project: status[project]} for person, project in sorted(_related("works_on")) if person in people}


LONDON = Task(
    name="london_projects",
    ask="Who is based in London, and what is the status of the project each works on?",
    tools=("memory__search_nodes", "memory__open_nodes"),
    plain=_london,
    expected=_london_expected,
    code_query="search and open nodes of the knowledge graph",
    program="""\
from tools import memory
found = await memory.search_nodes(query="London")
people = {e["name"] for e in found["entities"]}
relations = [(r["from"], r["to"]) for r in found["relations"] if r["relationType"] == "works_on"]
works = sorted((person, project) for person, project in relations if person in people)
projects = await memory.open_nodes(names=sorted({project for _, project in works}))
status = {}
for entity in projects["entities"]:
    for observation in entity["observations"]:
        if observation.startswith("status: "):
            status[entity["name"]] = observation[8:]
{person: {project: status[project]} for person, project in works}
""",
)


# -- a write, then a read that sees it ----------------------------------------------------------------------------


async def _observe(calls: Calls, fx: Fixture) -> Any:
    await calls(
        "memory__add_observations", {"observations": [{"entityName": "Eli", "contents": ["on call in January"]}]}
    )
    eli = (await calls("memory__open_nodes", {"names": ["Eli"]})).json()
    return eli["entities"][0]["observations"]


OBSERVE = Task(
    name="add_observation",
    ask="Note that Eli is on call in January, then show everything known about Eli.",
    tools=("memory__add_observations", "memory__open_nodes"),
    plain=_observe,
    expected=lambda fx: [*_observations("Eli"), "on call in January"],
    code_query="add observations to an entity and open it",
    program="""\
from tools import memory
await memory.add_observations(observations=[{"entityName": "Eli", "contents": ["on call in January"]}])
eli = await memory.open_nodes(names=["Eli"])
eli["entities"][0]["observations"]
""",
)


# -- the whole graph in one read ------------------------------------------------------------------------------


async def _team_sizes(calls: Calls, fx: Fixture) -> Any:
    graph = (await calls("memory__read_graph", {})).json()
    return dict(sorted(Counter(team for _, team in _related("member_of", graph["relations"])).items()))


TEAM_SIZES = Task(
    name="team_sizes",
    ask="How many members does each team have?",
    tools=("memory__read_graph",),
    plain=_team_sizes,
    expected=lambda fx: dict(sorted(Counter(team for _, team in _related("member_of")).items())),
    code_query="read the whole knowledge graph",
    program="""\
from tools import memory
graph = await memory.read_graph()
sizes = {}
for relation in graph["relations"]:
    if relation["relationType"] == "member_of":
        sizes[relation["to"]] = sizes.get(relation["to"], 0) + 1
dict(sorted(sizes.items()))
""",
)


# -- git and memory: the recent authors the graph knows --------------------------------------------------------


async def _known(calls: Calls, fx: Fixture) -> Any:
    log = await calls("git__git_log", {"repo_path": str(fx.repo), "max_count": 10})
    authors = sorted({line.removeprefix("Author: ") for line in log.lines() if line.startswith("Author: ")})
    graph = (await calls("memory__open_nodes", {"names": [author.split()[0] for author in authors]})).json()
    teams = dict(_related("member_of", graph["relations"]))
    return {author: teams.get(author.split()[0]) for author in authors}


def _known_expected(fx: Fixture) -> Any:
    teams = dict(_related("member_of"))
    authors = sorted(set(git(fx.repo, "log", "-10", "--format=%an").splitlines()))
    return {author: teams.get(author.split()[0]) for author in authors}


KNOWN_AUTHORS = Task(
    name="recent_authors_teams",
    ask="For each author of the last 10 commits, which team does the knowledge graph put them in (by first name)?",
    tools=("git__git_log", "memory__open_nodes"),
    plain=_known,
    expected=_known_expected,
    code_query="git commit log and open knowledge graph nodes",
    program="""\
from tools import git, memory
log = await git.git_log(repo_path="$repo", max_count=10)
authors = sorted({line[8:] for line in log.splitlines() if line.startswith("Author: ")})
graph = await memory.open_nodes(names=[author.split()[0] for author in authors])
teams = {r["from"]: r["to"] for r in graph["relations"] if r["relationType"] == "member_of"}
{author: teams.get(author.split()[0]) for author in authors}
""",
)

TASKS = (ATLAS_TEAMS, PYTHON_PEOPLE, AT_RISK, LONDON, OBSERVE, TEAM_SIZES, KNOWN_AUTHORS)

SEARCHES = {
    "memory__open_nodes": "open knowledge graph nodes by name",
    "memory__search_nodes": "search the knowledge graph",
    "memory__add_observations": "add observations to a knowledge graph entity",
    "memory__read_graph": "read the whole knowledge graph",
}
"""What a model asks ``search_tools`` for, per tool it needs (the search view's runs)."""
