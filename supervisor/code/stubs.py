"""Each tool of a view as a typed async function: its ``.pyi`` stub and its one-line signature (issue 58).

A tool's ``inputSchema`` becomes keyword-only parameters (a tool takes named
arguments): the required ones first, the others with their schema's default
when it is a plain JSON value, else ``= ...``, which a stub reads as "may be
left out" (a program that leaves it out sends nothing for it). A schema that
names no property and does not forbid others (``{"type": "object"}``) takes
any keyword arguments (``**arguments: Any``), sent under their own names. Its
``outputSchema`` becomes a ``TypedDict`` the function returns (the call's
``structuredContent``); without one the function returns ``str`` (the call's
text). Types, from JSON Schema:

| schema | type |
|---|---|
| ``string``, ``integer``, ``number``, ``boolean``, ``null`` | ``str``, ``int``, ``float``, ``bool``, ``None`` |
| ``enum``, ``const`` of plain values | ``Literal[...]`` |
| ``array`` of X | ``list[X]`` |
| ``object`` with ``properties`` | a ``TypedDict`` (``NotRequired`` for keys not required) |
| ``object`` with ``additionalProperties`` X only | ``dict[str, X]`` |
| ``anyOf`` / ``oneOf`` / a list of types | ``A \\| B`` |
| a local ``$ref`` (``#/$defs/...``, ``#/definitions/...``) | what it names |
| anything else, or deeper than ``MAX_DEPTH`` | ``Any`` |

``ServerStubs`` is one server's module: its ``.pyi`` source (docstrings with
each argument's description), and per function the ``ToolStub`` the engine and
``search_tools`` need (the one-line signature, the argument names back to
their JSON keys, whether it returns structured content).

Pure functions, no I/O; a stub is made once per view generation.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from supervisor.code.names import Identifiers

MAX_DEPTH: Final = 6
"""Schemas nest deeper than this (or refer to themselves) only as ``Any``."""
_SCALARS: Final = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
_HEADER: Final = "from typing import Any, Literal, NotRequired, TypedDict\n"
_DESCRIPTION_CHARS: Final = 300
"""A stub's docstring keeps this much of a tool's description (the full text is in its schema)."""


@dataclass(frozen=True, slots=True)
class ToolStub:
    """One tool as a program calls it."""

    module: str
    function: str
    public_name: str
    """The name the host was shown (what the pipeline routes)."""
    signature: str
    """``module.function(*, a: str, b: int = ...) -> str``: the one line ``search_tools`` gives."""
    summary: str
    """The description's first line."""
    arguments: Mapping[str, str]
    """argument identifier -> its JSON key."""
    structured: bool
    """Whether the function returns the call's ``structuredContent`` (it declares an ``outputSchema``)."""
    source: str
    """Its function in the module's stub, with its docstring (the ``TypedDict``s it names are the module's)."""


@dataclass(frozen=True, slots=True)
class ServerStubs:
    """One server's module of the program's ``tools`` package."""

    module: str
    source: str
    """The ``.pyi`` text."""
    tools: Mapping[str, ToolStub]
    """function identifier -> its stub."""


@dataclass
class _Types:
    """The ``TypedDict``s one module's annotations made, by name, and their definitions in order."""

    names: set[str] = field(default_factory=set)
    definitions: list[str] = field(default_factory=list)

    def unique(self, name: str) -> str:
        made, count = name, 1
        while made in self.names:
            count += 1
            made = f"{name}{count}"
        self.names.add(made)
        return made


def _camel(identifier: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in identifier.split("_") if part) or "Value"


