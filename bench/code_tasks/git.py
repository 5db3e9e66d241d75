"""The tasks over the git server (``git``): logs, commits shown one by one, diffs, branches."""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from bench.code_tasks.fixture import Fixture, git
from bench.code_tasks.task import Calls, Reply, Task

SINCE: Final = "2026-09-05T00:00:00+00:00"
UNTIL: Final = "2026-09-14T23:59:59+00:00"


def _log(reply: Reply) -> list[tuple[str, str]]:
    """A ``git_log`` answer's (hash, author) pairs, newest first."""
    commits = [line.removeprefix("Commit: ") for line in reply.lines() if line.startswith("Commit: ")]
    authors = [line.removeprefix("Author: ") for line in reply.lines() if line.startswith("Author: ")]
    return list(zip(commits, authors, strict=True))


def _touched(text: str) -> list[str]:
    """The paths a ``git_show`` of a commit changed (its ``--- a/`` and ``+++ b/`` lines)."""
    found = {line[6:] for line in text.splitlines() if line.startswith(("--- a/", "+++ b/"))}
    return sorted(found)


async def _authors(calls: Calls, fx: Fixture) -> Any:
    log = await calls("git__git_log", {"repo_path": str(fx.repo), "max_count": 10})
    return sorted({author for _, author in _log(log)})


RECENT_AUTHORS = Task(
    name="recent_authors",
    ask="Who wrote the last 10 commits?",
    tools=("git__git_log",),
    plain=_authors,
    expected=lambda fx: sorted(set(git(fx.repo, "log", "-10", "--format=%an").split("\n")[:-1])),
    code_query="git commit log",
    program="""\
from tools import git
log = await git.git_log(repo_path="$repo", max_count=10)
sorted({line[8:] for line in log.splitlines() if line.startswith("Author: ")})
""",
)


async def _last_files(calls: Calls, fx: Fixture) -> Any:
    log = _log(await calls("git__git_log", {"repo_path": str(fx.repo), "max_count": 5}))
    shows = await calls.parallel([("git__git_show", {"repo_path": str(fx.repo), "revision": sha}) for sha, _ in log])
    return {sha[:7]: _touched(show.text) for (sha, _), show in zip(log, shows, strict=True)}


def _last_files_expected(fx: Fixture) -> Any:
    out = git(fx.repo, "log", "-5", "--format=@%H", "--name-only")
    commits: dict[str, list[str]] = {}
    files: list[str] = []
    for line in filter(None, out.splitlines()):
        if line.startswith("@"):
            files = commits.setdefault(line[1:8], [])
        else:
            files.append(line)
    return {sha: sorted(files) for sha, files in commits.items()}


LAST_FILES = Task(
    name="files_of_last_commits",
    ask="Which files did each of the last 5 commits change?",
    tools=("git__git_log", "git__git_show"),
    plain=_last_files,
    expected=_last_files_expected,
    code_query="git log and show a commit",
    program="""\
import asyncio
from tools import git
log = await git.git_log(repo_path="$repo", max_count=5)
shas = [line[8:] for line in log.splitlines() if line.startswith("Commit: ")]
shows = await asyncio.gather(*[git.git_show(repo_path="$repo", revision=sha) for sha in shas])
changed = {}
for sha, show in zip(shas, shows):
    paths = {line[6:] for line in show.splitlines() if line.startswith("--- a/") or line.startswith("+++ b/")}
    changed[sha[:7]] = sorted(paths)
changed
""",
)


async def _core(calls: Calls, fx: Fixture) -> Any:
    log = _log(await calls("git__git_log", {"repo_path": str(fx.repo), "max_count": 20}))
    shows = await calls.parallel([("git__git_show", {"repo_path": str(fx.repo), "revision": sha}) for sha, _ in log])
    authors = [author for (_, author), show in zip(log, shows, strict=True) if "src/core.py" in _touched(show.text)]
    return {"commits": len(authors), "authors": sorted(set(authors))}


def _core_expected(fx: Fixture) -> Any:
    authors = git(fx.repo, "log", "--format=%an", "--", "src/core.py").splitlines()
    return {"commits": len(authors), "authors": sorted(set(authors))}


CORE_AUTHORS = Task(
    name="who_touched_core",
    ask="Of the last 20 commits, how many changed src/core.py, and by whom?",
    tools=("git__git_log", "git__git_show"),
    plain=_core,
    expected=_core_expected,
    code_query="git log and show a commit",
    program="""\
import asyncio
from tools import git
log = await git.git_log(repo_path="$repo", max_count=20)
lines = log.splitlines()
shas = [line[8:] for line in lines if line.startswith("Commit: ")]
authors = [line[8:] for line in lines if line.startswith("Author: ")]
shows = await asyncio.gather(*[git.git_show(repo_path="$repo", revision=sha) for sha in shas])
hits = [author for author, show in zip(authors, shows) if "+++ b/src/core.py" in show or "--- a/src/core.py" in show]
{"commits": len(hits), "authors": sorted(set(hits))}
""",
)


