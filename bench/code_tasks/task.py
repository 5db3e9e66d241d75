"""One code-mode task: what it asks, its plain call sequence, its answer and its reference program.

A task's ``plain`` sequence is what a model without code mode would do: an async
function over a ``Calls`` callback, so it really runs (``bench.code_mode`` gives it
the sidecar's direct calls, or the same calls through a search view's
``call_tool``), later arguments made from earlier results. ``await calls(name,
arguments)`` is one call and one model turn; ``await calls.parallel([...])`` is
several calls the model makes in one turn (their arguments need none of the
others' results). A call whose result is an error raises ``ToolFailed``: a
sequence that meets one is wrong.

``expected`` reads the fixture directly (files, ``git``, the memory graph's data),
never through a server, so a sequence or a program is checked against the world,
not against itself. Answers are JSON values (compared after a JSON round trip).

``program`` is the reference program in code mode's API (``from tools import
files``, ``await files.read_text_file(path=...)``, top-level await, the last
expression is the result) with ``$root``, ``$repo`` and ``$site`` for the
fixture's places (``string.Template``). ``code_query`` is the one ``search_tools``
query code mode makes before it writes the program.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from string import Template
from typing import Any, Protocol

from bench.code_tasks.fixture import Fixture


class ToolFailed(Exception):
    """A call of a plain sequence answered with ``isError``."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A tool's result as a sequence reads it: the text blocks joined with newlines, and any structured content."""

    text: str
    structured: dict[str, Any] | None = None

    def lines(self) -> list[str]:
        return self.text.splitlines()

    def json(self) -> Any:
        return json.loads(self.text)


class Calls(Protocol):
    """How a plain sequence calls tools (module docstring: one turn per ``__call__`` or ``parallel``)."""

    async def __call__(self, name: str, arguments: Mapping[str, Any]) -> Reply: ...

    async def parallel(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Reply]: ...


Plain = Callable[[Calls, Fixture], Awaitable[Any]]
Expected = Callable[[Fixture], Any]


@dataclass(frozen=True, slots=True)
class Task:
    """One task of the set (module docstring)."""

    name: str
    ask: str
    """What the user asked, in one line."""
    tools: tuple[str, ...]
    """The public names the plain sequence calls, each once here, in the order it needs them."""
    plain: Plain
    expected: Expected
    program: str
    code_query: str

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(tool.split("__", 1)[0] for tool in self.tools))

    def program_for(self, places: Mapping[str, str]) -> str:
        """The program with the fixture's places in (``Fixture.places``)."""
        return Template(self.program).substitute(places)


def normal(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples become lists, keys strings): how answers are compared."""
    return json.loads(json.dumps(value))


def file_names(reply: Reply) -> list[str]:
    """The files of a ``list_directory`` answer (``[FILE] name`` lines)."""
    return [line.removeprefix("[FILE] ") for line in reply.lines() if line.startswith("[FILE] ")]


def split_files(reply: Reply) -> dict[str, str]:
    """A ``read_multiple_files`` answer (``path:\\ntext`` parts joined by ``\\n---\\n``), path -> text."""
    parts = {}
    for part in reply.text.split("\n---\n"):
        path, _, text = part.partition(":\n")
        parts[path] = text
    return parts
