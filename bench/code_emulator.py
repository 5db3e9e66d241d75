"""Code mode's API played in CPython, for ``bench.code_mode`` while no code view is there to run programs.

A reference program is written for ``run_code``: ``from tools import files``,
``await files.read_text_file(path=...)``, top-level await, ``asyncio.gather``, the
value of its last expression as the result. ``run_program`` runs one here, in a
worker thread with its own asyncio loop, and answers each tool call through
``call`` (an async function of the caller's trio loop, reached with
``trio.from_thread.run``): so a program's result is what the real tools return,
and ``bench.code_mode`` can cost its ``run_code`` row from the program's text and
that result before the sandbox exists. It is not the sandbox (nothing is shut in,
and CPython accepts more than pydantic-monty does): only the real ``run_code``
proves a program runs there.

The API, as code mode defines it (issue 58): a module per server, a function per
tool (the public name's tool part), keyword-only arguments named after the JSON
keys, each name by ``identifier``; a tool with an ``outputSchema`` returns its
``structuredContent``, another its text blocks joined with ``\\n``; an error
result raises ``ToolError``.

Concurrency: ``run_program`` awaits one worker thread (not abandoned on
cancel: the program's pending calls end when the caller's calls do). Each tool
call the program makes runs on the trio loop; ``asyncio.gather`` in the program
puts several in flight at once.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import inspect
import io
import types as pytypes
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

import mcp_types as types
import trio

from supervisor.code.names import identifier

RESULT_NAME: Final = "__result__"
Call = Callable[[str, dict[str, Any]], Awaitable[types.CallToolResult]]


class ToolError(Exception):
    """A tool call of a program answered with ``isError`` (its text is the message)."""


def value_of(result: types.CallToolResult, structured: bool) -> Any:
    """What a program's call returns: the structured content, or the text blocks joined; an error raises."""
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    if result.is_error:
        raise ToolError(text)
    return result.structured_content if structured else text


def _function(public: str, tool: types.Tool, call: Call, token: trio.lowlevel.TrioToken) -> Callable[..., Any]:
    properties = tool.input_schema.get("properties") or {}
    keys = {identifier(str(key), "p"): str(key) for key in properties}
    structured = bool(tool.output_schema)

    async def function(**kwargs: Any) -> Any:
        unknown = set(kwargs) - set(keys)
        if unknown:
            raise TypeError(f"{public}() got unexpected keyword arguments {sorted(unknown)}")
        arguments = {keys[name]: value for name, value in kwargs.items()}
        result = await asyncio.to_thread(lambda: trio.from_thread.run(call, public, arguments, trio_token=token))
        return value_of(result, structured)

    return function


def tools_package(listing: Iterable[types.Tool], call: Call, token: trio.lowlevel.TrioToken) -> pytypes.ModuleType:
    """The ``tools`` package a program imports from: one module per server of the ``<server>__<tool>`` names."""
    package = pytypes.ModuleType("tools")
    for tool in listing:
        server, _, name = tool.name.partition("__")
        if not name:
            continue  # not a server's tool (a view's own)
        module_name = identifier(server, "s")
        module = getattr(package, module_name, None)
        if module is None:
            module = pytypes.ModuleType(f"tools.{module_name}")
            setattr(package, module_name, module)
        setattr(module, identifier(name, "t"), _function(tool.name, tool, call, token))
    return package


def functions_of(listing: Iterable[types.Tool]) -> dict[str, str]:
    """``module.function`` -> public name, for every server tool of ``listing``."""
    found = {}
    for tool in listing:
        server, _, name = tool.name.partition("__")
        if name:
            found[f"{identifier(server, 's')}.{identifier(name, 't')}"] = tool.name
    return found


def used_functions(source: str) -> set[str]:
    """The ``module.function`` names ``source`` calls of the modules it imports from ``tools``."""
    tree = ast.parse(source, "<program>", "exec")
    modules = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "tools"
        for alias in node.names
    }
    return {
        f"{node.func.value.id}.{node.func.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in modules
    }


def compile_program(source: str) -> pytypes.CodeType:
    """``source`` compiled with top-level await, its last expression (if it ends with one) kept in ``RESULT_NAME``."""
    tree = ast.parse(source, "<program>", "exec")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        tree.body[-1] = ast.Assign(targets=[ast.Name(RESULT_NAME, ast.Store())], value=last.value)
        ast.copy_location(tree.body[-1], last)
    ast.fix_missing_locations(tree)
    code: pytypes.CodeType = compile(tree, "<program>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return code


def _in_thread(code: pytypes.CodeType, package: pytypes.ModuleType) -> tuple[Any, str]:
    printed = io.StringIO()
    real_import = builtins.__import__

    def importer(
        name: str, globals_: Mapping[str, Any] | None = None, locals_: Mapping[str, Any] | None = None,
        fromlist: tuple[str, ...] = (), level: int = 0,
    ) -> Any:  # fmt: skip
        return package if name == "tools" else real_import(name, globals_, locals_, fromlist, level)

    def show(*values: Any, sep: str | None = " ", end: str | None = "\n", **_: Any) -> None:
        printed.write((" " if sep is None else sep).join(map(str, values)) + ("\n" if end is None else end))

    scope: dict[str, Any] = {"__builtins__": {**vars(builtins), "__import__": importer, "print": show}}

    async def main() -> None:
        running = eval(code, scope)
        if inspect.iscoroutine(running):
            await running

    asyncio.run(main())
    return scope.get(RESULT_NAME), printed.getvalue()


async def run_program(source: str, listing: Iterable[types.Tool], call: Call) -> tuple[Any, str]:
    """Run ``source`` against the tools of ``listing`` (module docstring); its value and what it printed."""
    package = tools_package(listing, call, trio.lowlevel.current_trio_token())
    code = compile_program(source)
    return await trio.to_thread.run_sync(_in_thread, code, package)
