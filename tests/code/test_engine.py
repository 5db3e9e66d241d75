"""The sandbox (``code.engine``, issue 58): a program's value, its calls, its limits and the escape set.

Real ``monty`` worker processes (the ``code`` extra), with the tools answered by
a fake ``CallTool`` in this process: what the sidecar's pipeline does with a
call is ``tests/host/test_code_mode.py``'s and the e2e tests'. Each escape is
refused with an error that names the limit or the capability, the sandbox
serves the next run, and no worker outlives the pool (``_workers``). A
cancelled run returns only once its turn's thread has (``trio.to_thread`` is
never abandoned), so returning at all is the proof no thread was left behind.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from supervisor.code.engine import RunFailed, RunResult, Sandbox, ToolError, tools_module
from supervisor.code.stubs import ToolEntry, server_stubs
from supervisor.config.code import CodeLimits
from tests.sidecar import scaled, wait_until

pytestmark = pytest.mark.e2e  # every run starts a monty worker process

BOUND_SEC: Final = scaled(20)
_TEXT: Final = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
TOOLS: Final = tools_module(
    {
        "demo": server_stubs(
            "demo",
            [
                ToolEntry("demo__echo", "echo", "Echo the text back.", _TEXT, None),
                ToolEntry(
                    "demo__slow",
                    "slow",
                    "Sleep, then answer.",
                    {"type": "object", "properties": {"sec": {"type": "number"}}, "required": ["sec"]},
                    None,
                ),
                ToolEntry("demo__fail", "fail", "Always fails.", {"type": "object", "properties": {}}, None),
                ToolEntry(
                    "demo__add",
                    "add",
                    "Add two numbers.",
                    {
                        "type": "object",
                        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                        "required": ["a", "b"],
                    },
                    {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]},
                ),
            ],
        )
    }
)


class FakeTools:
    """The tools' side of a run: answers, counts calls, and records what was in flight."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.cancelled = 0
        self.finished = 0
        self.echoed = trio.Event()

    async def __call__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.calls.append((name, kwargs))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            match name:
                case "tools.demo.echo":
                    self.echoed.set()
                    await trio.lowlevel.checkpoint()
                    return kwargs.get("text")
                case "tools.demo.slow":
                    await trio.sleep(kwargs["sec"])
                    return "slept"
                case "tools.demo.add":
                    return {"sum": kwargs["a"] + kwargs["b"]}
                case _:
                    raise ToolError("demo.fail: the server said no")
        except trio.Cancelled:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
            self.finished += 1


