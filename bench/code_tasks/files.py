"""The tasks over the filesystem server (``files``): folders listed, files read, a few lines kept or counted."""

from __future__ import annotations

import csv
import re
from collections import Counter
from typing import Any

from bench.code_tasks.fixture import Fixture
from bench.code_tasks.task import Calls, Task, file_names, split_files

_TODO = re.compile(r"TODO\((\w+)\)")
_ERROR = re.compile(r" ERROR (E\d+) service=(\w+)")


def _lines_with(text: str, word: str) -> list[int]:
    return [number for number, line in enumerate(text.splitlines(), 1) if word in line]


# -- the docs that say "deprecated" ----------------------------------------------------------


async def _deprecated(calls: Calls, fx: Fixture) -> Any:
    names = file_names(await calls("files__list_directory", {"path": f"{fx.root}/docs"}))
    paths = [f"{fx.root}/docs/{name}" for name in names]
    texts = split_files(await calls("files__read_multiple_files", {"paths": paths}))
    return [
        f"{name}:{n}" for name, path in zip(names, paths, strict=True) for n in _lines_with(texts[path], "deprecated")
    ]


def _deprecated_expected(fx: Fixture) -> Any:
    docs = sorted((fx.root / "docs").iterdir())
    return [f"{doc.name}:{n}" for doc in docs for n in _lines_with(doc.read_text(), "deprecated")]


DEPRECATED = Task(
    name="deprecated_lines",
    ask="Which lines of the docs say 'deprecated'? File and line number.",
    tools=("files__list_directory", "files__read_multiple_files"),
    plain=_deprecated,
    expected=_deprecated_expected,
    code_query="list a folder and read a text file",
    program="""\
import asyncio
from tools import files
listing = await files.list_directory(path="$root/docs")
names = [line[7:] for line in listing["content"].splitlines() if line.startswith("[FILE] ")]
texts = await asyncio.gather(*[files.read_text_file(path="$root/docs/" + name) for name in names])
hits = []
for name, text in zip(names, texts):
    for number, line in enumerate(text["content"].splitlines(), 1):
        if "deprecated" in line:
            hits.append(f"{name}:{number}")
hits
""",
)


# -- TODOs per owner -------------------------------------------------------------------------------


async def _todos(calls: Calls, fx: Fixture) -> Any:
    paths = (await calls("files__search_files", {"path": str(fx.root), "pattern": "**/*.py"})).lines()
    text = (await calls("files__read_multiple_files", {"paths": paths})).text
    return dict(sorted(Counter(_TODO.findall(text)).items()))


def _todos_expected(fx: Fixture) -> Any:
    owners = Counter(owner for path in (fx.root / "src").glob("*.py") for owner in _TODO.findall(path.read_text()))
    return dict(sorted(owners.items()))


TODOS = Task(
    name="todo_owners",
    ask="How many TODOs does each owner have in the Python sources?",
    tools=("files__search_files", "files__read_multiple_files"),
    plain=_todos,
    expected=_todos_expected,
    code_query="find files by pattern and read several files",
    program="""\
import re
from tools import files
found = await files.search_files(path="$root", pattern="**/*.py")
text = (await files.read_multiple_files(paths=found["content"].splitlines()))["content"]
counts = {}
for owner in re.findall(r"TODO\\((\\w+)\\)", text):
    counts[owner] = counts.get(owner, 0) + 1
dict(sorted(counts.items()))
""",
)


# -- errors in the largest log ---------------------------------------------------------------------------


async def _largest(calls: Calls, fx: Fixture) -> Any:
    listing = await calls("files__list_directory_with_sizes", {"path": f"{fx.root}/logs", "sortBy": "size"})
    name = listing.lines()[0].removeprefix("[FILE] ").split()[0]
    text = (await calls("files__read_text_file", {"path": f"{fx.root}/logs/{name}"})).text
    return {"file": name, "errors": len(_lines_with(text, " ERROR "))}


def _largest_expected(fx: Fixture) -> Any:
    largest = max((fx.root / "logs").iterdir(), key=lambda path: path.stat().st_size)
    return {"file": largest.name, "errors": len(_lines_with(largest.read_text(), " ERROR "))}


LARGEST_LOG = Task(
    name="errors_in_largest_log",
    ask="How many ERROR lines does the largest log file have?",
    tools=("files__list_directory_with_sizes", "files__read_text_file"),
    plain=_largest,
    expected=_largest_expected,
    code_query="list a directory with file sizes and read a text file",
    program="""\
from tools import files
listing = await files.list_directory_with_sizes(path="$root/logs", sortBy="size")
name = listing["content"].splitlines()[0].removeprefix("[FILE] ").split()[0]
text = (await files.read_text_file(path="$root/logs/" + name))["content"]
{"file": name, "errors": len([line for line in text.splitlines() if " ERROR " in line])}
""",
)


