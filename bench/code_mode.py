"""p10: what code mode saves, measured: the tokens that reach the model and its turns, per task (issue 58, item 7).

``python -m bench.code_mode [--emulate] [--only NAME ...] [--report PATH]`` (or ``python -m bench p10``).
No model runs here: every figure comes from a scripted sequence (``bench.code_tasks``:
30 tasks over the real filesystem, git, memory, server-everything, time and fetch
servers), run for real through ``python -m supervisor run --view NAME`` and a real
`mcp.Client` host, in three modes, each on a fresh copy of the same fixture:

* **plain** (``catalog = "all"``): the host lists every tool of the view, then makes
  the task's plain call sequence;
* **search** (``catalog = "search"``): the listing of ``search_tools`` and
  ``call_tool``, one ``search_tools`` call per distinct tool the sequence needs
  (``code_tasks.SEARCHES``: a few words each; a needed tool that is not among its
  search's answers is reported as a miss), then the same calls through ``call_tool``;
* **code** (``catalog = "code"``): the listing of ``search_tools`` and ``run_code``,
  one ``search_tools`` call (the task's ``code_query``), then one ``run_code`` call
  with the task's reference program.

**Tokens** are the project's estimate (``catalog.token_estimate``: compact JSON,
UTF-8 bytes / ``BYTES_PER_TOKEN``, rounded up): the listing as the host received
it (``estimate_tokens`` over the ``Tool`` models it parsed, for the protocol version
it negotiated: what ``tools --tokens`` counts), then per call its arguments object
and its result's ``content`` (the blocks as the host got them; the
``structuredContent`` copy a host does not also show the model is left out). Each
task is a conversation of its own, so each pays the listing once. What a model
re-reads of its context on every turn is not counted (it would favour code mode
more).

**Turns** count the model's tool-calling turns; the final answer's turn, the same
in every mode, is left out everywhere. Plain: one per call, except that calls
whose arguments need none of the others' results go out in one turn
(``Calls.parallel``). Search: one turn for all of a task's searches (the model
asks for every tool it knows it needs at once), then the plain turns. Code: two
(the search, then the run).

Answers are checked: every mode's final answer must equal the task's expected
answer, which is read from the fixture itself (files, ``git``, the memory graph's
data), never through a server.

A server named like a module the sandbox provides is ``tools.<name>_`` in a
program (``time`` is ``time_``: ``code.names``). The medians count only the tasks
answered right in every mode (a failed ``run_code`` is reported, and counts as
more than two turns).

Before the code view is on this checkout (``code_view_problem``), or with
``--emulate``, the code row is **estimated** (marked ``~``): the fixture's copy is
served by a search view, the program runs in CPython against the real tools
(``bench.code_emulator``, through ``call_tool``), and the row is the search view's
listing, the search view's answer to the ``code_query`` (JSON schemas: more than
the code view's typed signatures), the program's text and its real result as JSON
plus what it printed.

Targets (issue 58): code's median tokens <= 20% of plain's; <= 50% of search's on
tasks of 3+ calls; <= 2 turns on >= 80% of tasks. Processes: every sidecar runs
under ``harness.open_host`` (stdin closed, bounded, then its group killed), the
loopback site server under ``serving_site``; ``reap_marked`` clears what is left.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import mcp_types as types
import trio
from pydantic import ValidationError

from bench.code_emulator import functions_of, run_program, used_functions
from bench.code_report import MODES, Row, markdown, summary
from bench.code_tasks import SEARCHES, TASKS
from bench.code_tasks.fixture import Fixture, build, build_site
from bench.code_tasks.task import Reply, Task, ToolFailed, normal
from bench.code_world import START_BOUND_SEC, fill_memory, server_tables, serving_site
from bench.harness import open_host, reap_marked, sidecar_argv, write_settings
from bench.views import settled_listing
from supervisor.catalog.token_estimate import BYTES_PER_TOKEN, estimate_tokens
from supervisor.code.names import identifier
from supervisor.config.models import Settings
from tests.sidecar import Host

TASK_BOUND_SEC: Final = 90.0
POLL_SEC: Final = 0.5


def text_tokens(value: Any) -> int:
    """The estimate of ``value`` as compact JSON text (module docstring)."""
    return math.ceil(len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) / BYTES_PER_TOKEN)


def result_tokens(result: types.CallToolResult) -> int:
    return text_tokens([block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content])


def reply_of(result: types.CallToolResult) -> Reply:
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    return Reply(text, result.structured_content)


def code_view_problem() -> str | None:
    """Why this checkout cannot serve a ``catalog = "code"`` view (not built yet, or no engine), or None."""
    try:
        Settings.model_validate({"mcp_servers": {}, "views": {"code": {"catalog": "code"}}})
    except ValidationError as error:
        return " ".join(str(error.errors()[0]["msg"]).split())
    return None


class Recorder:
    """The ``Calls`` a plain sequence gets: each call through ``host`` (directly or by ``call_tool``), costed."""

    def __init__(self, host: Host, *, through_call_tool: bool) -> None:
        self._host = host
        self._wrapped = through_call_tool
        self.tokens = self.turns = self.calls = 0
        self.called: set[str] = set()

    async def _call(self, name: str, arguments: Mapping[str, Any]) -> Reply:
        sent = {"name": name, "arguments": dict(arguments)} if self._wrapped else dict(arguments)
        result = await self._host.session.call_tool("call_tool" if self._wrapped else name, sent)
        self.tokens += text_tokens(sent) + result_tokens(result)
        self.calls += 1
        self.called.add(name)
        if result.is_error:
            raise ToolFailed(f"{name} {dict(arguments)}: {reply_of(result).text[:300]}")
        return reply_of(result)

    async def __call__(self, name: str, arguments: Mapping[str, Any]) -> Reply:
        self.turns += 1
        return await self._call(name, arguments)

    async def parallel(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Reply]:
        self.turns += 1
        replies: list[Reply | None] = [None] * len(calls)

        async def one(index: int, name: str, arguments: Mapping[str, Any]) -> None:
            replies[index] = await self._call(name, arguments)

        async with trio.open_nursery() as nursery:
            for index, (name, arguments) in enumerate(calls):
                nursery.start_soon(one, index, name, arguments)
        return [reply for reply in replies if reply is not None]


# -- one mode ------------------------------------------------------------------------------------------------


async def _wait_searchable(host: Host, tools: set[str]) -> None:
    """Until ``search_tools`` finds one needed tool of each server (a server announces its tools late); bounded."""
    probes = {tool.split("__")[0]: tool for tool in sorted(tools)}
    with trio.fail_after(START_BOUND_SEC):
        for tool in probes.values():
            # Polling: a search view's hosts get no notice when a server's tools arrive (I22).
            while True:
                result = await host.session.call_tool("search_tools", {"query": SEARCHES[tool], "limit": 50})
                module, _, function = tool.partition("__")
                text = reply_of(result).text
                if tool in text or f"{identifier(module, 's')}.{identifier(function, 't')}" in text:
                    break
                await trio.sleep(POLL_SEC)


async def _check(row: Row, task: Task, fixture: Fixture, answer: Any) -> None:
    expected = await trio.to_thread.run_sync(task.expected, fixture)
    row.answer = normal(answer)
    row.correct = row.answer == normal(expected)
    if not row.correct:
        row.problems.append(f"answer {json.dumps(row.answer)[:200]} != expected {json.dumps(normal(expected))[:200]}")


async def _plain(host: Host, task: Task, fixture: Fixture, listing: int) -> Row:
    calls = Recorder(host, through_call_tool=False)
    row = Row(listing=listing)
    try:
        answer = await task.plain(calls, fixture)
    finally:
        row.tokens, row.turns, row.calls = calls.tokens, calls.turns, calls.calls
    if calls.called != set(task.tools):
        row.problems.append(f"called {sorted(calls.called)}, declared {sorted(task.tools)}")
    await _check(row, task, fixture, answer)
    return row


async def _search(host: Host, task: Task, fixture: Fixture, listing: int) -> Row:
    row = Row(listing=listing, turns=1)
    for tool in task.tools:
        arguments = {"query": SEARCHES[tool]}
        result = await host.session.call_tool("search_tools", arguments)
        row.tokens += text_tokens(arguments) + result_tokens(result)
        row.calls += 1
        if tool not in {found["name"] for found in (result.structured_content or {}).get("tools", [])}:
            row.problems.append(f"search miss: {arguments['query']!r} did not find {tool}")
    calls = Recorder(host, through_call_tool=True)
    try:
        answer = await task.plain(calls, fixture)
    finally:
        row.tokens, row.turns, row.calls = row.tokens + calls.tokens, row.turns + calls.turns, row.calls + calls.calls
    await _check(row, task, fixture, answer)
    return row


def run_value(result: types.CallToolResult, *, text: bool) -> Any:
    """What a real ``run_code`` answered the program returned: its first text block, as JSON unless ``text``.

    ``run_code`` answers a ``str`` value as it is and anything else as JSON (then a
    ``printed:`` block if the program printed), so the task's expected answer says
    which it is.
    """
    first = next((block.text for block in result.content if isinstance(block, types.TextContent)), "")
    return first if text else json.loads(first)


async def _code(
    host: Host, task: Task, fixture: Fixture, listing: int, *, argument: str, plain: list[types.Tool]
) -> Row:
    """One task's code row: real when ``argument`` names ``run_code``'s argument, else emulated (``plain``'s tools)."""
    row = Row(listing=listing, turns=2, calls=2, estimated=not argument)
    arguments = {"query": task.code_query}
    result = await host.session.call_tool("search_tools", arguments)
    row.tokens += text_tokens(arguments) + result_tokens(result)
    found, public = reply_of(result).text, functions_of(plain)
    for function in sorted(used_functions(task.program)):
        if function not in found and public.get(function, function) not in found:
            row.problems.append(f"code search miss: {task.code_query!r} did not show {function}")
    program = task.program_for(fixture.places())
    if argument:
        sent = {argument: program}
        result = await host.session.call_tool("run_code", sent)
        row.tokens += text_tokens(sent) + result_tokens(result)
        if result.is_error:
            row.problems.append(f"run_code failed: {reply_of(result).text[:300]}")
            return row
        expected = await trio.to_thread.run_sync(task.expected, fixture)
        await _check(row, task, fixture, run_value(result, text=isinstance(expected, str)))
        return row

    async def through_call_tool(name: str, args: dict[str, Any]) -> types.CallToolResult:
        return await host.session.call_tool("call_tool", {"name": name, "arguments": args})

    value, printed = await run_program(program, plain, through_call_tool)
    shown = json.dumps(value, ensure_ascii=False) + (f"\n{printed}" if printed else "")
    row.tokens += text_tokens({"code": program}) + text_tokens([{"type": "text", "text": shown}])
    await _check(row, task, fixture, value)
    return row


async def _list_all(host: Host) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        page = await host.session.list_tools(cursor=cursor, cache_mode="bypass")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


async def run_mode(
    mode: str, config: Path, view: str, fixture: Fixture, tasks: Sequence[Task], *, plain: list[types.Tool]
) -> tuple[dict[str, Row], list[types.Tool]]:
    """Every task of ``tasks`` in ``mode`` on a sidecar serving ``view``; the rows, and the listing the host got."""
    needed = {tool for task in tasks for tool in task.tools}
    rows: dict[str, Row] = {}
    async with open_host([*sidecar_argv(config), "--view", view]) as host:
        with trio.fail_after(START_BOUND_SEC):
            if mode == "plain":
                listing = await settled_listing(host, lambda tools: needed <= {tool.name for tool in tools})
            else:
                listing = await _list_all(host)
                await _wait_searchable(host, needed)
        tokens = estimate_tokens(listing, str(host.session.protocol_version))
        run_code = next((tool for tool in listing if tool.name == "run_code"), None)
        argument = next(iter((run_code.input_schema.get("required") or ["code"]) if run_code else []), "")
        for task in tasks:
            try:
                with trio.fail_after(TASK_BOUND_SEC):
                    if mode == "plain":
                        rows[task.name] = await _plain(host, task, fixture, tokens)
                    elif mode == "search":
                        rows[task.name] = await _search(host, task, fixture, tokens)
                    else:
                        rows[task.name] = await _code(host, task, fixture, tokens, argument=argument, plain=plain)
            except Exception as error:  # a task's failure is its row's problem; the others still run
                rows.setdefault(task.name, Row(listing=tokens)).problems.append(f"{type(error).__name__}: {error}")
    return rows, listing


async def _run_modes(
    tmp: Path, emulated: bool, only: Sequence[str], results: dict[str, dict[str, Row]], left_out: dict[str, str]
) -> list[Task]:
    """Each mode in turn on a fresh copy of the fixture under ``tmp``, into ``results``; the tasks of the set."""
    async with serving_site(tmp / "site") as url:
        fixture = await trio.to_thread.run_sync(build, tmp / "world", tmp / "site", url)
        tables, missing = server_tables(fixture)
        tasks = [task for task in TASKS if set(task.servers) <= set(tables) and (not only or task.name in only)]
        for name in missing:
            print(f"  {name} is not installed (tests/interop/install.sh): its tasks are left out")
        views: dict[str, dict[str, Any]] = {"plain": {"catalog": "all"}, "search": {"catalog": "search"}}
        if not emulated:
            views["code"] = {"catalog": "code"}
        config = write_settings(
            tmp / "settings.toml", tables, mcp_names=False, supervisor={"log_level": "warning"}, views=views
        )
        plain: list[types.Tool] = []
        for mode in MODES:
            fixture = await trio.to_thread.run_sync(build, fixture.base, fixture.site, url)
            if "memory" in tables:
                await fill_memory(fixture, tables["memory"])
            view = "search" if mode == "code" and emulated else mode
            ran = [task for task in tasks if mode != "code" or task.name not in left_out]
            results[mode], listing = await run_mode(mode, config, view, fixture, ran, plain=plain)
            plain = listing if mode == "plain" else plain
    return tasks


async def run(*, quick: bool = False, emulate: bool = False, only: Sequence[str] = ()) -> dict[str, Any]:
    """Every mode over the task set (module docstring); ``quick`` changes nothing (one pass is all there is)."""
    del quick
    problem = code_view_problem()
    emulated = emulate or problem is not None
    print(f"p10 code mode: {len(TASKS)} tasks, modes plain / search / code", end="")
    print(f" (code ESTIMATED: {problem or '--emulate'})" if emulated else " (code: the real run_code)")
    results: dict[str, dict[str, Row]] = {}
    left_out: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="p10-") as tmp:
        await trio.to_thread.run_sync(build_site, Path(tmp) / "site")
        try:
            tasks = await _run_modes(Path(tmp), emulated, only, results, left_out)
        finally:
            await reap_marked("p10")
    out = summary(tasks, results, emulated=emulated, left_out=left_out)
    out["markdown"] = markdown(tasks, results, out)
    print(out["markdown"])
    return {"p10": out}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.code_mode", description=__doc__.splitlines()[0])
    parser.add_argument("--emulate", action="store_true", help="estimate the code row even where a code view exists")
    parser.add_argument("--only", nargs="*", default=[], help="run only these tasks")
    parser.add_argument("--report", type=Path, help="also write the table (markdown) to this file")
    args = parser.parse_args()
    out = trio.run(lambda: run(emulate=args.emulate, only=args.only))
    if args.report is not None:
        args.report.write_text(out["p10"]["markdown"], encoding="utf-8")
    print(json.dumps({key: value for key, value in out["p10"].items() if key != "markdown"}))


if __name__ == "__main__":
    main()