def _workers() -> set[int]:
    """This process's monty worker children."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        state = stat.rsplit(")", 1)[1].split()[0]
        if parent == os.getpid() and b"monty" in cmdline and state != "Z":
            found.add(int(entry.name))
    return found


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    box = Sandbox(max_workers=2)
    async with trio.open_nursery() as nursery:
        await nursery.start(box.serve)
        yield box
        nursery.cancel_scope.cancel()
    assert not _workers(), "closing the sandbox leaves no worker process"


def limits(**changed: Any) -> CodeLimits:
    return CodeLimits().model_copy(update=changed)


async def run(box: Sandbox, source: str, tools: FakeTools | None = None, **changed: Any) -> RunResult:
    with trio.fail_after(BOUND_SEC):
        return await box.execute(source, TOOLS, tools or FakeTools(), limits(**changed))


async def failure(box: Sandbox, source: str, tools: FakeTools | None = None, **changed: Any) -> RunFailed:
    with pytest.raises(RunFailed) as caught:
        await run(box, source, tools, **changed)
    return caught.value


async def test_a_program_answers_its_last_expression_or_its_top_level_return(sandbox: Sandbox) -> None:
    tools = FakeTools()
    assert (await run(sandbox, "from tools import demo\nawait demo.echo(text='hi')", tools)).value == "hi"
    early = "from tools import demo\nif (await demo.add(a=1, b=2))['sum'] == 3:\n    return 'early'\n'late'"
    assert (await run(sandbox, early, tools)).value == "early", "a top-level return passes the type check too"
    assert (await run(sandbox, "x = 5")).value is None
    printed = await run(sandbox, "print('one')\nprint('two')\n3")
    assert (printed.value, printed.output) == (3, "one\ntwo\n")
    assert [name for name, _ in tools.calls] == ["tools.demo.echo", "tools.demo.add"]


async def test_a_tool_error_is_an_exception_the_program_can_catch_with_the_servers_message(sandbox: Sandbox) -> None:
    caught = "from tools import demo\ntry:\n    await demo.fail()\nexcept RuntimeError as e:\n    m = str(e)\nm"
    assert (await run(sandbox, caught)).value == "demo.fail: the server said no"
    uncaught = await failure(sandbox, "from tools import demo\nprint('before')\nawait demo.fail()")
    assert uncaught.kind == "program"
    assert "RuntimeError: demo.fail: the server said no" in uncaught.text
    assert uncaught.output == "before\n", "what it printed before it stopped comes with the error"


async def test_a_wrong_argument_is_refused_by_the_type_check_before_any_call(sandbox: Sandbox) -> None:
    tools = FakeTools()
    wrong = await failure(sandbox, "from tools import demo\nawait demo.echo(txt='hi')", tools)
    assert wrong.kind == "type_check"
    assert "unknown-argument" in wrong.text and "`txt`" in wrong.text
    mistyped = await failure(sandbox, "from tools import demo\nawait demo.add(a='1', b=2)", tools)
    assert "invalid-argument-type" in mistyped.text
    assert tools.calls == [], "no tool was called"
    unchecked = await run(sandbox, "from tools import demo\nawait demo.echo(txt='hi')", tools, type_check=False)
    assert unchecked.calls == 1, "type_check = false sends it"


async def test_gather_runs_calls_at_once_bounded_by_max_concurrent_calls(sandbox: Sandbox) -> None:
    program = "from tools import demo\nimport asyncio\nawait asyncio.gather(*[demo.slow(sec=0.05) for _ in range(9)])"
    tools = FakeTools()
    result = await run(sandbox, program, tools, max_concurrent_calls=3)
    assert result.value == ["slept"] * 9
    assert tools.most_in_flight == 3
    wide = FakeTools()
    await run(sandbox, program, wide, max_concurrent_calls=16)
    assert wide.most_in_flight == 9


async def test_output_and_syntax(sandbox: Sandbox) -> None:
    cut = await run(sandbox, "print('x' * 5000)\n1", max_output_bytes=1000)
    assert cut.output.startswith("x" * 1000)
    assert "4,001 more bytes of output cut by max_output_bytes" in cut.output
    broken = await failure(sandbox, "1 +", type_check=False)
    assert broken.kind == "syntax"


# -- the escape set -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "says"),
    [
        ("open('/etc/passwd').read()", "PermissionError: Permission denied: '/etc/passwd'"),
        ("from pathlib import Path\nPath('/etc/passwd').read_text()", "PermissionError"),
        ("import os\nos.environ['HOME']", "'os.environ' is not supported in this environment"),
        ("import os\nos.getenv('PATH')", "'os.getenv' is not supported in this environment"),
        ("import os\nos.system('id')", "has no attribute 'system'"),
        ("import socket", "No module named 'socket'"),
        ("import subprocess", "No module named 'subprocess'"),
        ("import ctypes", "No module named 'ctypes'"),
        ("import urllib.request", "No module named 'urllib"),
    ],
)
async def test_the_sandbox_has_no_files_environment_network_or_processes(
    sandbox: Sandbox, program: str, says: str
) -> None:
    refused = await failure(sandbox, program, type_check=False)
    assert says in refused.text
    assert "no file system, network, environment or processes" in refused.text or "system" in says
    assert (await run(sandbox, "1 + 1")).value == 2, "the sandbox serves the next run"


async def test_an_import_the_stubs_lack_fails_the_type_check_naming_the_module(sandbox: Sandbox) -> None:
    refused = await failure(sandbox, "import socket")
    assert refused.kind == "type_check" and "`socket`" in refused.text


async def test_an_endless_loop_stops_at_the_wall_time(sandbox: Sandbox) -> None:
    stopped = await failure(sandbox, "while True:\n    pass", timeout_sec=0.5)
    assert stopped.kind == "limit" and "timeout_sec = 0.5" in stopped.text
    assert (await run(sandbox, "1")).value == 1


async def test_the_wall_time_counts_the_tools_time(sandbox: Sandbox) -> None:
    """Monty's own clock leaves out host waits: a program waiting on a slow tool is still stopped."""
    tools = FakeTools()
    stopped = await failure(sandbox, "from tools import demo\nawait demo.slow(sec=30)", tools, timeout_sec=0.5)
    assert stopped.kind == "limit" and "tool calls included" in stopped.text
    assert tools.cancelled == 1, "the call in flight was cancelled"