def _literal(value: object) -> str | None:
    """A ``Literal`` member for a plain JSON value, or None."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int | str):
        return repr(value)
    return None


class _Annotator:
    """JSON Schema to annotations, within one root schema (its ``$defs``) and one module's ``TypedDict``s."""

    def __init__(self, root: Mapping[str, Any], types: _Types, compact: bool) -> None:
        self._root = root
        self._types = types
        self._compact = compact
        """Inline objects as ``{key: type}`` (a signature line) instead of naming a ``TypedDict``."""

    def __call__(self, schema: object, hint: str, depth: int = 0) -> str:
        if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
            return "Any"
        if "$ref" in schema:
            return self(self._resolve(schema["$ref"]), hint, depth + 1)
        for key in ("enum", "const"):
            if key in schema:
                values = schema[key] if key == "enum" else [schema[key]]
                members = [_literal(v) for v in values] if isinstance(values, list) else [None]
                if members and None not in members:
                    return f"Literal[{', '.join(m for m in members if m is not None)}]"
                return "Any"
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                return self._union(self(part, hint, depth + 1) for part in schema[key])
        if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
            return self(schema["allOf"][0], hint, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            return self._union(self({**schema, "type": k}, hint, depth) for k in kind)
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "array":
            items = schema.get("items")
            return f"list[{self(items, hint + 'Item', depth + 1) if isinstance(items, Mapping) else 'Any'}]"
        if kind == "object" or "properties" in schema:
            return self._object(schema, hint, depth)
        return "Any"

    def _union(self, parts: Iterable[str]) -> str:
        unique = list(dict.fromkeys(parts))
        return "Any" if "Any" in unique else " | ".join(unique)

    def _resolve(self, reference: object) -> object:
        if not isinstance(reference, str):
            return None
        match = re.fullmatch(r"#/(\$defs|definitions)/([^/]+)", reference)
        if match is None:
            return None
        defs = self._root.get(match.group(1))
        return defs.get(match.group(2)) if isinstance(defs, Mapping) else None

    def _object(self, schema: Mapping[str, Any], hint: str, depth: int) -> str:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            extra = schema.get("additionalProperties")
            value = self(extra, hint + "Value", depth + 1) if isinstance(extra, Mapping) else "Any"
            return f"dict[str, {value}]"
        required = set(schema.get("required") or ())
        fields = []
        for key, sub in properties.items():
            annotation = self(sub, hint + _camel(str(key)), depth + 1)
            fields.append((str(key), annotation, key in required))
        if self._compact:
            return "{" + ", ".join(f"{k}{'' if r else '?'}: {a}" for k, a, r in fields) + "}"
        name = self._types.unique(hint)
        if all(key.isidentifier() and not keyword.iskeyword(key) for key, _, _ in fields):
            lines = [f"class {name}(TypedDict):"]
            lines += [f"    {k}: {a if r else f'NotRequired[{a}]'}" for k, a, r in fields]
        else:  # a key the class syntax cannot spell ("from", "a-b"): the functional form takes any string
            items = ", ".join(f"{k!r}: {a if r else f'NotRequired[{a}]'}" for k, a, r in fields)
            lines = [f"{name} = TypedDict({name!r}, {{{items}}})"]
        self._types.definitions.append("\n".join(lines) + "\n")
        return name


def _default(schema: object) -> str:
    """What a parameter that may be left out shows: its default when it is a plain value, else ``...``."""
    if isinstance(schema, Mapping) and "default" in schema:
        value = schema["default"]
        if isinstance(value, bool | int | float | str) or value is None:
            text = repr(value)
            if len(text) <= 40:
                return text
    return "..."


def _description(text: object) -> str:
    return " ".join(text.split()) if isinstance(text, str) else ""


def _docstring(summary: str, rows: list[tuple[str, str]]) -> str:
    lines = [summary or "(no description)"]
    described = [(name, text) for name, text in rows if text]
    if described:
        lines += ["", "Args:"] + [f"    {name}: {text}" for name, text in described]
    body = "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    indented = "\n".join(f"    {line}" if line else "" for line in body.split("\n"))
    return '    """' + indented.removeprefix("    ") + '\n    """'


@dataclass(frozen=True, slots=True)
class ToolEntry:
    """What a stub is made of: a tool of the view as the host was shown it."""

    public_name: str
    tool_name: str
    """The tool part of the public name (the function is made of it)."""
    description: str | None
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None


def tool_stub(module: str, function: str, entry: ToolEntry, types: _Types | None = None) -> ToolStub:
    """One tool's stub and signature (module docstring)."""
    types = types if types is not None else _Types()
    input_schema, output_schema = entry.input_schema, entry.output_schema
    full = _Annotator(input_schema, types, compact=False)
    inline = _Annotator(input_schema, types, compact=True)
    properties = input_schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = [k for k in (input_schema.get("required") or ()) if k in properties]
    order = [*required, *(k for k in properties if k not in required)]
    names = Identifiers("p")
    params: list[str] = []
    short: list[str] = []
    docs: list[tuple[str, str]] = []
    for key in order:
        sub = properties[key]
        name = names.add(str(key))
        hint = _camel(function) + _camel(name)
        tail = "" if key in required else f" = {_default(sub)}"
        params.append(f"{name}: {full(sub, hint)}{tail}")
        short.append(f"{name}: {inline(sub, hint)}{tail}")
        docs.append((name, _description(sub.get("description")) if isinstance(sub, Mapping) else ""))
    star = "*, " if params else ""
    if not properties and input_schema.get("additionalProperties") is not False:  # it names none: it takes any
        params.append("**arguments: Any")
        short.append("**arguments: Any")
    structured = isinstance(output_schema, Mapping) and bool(output_schema)
    if structured:
        assert output_schema is not None
        returns = _Annotator(output_schema, types, compact=False)(output_schema, _camel(function) + "Result")
        returns_short = _Annotator(output_schema, types, compact=True)(output_schema, "")
    else:
        returns = returns_short = "str"
    summary = _description(entry.description)[:_DESCRIPTION_CHARS]
    first = summary.split(". ")[0].rstrip(".") if summary else ""
    source = f"async def {function}({star}{', '.join(params)}) -> {returns}:\n{_docstring(summary, docs)}\n"
    signature = f"{module}.{function}({star}{', '.join(short)}) -> {returns_short}"
    return ToolStub(module, function, entry.public_name, signature, first, dict(names.origin), structured, source)


def server_stubs(module: str, entries: Iterable[ToolEntry]) -> ServerStubs:
    """One server's module: every tool of it the view has, in catalog order."""
    types = _Types()
    functions = Identifiers("t")
    tools: dict[str, ToolStub] = {}
    for entry in entries:
        function = functions.add(entry.tool_name)
        types.names.add(function)
        tools[function] = tool_stub(module, function, entry, types)
    # TypedDicts first (a function's return names one), then the functions.
    source = _HEADER + "\n" + "\n".join([*types.definitions, *(stub.source for stub in tools.values())])
    return ServerStubs(module, source, tools)


def _defined_type(block: str) -> str | None:
    """The ``TypedDict`` a block of a module's stub defines (either syntax), or None."""
    if block.startswith("class "):
        return block[6:].split("(", maxsplit=1)[0]
    head = block.split(" = TypedDict(", 1)
    return head[0] if len(head) == 2 and head[0].isidentifier() else None


def detail(stub: ToolStub, stubs: ServerStubs) -> str:
    """``search_tools(detail=true)``: the tool's full stub, after the ``TypedDict``s it needs (theirs too)."""
    classes = {name: block for block in stubs.source.split("\n\n") if (name := _defined_type(block)) is not None}
    needed: list[str] = []
    pending = [stub.source]
    while pending:
        for name in re.findall(r"\b[A-Z][A-Za-z0-9]*\b", pending.pop()):
            if name in classes and name not in needed:
                needed.append(name)
                pending.append(classes[name])
    return f"# from tools import {stub.module}\n" + "\n".join([*(classes[n] for n in reversed(needed)), stub.source])
