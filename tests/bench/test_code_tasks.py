"""p10's task set is well formed, and its CPython stand-in for run_code follows code mode's API (no processes)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio

from bench.code_emulator import ToolError, functions_of, run_program, used_functions
from bench.code_report import Row, markdown, summary
from bench.code_tasks import SEARCHES, TASKS
from bench.code_tasks.fixture import ENTITIES, RELATIONS, Fixture
from bench.code_tasks.task import Task

BOUND_SEC = 10.0
SERVERS = {"files", "git", "memory", "everything", "time", "fetch"}
PLACES = Fixture(Path("/w"), Path("/s"), "http://127.0.0.1:1/").places()
ALLOWED_IMPORTS = {"tools", "asyncio", "json", "re"}
"""What a reference program may import: the tools, and the modules the sandbox offers that the set needs."""


def _tool(name: str) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object"})


def test_the_set_has_at_least_twenty_tasks_with_unique_names() -> None:
    names = [task.name for task in TASKS]
    assert len(TASKS) >= 20
    assert len(set(names)) == len(names)
    assert all(name.isidentifier() and name == name.lower() for name in names)


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.name)
def test_each_task_declares_its_servers_tools_searches_and_sequence(task: Task) -> None:
    assert task.ask and task.code_query
    assert task.tools and len(set(task.tools)) == len(task.tools)
    assert set(task.servers) <= SERVERS
    assert all(tool in SEARCHES for tool in task.tools)
    assert inspect.iscoroutinefunction(task.plain)
    assert callable(task.expected)


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.name)
def test_each_program_compiles_with_top_level_await_and_ends_with_its_result(task: Task) -> None:
    source = task.program_for(PLACES)
    compile(source, task.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    tree = ast.parse(source)
    assert isinstance(tree.body[-1], ast.Expr), "the last statement is the result"
    assert "$" not in source, "every place was filled in"
    imported = {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in ([node.module] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names])
    }
    assert imported <= ALLOWED_IMPORTS


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.name)
def test_each_program_calls_only_tools_of_its_servers_by_the_api_names(task: Task) -> None:
    known = functions_of(_tool(name) for name in SEARCHES)
    used = used_functions(task.program_for(PLACES))
    assert used, "a program calls at least one tool"
    assert used <= set(known), sorted(used - set(known))
    assert {known[function].split("__")[0] for function in used} <= set(task.servers)


def test_the_set_mixes_one_call_tasks_many_call_tasks_and_every_server() -> None:
    assert {server for task in TASKS for server in task.servers} == SERVERS
    assert sum(1 for task in TASKS if len(task.tools) >= 2) >= 10
    assert any(len(task.servers) >= 2 for task in TASKS)


def test_the_memory_graph_relates_only_entities_it_has() -> None:
    names = {entity["name"] for entity in ENTITIES}
    assert len(names) == len(ENTITIES)
    assert all(relation["from"] in names and relation["to"] in names for relation in RELATIONS)


async def test_a_program_gets_structured_content_or_text_gathers_calls_and_prints() -> None:
    listing = [
        types.Tool(name="demo__get-sum", input_schema={"type": "object", "properties": {"a": {}, "b": {}}}),
        types.Tool(
            name="demo__info",
            input_schema={"type": "object", "properties": {"class": {}}},
            output_schema={"type": "object"},
        ),
    ]
    seen: list[tuple[str, dict[str, Any]]] = []

    async def call(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        seen.append((name, arguments))
        await trio.lowlevel.checkpoint()
        if name == "demo__info":
            return types.CallToolResult(content=[], structured_content={"got": arguments["class"]})
        text = f"The sum is {arguments['a'] + arguments['b']}."
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)] * 2)

    program = """\
import asyncio
from tools import demo
sums = await asyncio.gather(demo.get_sum(a=1, b=2), demo.get_sum(a=3, b=4))
print("two sums")
{"sums": sums, "info": await demo.info(class_="x")}
"""
    with trio.fail_after(BOUND_SEC):
        value, printed = await run_program(program, listing, call)
    assert value == {"sums": ["The sum is 3.\nThe sum is 3.", "The sum is 7.\nThe sum is 7."], "info": {"got": "x"}}
    assert printed == "two sums\n"
    assert sorted(name for name, _ in seen) == ["demo__get-sum", "demo__get-sum", "demo__info"]
    assert ("demo__info", {"class": "x"}) in seen


async def test_a_tool_error_raises_in_the_program() -> None:
    async def call(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        await trio.lowlevel.checkpoint()
        return types.CallToolResult(content=[types.TextContent(type="text", text="no such file")], is_error=True)

    with trio.fail_after(BOUND_SEC), pytest.raises(ToolError, match="no such file"):
        await run_program("from tools import demo\nawait demo.echo()", [_tool("demo__echo")], call)


def test_the_summary_judges_the_targets_from_the_rows() -> None:
    tasks = TASKS[:3]
    results = {
        "plain": {t.name: Row(listing=10_000, tokens=5_000, turns=2, calls=3, correct=True) for t in tasks},
        "search": {t.name: Row(listing=200, tokens=3_000, turns=3, calls=5, correct=True) for t in tasks},
        "code": {t.name: Row(listing=200, tokens=1_000, turns=2, calls=2, correct=True) for t in tasks},
    }
    out = summary(tasks, results, emulated=False)
    assert out["median_tokens"] == {"plain": 15_000, "search": 3_200, "code": 1_200}
    assert out["median_code_over_plain"] == 0.08
    assert out["tasks_of_3_calls"] == 3
    assert out["answers_correct"] == 3
    assert set(out["targets"].values()) == {"met"}
    table = markdown(tasks, results, out)
    assert table.count("\n| ") == len(tasks) + 1  # the tasks, then the medians
    assert "MISSED" not in table
