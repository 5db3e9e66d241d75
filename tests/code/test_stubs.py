"""Code mode's API (issue 58): names as identifiers, schemas as typed stubs, a view's modules, values as JSON.

Pure functions (``code.names``, ``code.stubs``, ``code.api``, ``code.values``); that
the stubs type-check a program in the sandbox is ``test_engine.py``'s.
"""

from __future__ import annotations

import ast
import datetime
import json
from typing import Any, Final

import pytest

from supervisor.code.api import ViewApi
from supervisor.code.names import SANDBOX_MODULES, Identifiers, identifier
from supervisor.code.stubs import ToolEntry, detail, server_stubs, tool_stub
from supervisor.code.values import encode, plain

READ: Final = ToolEntry(
    "files__read",
    "read",
    "Read a file. It may be long.",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Where the file is"},
            "head": {"type": "integer", "default": 10},
            "mode": {"enum": ["text", "bytes"]},
            "options": {"type": "object", "properties": {"strict": {"type": "boolean"}}, "required": ["strict"]},
            "class": {"type": "string"},
            "2fa": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "ref": {"$ref": "#/$defs/Size"},
        },
        "required": ["path"],
        "$defs": {"Size": {"type": "number"}},
    },
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


@pytest.mark.parametrize(
    ("name", "lead", "made"),
    [("read_file", "t", "read_file"), ("read-file.v2", "t", "read_file_v2"), ("2fa", "p", "p2fa"),
     ("_private", "s", "s_private"), ("class", "p", "class_"), ("", "t", "t"), ("ünïcode", "t", "t_n_code")],
)  # fmt: skip
def test_a_name_becomes_an_identifier_by_one_rule(name: str, lead: str, made: str) -> None:
    assert identifier(name, lead) == made


def test_names_of_one_scope_that_come_out_the_same_get_numbered_in_order() -> None:
    scope = Identifiers("t")
    assert [scope.add(n) for n in ("a-b", "a_b", "a.b", "c")] == ["a_b", "a_b_2", "a_b_3", "c"]
    assert scope.origin == {"a_b": "a-b", "a_b_2": "a_b", "a_b_3": "a.b", "c": "c"}


def test_a_tools_schemas_become_keyword_only_typed_parameters_and_a_typeddict_result() -> None:
    stubs = server_stubs("files", [READ])
    ast.parse(stubs.source)  # a .pyi the checker reads
    stub = stubs.tools["read"]
    assert stub.signature == (
        "files.read(*, path: str, head: int = 10, mode: Literal['text', 'bytes'] = ..., options: {strict: bool} = ..., "
        "class_: str = ..., p2fa: str = ..., tags: list[str] = ..., either: str | None = ..., ref: float = ...) "
        "-> {text: str}"
    )
    assert "class ReadOptions(TypedDict):\n    strict: bool" in stubs.source
    assert "class ReadResult(TypedDict):\n    text: str" in stubs.source
    assert "path: Where the file is" in stubs.source, "each argument's description is in the docstring"
    assert stub.arguments["class_"] == "class" and stub.arguments["p2fa"] == "2fa", "identifiers map back to keys"
    assert stub.structured and stub.summary == "Read a file"


def test_a_tool_without_an_output_schema_returns_text_and_odd_schemas_are_any() -> None:
    entry = ToolEntry("x__t", "t", None, {"type": "object", "properties": {"a": {"not": {}}, "b": True}}, None)
    stub = tool_stub("x", "t", entry)
    assert stub.signature == "x.t(*, a: Any = ..., b: Any = ...) -> str"
    assert not stub.structured
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(10):
        deep = {"type": "array", "items": deep}
    assert "Any" in tool_stub("x", "t", ToolEntry("x__t", "t", "", {"properties": {"d": deep}}, None)).signature
    loop = {"properties": {"n": {"$ref": "#"}}, "type": "object"}
    ast.parse(tool_stub("x", "t", ToolEntry("x__t", "t", "", loop, None)).source)  # a self-reference ends in Any


@pytest.mark.parametrize(
    ("schema", "signature"),
    [({"type": "object"}, "x.t(**arguments: Any) -> str"), ({}, "x.t(**arguments: Any) -> str"),
     ({"type": "object", "additionalProperties": False}, "x.t() -> str")],
)  # fmt: skip
def test_a_schema_that_names_no_argument_takes_any_unless_it_forbids_them(
    schema: dict[str, Any], signature: str
) -> None:
    stub = tool_stub("x", "t", ToolEntry("x__t", "t", None, schema, None))
    assert stub.signature == signature
    ast.parse(stub.source)