# -- error codes per day -------------------------------------------------------------------------------------


def _codes(text: str) -> list[str]:
    return sorted({code for code, _ in _ERROR.findall(text)})


async def _codes_by_day(calls: Calls, fx: Fixture) -> Any:
    names = file_names(await calls("files__list_directory", {"path": f"{fx.root}/logs"}))
    reads = [("files__read_text_file", {"path": f"{fx.root}/logs/{name}"}) for name in names]
    texts = await calls.parallel(reads)
    return {name[4:-4]: _codes(reply.text) for name, reply in zip(names, texts, strict=True)}


def _codes_expected(fx: Fixture) -> Any:
    return {path.name[4:-4]: _codes(path.read_text()) for path in sorted((fx.root / "logs").iterdir())}


CODES_BY_DAY = Task(
    name="error_codes_by_day",
    ask="Which error codes appear in each day's log?",
    tools=("files__list_directory", "files__read_text_file"),
    plain=_codes_by_day,
    expected=_codes_expected,
    code_query="list a directory and read text files",
    program="""\
import asyncio
import re
from tools import files
listing = await files.list_directory(path="$root/logs")
names = [line[7:] for line in listing["content"].splitlines() if line.startswith("[FILE] ")]
texts = await asyncio.gather(*[files.read_text_file(path="$root/logs/" + name) for name in names])
{name[4:-4]: sorted(set(re.findall(r" ERROR (E\\d+) ", text["content"]))) for name, text in zip(names, texts)}
""",
)


# -- one read: sales per region ----------------------------------------------------


def _sales(text: str) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for row in csv.DictReader(text.splitlines()):
        totals[row["region"]] += int(row["amount"])
    return dict(sorted(totals.items()))


async def _sales_plain(calls: Calls, fx: Fixture) -> Any:
    return _sales((await calls("files__read_text_file", {"path": f"{fx.root}/data/sales.csv"})).text)


SALES = Task(
    name="sales_by_region",
    ask="What is the total sales amount per region in data/sales.csv?",
    tools=("files__read_text_file",),
    plain=_sales_plain,
    expected=lambda fx: _sales((fx.root / "data" / "sales.csv").read_text()),
    code_query="read a text file",
    program="""\
from tools import files
text = (await files.read_text_file(path="$root/data/sales.csv"))["content"]
totals = {}
for line in text.splitlines()[1:]:
    date, region, product, units, amount = line.split(",")
    totals[region] = totals.get(region, 0) + int(amount)
dict(sorted(totals.items()))
""",
)


# -- the tree by extension -------------------------------------------------------------------------------------


def _extensions(tree: list[dict[str, Any]], into: Counter[str]) -> Counter[str]:
    for node in tree:
        if node["type"] == "directory":
            _extensions(node.get("children", []), into)
        else:
            into[node["name"].rsplit(".", 1)[-1]] += 1
    return into


async def _tree(calls: Calls, fx: Fixture) -> Any:
    tree = (await calls("files__directory_tree", {"path": str(fx.root)})).json()
    return dict(sorted(_extensions(tree, Counter()).items()))


def _tree_expected(fx: Fixture) -> Any:
    found = Counter(path.name.rsplit(".", 1)[-1] for path in fx.root.rglob("*") if path.is_file())
    return dict(sorted(found.items()))


EXTENSIONS = Task(
    name="files_by_extension",
    ask="How many files of each extension are there, in every folder?",
    tools=("files__directory_tree",),
    plain=_tree,
    expected=_tree_expected,
    code_query="recursive directory tree",
    program="""\
import json
from tools import files
tree = json.loads((await files.directory_tree(path="$root"))["content"])
counts = {}
pending = list(tree)
while pending:
    node = pending.pop()
    if node["type"] == "directory":
        pending.extend(node.get("children", []))
    else:
        extension = node["name"].rsplit(".", 1)[-1]
        counts[extension] = counts.get(extension, 0) + 1
dict(sorted(counts.items()))
""",
)


# -- sizes and titles: one call per file ------------------------------------------------------------------------


def _size(text: str) -> int:
    return next(int(line.split(": ")[1]) for line in text.splitlines() if line.startswith("size: "))


async def _sizes(calls: Calls, fx: Fixture) -> Any:
    names = file_names(await calls("files__list_directory", {"path": f"{fx.root}/data"}))
    infos = await calls.parallel([("files__get_file_info", {"path": f"{fx.root}/data/{name}"}) for name in names])
    return sum(_size(info.text) for info in infos)