async def test_a_memory_bomb_and_deep_recursion_are_refused_naming_the_limit(sandbox: Sandbox) -> None:
    bomb = await failure(sandbox, "x = []\nwhile True:\n    x.append('a' * 10000)", max_memory_mb=32)
    assert bomb.kind == "limit" and "MemoryError" in bomb.text and "max_memory_mb = 32" in bomb.text
    big = await failure(sandbox, "len('a' * 2**26)", max_memory_mb=32)
    assert "MemoryError" in big.text
    assert (await run(sandbox, "len('a' * 2**26)")).value == 2**26, "the default 256 MiB holds it"
    recursion = "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\nf(150)"
    deep = await failure(sandbox, recursion, max_recursion=100)
    assert deep.kind == "limit" and "RecursionError" in deep.text and "max_recursion = 100" in deep.text
    assert (await run(sandbox, recursion)).value == 150, "the default depth holds it"


async def test_ten_thousand_calls_stop_at_max_calls(sandbox: Sandbox) -> None:
    tools = FakeTools()
    program = "from tools import demo\nfor i in range(10000):\n    await demo.echo(text='a')"
    stopped = await failure(sandbox, program, tools, max_calls=50)
    assert stopped.kind == "limit" and "max_calls = 50" in stopped.text
    assert len(tools.calls) == 50, "the call past the limit was not made"
    assert len((await run(sandbox, "from tools import demo\nawait demo.echo(text='x')", tools)).value) == 1


async def test_calls_never_awaited_are_cancelled_when_the_program_ends(sandbox: Sandbox) -> None:
    tools = FakeTools()
    program = "from tools import demo\npending = [demo.slow(sec=30) for _ in range(5)]\n'done'"
    result = await run(sandbox, program, tools)
    assert result.value == "done"
    assert (len(tools.calls), tools.cancelled, tools.in_flight) == (5, 5, 0)


async def test_a_cancel_mid_run_kills_the_worker_and_cancels_its_calls(sandbox: Sandbox) -> None:
    await run(sandbox, "1")
    before = _workers()
    tools = FakeTools()
    with trio.move_on_after(0.3) as scope:
        await sandbox.execute("while True:\n    pass", TOOLS, tools, limits())
    assert scope.cancelled_caught
    with trio.move_on_after(0.3):
        await sandbox.execute("from tools import demo\nawait demo.slow(sec=30)", TOOLS, tools, limits())
    assert tools.cancelled == 1
    await wait_until(lambda: not (_workers() & before), what="the killed worker reaped")
    assert (await run(sandbox, "2")).value == 2, "a new worker takes the next run"


async def test_a_worker_that_dies_fails_its_run_and_is_replaced(sandbox: Sandbox) -> None:
    tools = FakeTools()

    async def kill_the_worker_once_the_loop_runs() -> None:
        await tools.echoed.wait()
        for pid in _workers():
            os.kill(pid, 9)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(kill_the_worker_once_the_loop_runs)
        died = await failure(
            sandbox, "from tools import demo\nawait demo.echo(text='go')\nwhile True:\n    pass", tools
        )
    assert died.kind == "crashed" and "worker died" in died.text
    assert (await run(sandbox, "3")).value == 3


async def test_results_are_python_values_the_caller_encodes(sandbox: Sandbox) -> None:
    result = await run(sandbox, "(1, {2, 3}, b'x', float('nan'))")
    assert result.value[0] == 1 and isinstance(result.value, tuple)