def test_detail_gives_the_full_stub_after_the_types_it_names() -> None:
    stubs = server_stubs("files", [READ])
    text = detail(stubs.tools["read"], stubs)
    assert text.startswith("# from tools import files\n")
    assert text.index("class ReadOptions") < text.index("async def read(")
    assert text.index("class ReadResult") < text.index("async def read(")


def test_a_views_api_has_a_module_per_server_and_maps_calls_back_to_public_names() -> None:
    echo = ToolEntry("my-demo__echo", "echo", "Echo it.", {"properties": {"text": {"type": "string"}}}, None)
    api = ViewApi.of([("files", [READ]), ("my-demo", [echo])])
    assert list(api.modules) == ["files", "my_demo"]
    assert api.by_call["tools.my_demo.echo"].public_name == "my-demo__echo"
    assert api.signatures(["my-demo__echo", "gone"]) == "my_demo.echo(*, text: str = ...) -> str\n    Echo it"
    assert "async def echo" in api.details(["my-demo__echo"])


def test_values_the_sandbox_makes_become_json() -> None:
    class Proxy:  # what MontyClassProxy looks like to us
        name = "Point"
        attributes = {"x": 1, "y": (2, 3)}

    value = {
        "tuple": (1, 2), "set": {3}, "bytes": b"hi", "binary": b"\xff", "nan": float("nan"),
        "inf": float("-inf"), "date": datetime.date(2026, 12, 7), "delta": datetime.timedelta(seconds=90),
        1: "int key", "point": Proxy(),
    }  # fmt: skip
    assert plain(value) == {
        "tuple": [1, 2], "set": [3], "bytes": "hi", "binary": "base64:/w==", "nan": "NaN", "inf": "-Infinity",
        "date": "2026-12-07", "delta": 90.0, "1": "int key", "point": {"x": 1, "y": [2, 3]},
    }  # fmt: skip
    json.dumps(plain(value), allow_nan=False)


def test_a_result_is_text_as_it_is_or_json_cut_at_the_limit_with_a_note() -> None:
    assert encode("line one\nline two", 1024).text == "line one\nline two"
    assert encode({"a": [1]}, 1024).text == '{"a": [1]}'
    big = encode("é" * 100_000, 1024)
    assert big.cut and big.size == 200_000
    kept, note = big.text.split("\n[", 1)
    assert len(kept.encode()) <= 1024 and "cut at 1,024 of 200,000 bytes by max_result_bytes" in note


def test_keys_the_class_syntax_cannot_spell_take_the_functional_typeddict() -> None:
    relation = {
        "type": "object",
        "properties": {"from": {"type": "string"}, "to": {"type": "string"}, "kind-of": {"type": "string"}},
        "required": ["from"],
    }
    entry = ToolEntry("memory__read", "read", "Read.", {"type": "object"}, {"type": "object", "properties": {
        "relations": {"type": "array", "items": relation}}})  # fmt: skip
    stubs = server_stubs("memory", [entry])
    ast.parse(stubs.source)
    assert (
        "ReadResultRelationsItem = TypedDict('ReadResultRelationsItem', "
        "{'from': str, 'to': NotRequired[str], 'kind-of': NotRequired[str]})" in stubs.source
    )
    assert "ReadResultRelationsItem = TypedDict(" in detail(stubs.tools["read"], stubs)


def test_a_server_named_like_a_module_the_sandbox_provides_gets_an_underscore() -> None:
    api = ViewApi.of([("time", []), ("json", []), ("files", [])])
    assert list(api.modules) == ["time_", "json_", "files"]
    assert api.servers["time_"] == "time"
    assert identifier("time", "t") == "time", "only a module's name is checked against the sandbox's"


def test_the_sandboxs_own_modules_are_those_the_installed_engine_refuses() -> None:
    """``SANDBOX_MODULES`` against pydantic-monty itself (building a module starts no process)."""
    import sys  # noqa: PLC0415

    import pydantic_monty as pm  # noqa: PLC0415

    refused = set()
    for name in sorted(sys.stdlib_module_names):
        try:
            pm.ExternalModule({name: pm.ExternalModule({"f": len}, stubs="async def f() -> int: ...")}, stubs="")
        except ValueError:
            refused.add(name)
    assert refused == SANDBOX_MODULES
