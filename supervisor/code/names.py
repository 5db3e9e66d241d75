"""Server, tool and argument names as Python identifiers: the one rule of code mode (issue 58).

A program calls ``await <module>.<function>(<argument>=...)`` after ``from
tools import <module>``. Each name comes from the catalog by the same rule:

* a **module** is a server's name; a **function** is the tool part of the
  public name the host was shown (``files__read_file`` gives ``read_file``; a
  transform's ``name`` is what the tool is called); an **argument** is a key of
  the tool's ``inputSchema`` (after its transform);
* every character outside ``[A-Za-z0-9_]`` becomes ``_``;
* a name that then starts with a digit, or with ``_`` (the sandbox hides such
  names), gets a letter in front: ``s`` for a module, ``t`` for a function,
  ``p`` for an argument (``2fa`` -> ``t2fa``, ``_x`` -> ``t_x``);
* a Python keyword gets ``_`` after it (``class`` -> ``class_``), and so does a
  module named like one the sandbox provides itself (``SANDBOX_MODULES``:
  ``time`` -> ``time_``, ``json`` -> ``json_``);
* when two names of one scope come out the same, the later ones (in catalog
  order) get ``_2``, ``_3``...

``Identifiers`` keeps one scope's names and maps each back to what it stands
for (an argument's identifier to its JSON key). Pure functions, no I/O.
"""

from __future__ import annotations

import keyword
import re
from typing import Final

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_]")
SANDBOX_MODULES: Final = frozenset(
    {
        "asyncio", "base64", "binascii", "bisect", "collections", "copy", "csv", "dataclasses", "datetime",
        "decimal", "functools", "gc", "hashlib", "itertools", "json", "math", "os", "pathlib", "posixpath",
        "random", "re", "sys", "time", "tomllib", "typing", "unicodedata",
    }
)  # fmt: skip
"""The modules pydantic-monty 1.4.0 provides (or its type checker does): a submodule of ``tools`` may not take
their names (``tests/code/test_stubs.py`` checks the set against the installed engine)."""


def identifier(name: str, lead: str) -> str:
    """``name`` as an identifier, by the module's rule; ``lead`` is the letter a bad first character gets."""
    made = _UNSAFE.sub("_", name) or lead
    if made[0].isdigit() or made[0] == "_":
        made = lead + made
    if keyword.iskeyword(made) or (lead == "s" and made in SANDBOX_MODULES):
        made += "_"
    return made


class Identifiers:
    """One scope's identifiers (a server's functions, a tool's arguments), unique, each mapped to its origin."""

    def __init__(self, lead: str) -> None:
        self._lead = lead
        self.origin: dict[str, str] = {}
        """identifier -> the name it was made of."""

    def add(self, name: str) -> str:
        """The identifier of ``name`` in this scope (``_2``, ``_3``... when an earlier name took it)."""
        base = identifier(name, self._lead)
        made, count = base, 1
        while made in self.origin:
            count += 1
            made = f"{base}_{count}"
        self.origin[made] = name
        return made