async def _branches(calls: Calls, fx: Fixture) -> Any:
    branch, status = await calls.parallel(
        [
            ("git__git_branch", {"repo_path": str(fx.repo), "branch_type": "local"}),
            ("git__git_status", {"repo_path": str(fx.repo)}),
        ]
    )
    names = [line[2:] for line in branch.lines()]
    current = next(line[2:] for line in branch.lines() if line.startswith("* "))
    modified = [line.split()[-1] for line in status.lines() if line.strip().startswith("modified:")]
    return {"current": current, "branches": sorted(names), "modified": modified}


def _branches_expected(fx: Fixture) -> Any:
    return {
        "current": git(fx.repo, "symbolic-ref", "--short", "HEAD").strip(),
        "branches": sorted(git(fx.repo, "branch", "--format=%(refname:short)").split()),
        "modified": [line[3:] for line in git(fx.repo, "status", "--porcelain").splitlines() if line[1] == "M"],
    }


BRANCHES = Task(
    name="branches_and_status",
    ask="Which branch am I on, which local branches are there, and which files are modified?",
    tools=("git__git_branch", "git__git_status"),
    plain=_branches,
    expected=_branches_expected,
    code_query="git branches and working tree status",
    program="""\
import asyncio
from tools import git
branch, status = await asyncio.gather(
    git.git_branch(repo_path="$repo", branch_type="local"), git.git_status(repo_path="$repo")
)
names = [line[2:] for line in branch.splitlines()]
current = [line[2:] for line in branch.splitlines() if line.startswith("* ")][0]
modified = [line.split()[-1] for line in status.splitlines() if line.strip().startswith("modified:")]
{"current": current, "branches": sorted(names), "modified": modified}
""",
)


def _added(diff: str) -> int:
    return sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))


async def _since_release(calls: Calls, fx: Fixture) -> Any:
    return _added((await calls("git__git_diff", {"repo_path": str(fx.repo), "target": "release-1.0"})).text)


ADDED_LINES = Task(
    name="lines_added_since_release",
    ask="How many lines were added since the release-1.0 branch?",
    tools=("git__git_diff",),
    plain=_since_release,
    expected=lambda fx: _added(git(fx.repo, "diff", "release-1.0")),
    code_query="git diff against a branch",
    program="""\
from tools import git
diff = await git.git_diff(repo_path="$repo", target="release-1.0")
len([line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")])
""",
)


async def _readme(calls: Calls, fx: Fixture) -> Any:
    then, now = await calls.parallel(
        [("git__git_show", {"repo_path": str(fx.repo), "revision": f"{rev}:README.md"}) for rev in ("HEAD~10", "HEAD")]
    )
    return {"then": len(then.lines()), "now": len(now.lines())}


def _readme_expected(fx: Fixture) -> Any:
    lines = [len(git(fx.repo, "show", f"{rev}:README.md").splitlines()) for rev in ("HEAD~10", "HEAD")]
    return {"then": lines[0], "now": lines[1]}


README_GROWTH = Task(
    name="readme_growth",
    ask="How many lines did README.md have 10 commits ago, and now?",
    tools=("git__git_show",),
    plain=_readme,
    expected=_readme_expected,
    code_query="git show a file at a revision",
    program="""\
import asyncio
from tools import git
then, now = await asyncio.gather(
    git.git_show(repo_path="$repo", revision="HEAD~10:README.md"),
    git.git_show(repo_path="$repo", revision="HEAD:README.md"),
)
{"then": len(then.splitlines()), "now": len(now.splitlines())}
""",
)


async def _in_range(calls: Calls, fx: Fixture) -> Any:
    arguments = {"repo_path": str(fx.repo), "max_count": 50, "start_timestamp": SINCE, "end_timestamp": UNTIL}
    log = _log(await calls("git__git_log", arguments))
    return dict(sorted(Counter(author for _, author in log).items()))


def _in_range_expected(fx: Fixture) -> Any:
    authors = git(fx.repo, "log", f"--since={SINCE}", f"--until={UNTIL}", "--format=%an").splitlines()
    return dict(sorted(Counter(authors).items()))


COMMITS_IN_RANGE = Task(
    name="commits_per_author_in_range",
    ask=f"How many commits did each author make from {SINCE[:10]} to {UNTIL[:10]}?",
    tools=("git__git_log",),
    plain=_in_range,
    expected=_in_range_expected,
    code_query="git commit log between dates",
    program=f"""\
from tools import git
log = await git.git_log(repo_path="$repo", max_count=50, start_timestamp="{SINCE}", end_timestamp="{UNTIL}")
counts = {{}}
for line in log.splitlines():
    if line.startswith("Author: "):
        counts[line[8:]] = counts.get(line[8:], 0) + 1
dict(sorted(counts.items()))
""",
)

TASKS = (RECENT_AUTHORS, LAST_FILES, CORE_AUTHORS, BRANCHES, ADDED_LINES, README_GROWTH, COMMITS_IN_RANGE)

SEARCHES = {
    "git__git_log": "git commit log",
    "git__git_show": "show a git commit or a file at a revision",
    "git__git_branch": "list git branches",
    "git__git_status": "git working tree status",
    "git__git_diff": "git diff against a branch",
}
"""What a model asks ``search_tools`` for, per tool it needs (the search view's runs)."""