DATA_SIZE = Task(
    name="data_folder_bytes",
    ask="How many bytes do the files in data/ take together?",
    tools=("files__list_directory", "files__get_file_info"),
    plain=_sizes,
    expected=lambda fx: sum(path.stat().st_size for path in (fx.root / "data").iterdir()),
    code_query="list a directory and get file info size",
    program="""\
import asyncio
from tools import files
listing = await files.list_directory(path="$root/data")
names = [line[7:] for line in listing["content"].splitlines() if line.startswith("[FILE] ")]
infos = await asyncio.gather(*[files.get_file_info(path="$root/data/" + name) for name in names])
total = 0
for info in infos:
    for line in info["content"].splitlines():
        if line.startswith("size: "):
            total += int(line[6:])
total
""",
)


async def _titles(calls: Calls, fx: Fixture) -> Any:
    names = file_names(await calls("files__list_directory", {"path": f"{fx.root}/docs"}))
    heads = await calls.parallel(
        [("files__read_text_file", {"path": f"{fx.root}/docs/{name}", "head": 1}) for name in names]
    )
    return {name: head.text.removeprefix("# ") for name, head in zip(names, heads, strict=True)}


def _titles_expected(fx: Fixture) -> Any:
    docs = sorted((fx.root / "docs").iterdir())
    return {doc.name: doc.read_text().splitlines()[0].removeprefix("# ") for doc in docs}


TITLES = Task(
    name="doc_titles",
    ask="What is the title of each doc?",
    tools=("files__list_directory", "files__read_text_file"),
    plain=_titles,
    expected=_titles_expected,
    code_query="list a directory and read the first lines of files",
    program="""\
import asyncio
from tools import files
listing = await files.list_directory(path="$root/docs")
names = [line[7:] for line in listing["content"].splitlines() if line.startswith("[FILE] ")]
heads = await asyncio.gather(*[files.read_text_file(path="$root/docs/" + name, head=1) for name in names])
{name: head["content"].removeprefix("# ") for name, head in zip(names, heads)}
""",
)


# -- a note written from every log ----------------------------------------------------------------------------


def _per_service(text: str) -> dict[str, int]:
    return dict(sorted(Counter(service for _, service in _ERROR.findall(text)).items()))


async def _note(calls: Calls, fx: Fixture) -> Any:
    names = file_names(await calls("files__list_directory", {"path": f"{fx.root}/logs"}))
    text = (await calls("files__read_multiple_files", {"paths": [f"{fx.root}/logs/{name}" for name in names]})).text
    counts = _per_service(text)
    note = "".join(f"{service}: {count}\n" for service, count in counts.items())
    await calls("files__write_file", {"path": f"{fx.root}/notes/errors.txt", "content": note})
    return counts


def _note_expected(fx: Fixture) -> Any:
    return _per_service("".join(path.read_text() for path in (fx.root / "logs").iterdir()))


ERRORS_NOTE = Task(
    name="errors_note",
    ask="Count the ERROR lines per service over all logs and write the counts to notes/errors.txt.",
    tools=("files__list_directory", "files__read_multiple_files", "files__write_file"),
    plain=_note,
    expected=_note_expected,
    code_query="list a directory, read several files, write a file",
    program="""\
import re
from tools import files
listing = await files.list_directory(path="$root/logs")
paths = ["$root/logs/" + line[7:] for line in listing["content"].splitlines() if line.startswith("[FILE] ")]
text = (await files.read_multiple_files(paths=paths))["content"]
counts = {}
for service in re.findall(r" ERROR E\\d+ service=(\\w+)", text):
    counts[service] = counts.get(service, 0) + 1
counts = dict(sorted(counts.items()))
note = "".join(f"{service}: {count}\\n" for service, count in counts.items())
await files.write_file(path="$root/notes/errors.txt", content=note)
counts
""",
)


TASKS = (
    DEPRECATED,
    TODOS,
    LARGEST_LOG,
    CODES_BY_DAY,
    SALES,
    EXTENSIONS,
    DATA_SIZE,
    TITLES,
    ERRORS_NOTE,
)

SEARCHES = {
    "files__list_directory": "list the files in a folder",
    "files__list_directory_with_sizes": "list a folder's files with their sizes",
    "files__read_multiple_files": "read several files at once",
    "files__read_text_file": "read a text file",
    "files__search_files": "find files matching a glob pattern",
    "files__directory_tree": "recursive tree of a folder",
    "files__get_file_info": "file size and metadata",
    "files__write_file": "write a file",
}
"""What a model asks ``search_tools`` for, per tool it needs (the search view's runs)."""
