"""A real host: Claude Code 2.1.197 runs the sidecar over stdio and plays a model turn against the stand-in.

The model is ``tests/hosts/model_standin.py`` (a loopback Messages API that records every request and answers
from a script); Claude Code and its configuration are isolated in ``tmp_path`` and kept offline
(``tests/hosts/claude_code.py``). What the tests see is what the host really sent the model: the tool names as
Claude Code rewrites ours (``mcp__<its server name>__<our public name>``),
the bytes of those tools, the ``tool_result`` it sends back, and the tools it adds itself. The sidecar runs with
the default names (``<server>__<tool>``), so Claude Code shows ``mcp__sup__demo__echo`` (issue 57, item 3).

Each test prints what it measured (wall time, time to the first model request, the sidecar's connection time as
Claude Code logs it, tool names and bytes): ``pytest -s tests/hosts`` or ``-rP`` shows it. The tests skip, with
the reason, when Claude Code is not installed (``tests/interop/install.sh`` installs it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Final

import pytest
import trio

from tests.hosts.claude_code import SERVER_NAME, ClaudeRun, claude_binary, run_claude, sidecar_mcp_config
from tests.hosts.model_standin import ModelRequest, ModelStandin, ScriptedTurn
from tests.sidecar import command_server, pid_alive, scaled, wait_until, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC: Final = scaled(90)
"""Per test; a run takes ~4 s here (Claude Code's start ~2 s, the sidecar's ~1.5 s of it in parallel). Claude Code
retries a failing model request 10 times with backoff, so a broken stand-in shows as this bound, not a hang."""
PREFIX: Final = f"mcp__{SERVER_NAME}__"
"""What Claude Code puts before each of our public names."""


@pytest.fixture
def claude() -> Path:
    return claude_binary()


def _demo_settings(tmp_path: Path, **views: dict[str, object]) -> Path:
    demo = command_server([sys.executable, "-m", "supervisor.demo"])
    # The product's default names (the suite's other tests use the mcp__ form): Claude Code adds its own prefix.
    return write_settings(tmp_path, {"demo": demo}, supervisor={"names": {"form": "short"}}, views=views or None)


def _ours(request: ModelRequest) -> list[str]:
    return [name for name in request.tool_names if name.startswith(PREFIX)]


def _report(title: str, run: ClaudeRun, standin: ModelStandin, request: ModelRequest) -> None:
    """Print what the run measured (shown with ``-s`` or ``-rP``)."""
    first = standin.messages_requests[0].received_at - run.started_at
    ours = _ours(request)
    print(
        f"\n== {title}\n"
        f"wall {run.wall_sec:.2f} s; first model request {first:.2f} s after the spawn; "
        f"sidecar connected in {run.sidecar_connect_ms()} ms (Claude Code's log)\n"
        f"requests: {[f'{r.method} {r.path} -> {r.answer}' for r in standin.requests]}\n"
        f"tools: {len(request.tools)} ({request.tools_bytes()} bytes); ours: {len(ours)} "
        f"({request.tools_bytes(lambda name: name.startswith(PREFIX))} bytes)"
    )
    sizes = request.tool_sizes()
    for name in ours:
        print(f"  {name}: {sizes[name]} bytes")
    added = [name for name in request.tool_names if "Resource" in name]
    print(f"resource tools Claude Code added: {added} ({request.tools_bytes(lambda n: 'Resource' in n)} bytes)")


def _no_traffic_left_the_machine(standin: ModelStandin) -> None:
    escaped = [r.target for r in standin.requests if r.method == "CONNECT"]
    assert not escaped, f"Claude Code tried to reach other hosts (through the tripwire proxy): {escaped}"


async def test_a_model_turn_calls_a_sidecar_tool_and_gets_its_result_back(tmp_path: Path, claude: Path) -> None:
    token = f"echo-{uuid.uuid4().hex[:12]}"
    standin = ModelStandin(
        ScriptedTurn(f"{PREFIX}demo__echo", {"text": token}, final=lambda result: f"The demo said: {result}")
    )
    mcp_config = sidecar_mcp_config(tmp_path / "mcp.json", _demo_settings(tmp_path))
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            base_url = await nursery.start(standin.run)
            run = await run_claude(
                claude, f"Echo {token} with the demo tool.", base_url=base_url, mcp_config=mcp_config, workdir=tmp_path
            )
            nursery.cancel_scope.cancel()

    assert run.code == 0, f"claude exited {run.code}: {run.stderr[-2000:]}"
    (tool_use, final) = standin.main_loop_requests()
    assert (tool_use.answer, final.answer) == ("tool_use", "final")
    _report("a turn that calls demo__echo", run, standin, tool_use)
    assert f"{PREFIX}demo__echo" in _ours(tool_use)
    assert not [name for name in tool_use.tool_names if name.startswith(f"{PREFIX}mcp__")], "prefixed twice"
    assert standin.returned_results() == [token], "the echo's output came back to the model as the tool_result"
    assert f"The demo said: {token}" in run.stdout
    _no_traffic_left_the_machine(standin)


def _search_view_settings(tmp_path: Path) -> Path:
    return _demo_settings(tmp_path, find={"catalog": "search"})


async def _view_turn(
    tmp_path: Path, claude: Path, *, settings: Path, view: str, turn: ScriptedTurn, prompt: str
) -> tuple[ClaudeRun, ModelStandin]:
    """Claude Code over ``run --view VIEW``: the model makes the one call ``turn`` scripts, and is done."""
    standin = ModelStandin(turn)
    mcp_config = sidecar_mcp_config(tmp_path / "mcp.json", settings, run_args=["--view", view])
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            base_url = await nursery.start(standin.run)
            run = await run_claude(claude, prompt, base_url=base_url, mcp_config=mcp_config, workdir=tmp_path)
            nursery.cancel_scope.cancel()
    assert run.code == 0, f"claude exited {run.code}: {run.stderr[-2000:]}"
    _no_traffic_left_the_machine(standin)
    return run, standin


async def _search_turn(tmp_path: Path, claude: Path) -> tuple[ClaudeRun, ModelStandin]:
    """Claude Code over ``run --view find``: the model searches for an echo tool, and is done."""
    turn = ScriptedTurn(f"{PREFIX}search_tools", {"query": "echo the text back", "limit": 3})
    settings = _search_view_settings(tmp_path)
    return await _view_turn(
        tmp_path, claude, settings=settings, view="find", turn=turn, prompt="Find a tool that echoes text."
    )


async def test_a_search_view_costs_the_model_two_tools_and_finds_the_rest(tmp_path: Path, claude: Path) -> None:
    run, standin = await _search_turn(tmp_path, claude)
    (first, *_rest) = standin.main_loop_requests()
    _report("a search view (run --view find)", run, standin, first)
    assert sorted(_ours(first)) == [f"{PREFIX}call_tool", f"{PREFIX}search_tools"]
    (found,) = standin.returned_results()
    assert "demo__echo" in [tool["name"] for tool in json.loads(found)["tools"]]


PROGRAM: Final = """
from tools import demo
said = await demo.echo(text="code")
total = await demo.add(a=2, b=3)
f"{said} {total}"
"""


async def test_a_model_turn_runs_one_program_over_a_code_view_and_gets_its_value_back(
    tmp_path: Path, claude: Path
) -> None:
    # Issue 58: the model writes one program; its two calls run in the sidecar and only the value reaches the model.
    turn = ScriptedTurn(f"{PREFIX}run_code", {"code": PROGRAM})
    settings = _demo_settings(tmp_path, code={"catalog": "code"})
    run, standin = await _view_turn(
        tmp_path, claude, settings=settings, view="code", turn=turn, prompt="Echo code and add 2 and 3."
    )
    (first, *_rest) = standin.main_loop_requests()
    _report("a code view (run --view code)", run, standin, first)
    assert sorted(_ours(first)) == [f"{PREFIX}run_code", f"{PREFIX}search_tools"]
    assert standin.returned_results() == ["code 5"], "the program's value, and nothing of its calls' results"


async def test_claude_code_adds_no_resource_tools_for_a_view_without_resources_once_the_sidecar_knows_it(
    tmp_path: Path, claude: Path
) -> None:
    # The first run ever knows nothing of the view: it declares what its servers may offer (everything). It keeps
    # what the view served on disk, and the next run declares that: tools, and no resources (issue 57, item 4).
    _cold_run, cold = await _search_turn(tmp_path, claude)
    _warm_run, warm = await _search_turn(tmp_path, claude)
    (cold_first, *_rest) = cold.main_loop_requests()
    (first, *_rest) = warm.main_loop_requests()
    _report("a search view, the second run", _warm_run, warm, first)
    added = [name for name in first.tool_names if "Resource" in name]
    assert not added, f"Claude Code added {added} ({first.tools_bytes(lambda n: 'Resource' in n)} bytes)"
    cold_added = cold_first.tools_bytes(lambda n: "Resource" in n)
    print(f"resource tools at the cold start: {cold_added} bytes; at the warm start: 0 bytes")


WARM_TRIES: Final = 3
"""Warm runs a busy box may take: Claude Code's wait before its first model request is its own, and on two
loaded cores the sidecar's start (a Python process beside Node's) can outrun it, which no scale factor stretches."""


async def test_a_warm_start_is_in_claude_codes_first_model_request_without_being_waited_for(
    tmp_path: Path, claude: Path
) -> None:
    # Claude Code's default does not wait for MCP servers: what has listed when it is ready goes into the first
    # request. A warm sidecar answers its first tools/list from disk, before its servers are up (issue 57, item 1).
    settings = _demo_settings(tmp_path)
    firsts: list[ModelRequest] = []
    while len(firsts) < 1 + WARM_TRIES and not (len(firsts) > 1 and _ours(firsts[-1])):
        standin = ModelStandin(ScriptedTurn(f"{PREFIX}demo__echo", {"text": "warm"}))
        mcp_config = sidecar_mcp_config(tmp_path / "mcp.json", settings, always_load=False)
        with trio.fail_after(BOUND_SEC):
            async with trio.open_nursery() as nursery:
                base_url = await nursery.start(standin.run)
                run = await run_claude(claude, "Say warm.", base_url=base_url, mcp_config=mcp_config, workdir=tmp_path)
                nursery.cancel_scope.cancel()
        assert run.code == 0, f"claude exited {run.code}: {run.stderr[-2000:]}"
        firsts.append(next(r for r in standin.messages_requests if r.tools))  # the main loop's first request
    cold, *warm = firsts
    counts = [len(_ours(request)) for request in warm]
    print(f"\nour tools in the first model request: cold start {len(_ours(cold))}, warm starts {counts}")
    assert f"{PREFIX}demo__echo" in _ours(warm[-1]), f"no warm start of {WARM_TRIES} was in the first request"


async def test_claude_codes_stop_of_the_sidecar_leaves_no_upstream_process_behind(tmp_path: Path, claude: Path) -> None:
    # The upstream outlives its stdin and ignores SIGTERM (a shell that goes on as `sleep`): only the sidecar's
    # group kill ends it, and Claude Code's whole stop takes 0.5 s.
    pid_file = tmp_path / "upstream.pid"
    # `$$$$`: the settings file's interpolation makes `$$` a literal `$`, so the shell sees its own `$$`.
    stubborn = f'echo $$$$ > "{pid_file}"; trap "" TERM; "{sys.executable}" -m supervisor.demo; exec sleep 600'
    settings = write_settings(
        tmp_path, {"demo": command_server(["/bin/sh", "-c", stubborn])}, supervisor={"names": {"form": "short"}}
    )
    standin = ModelStandin(ScriptedTurn(f"{PREFIX}demo__echo", {"text": "bye"}))
    mcp_config = sidecar_mcp_config(tmp_path / "mcp.json", settings)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            base_url = await nursery.start(standin.run)
            run = await run_claude(claude, "Say bye.", base_url=base_url, mcp_config=mcp_config, workdir=tmp_path)
            nursery.cancel_scope.cancel()
        assert run.code == 0, f"claude exited {run.code}: {run.stderr[-2000:]}"
        assert standin.returned_results() == ["bye"], "the upstream served the turn"
        upstream = int(pid_file.read_text())
        try:
            await wait_until(lambda: not pid_alive(upstream), what="the upstream to be gone", bound_sec=scaled(3))
        finally:
            with suppress(ProcessLookupError):  # its own process group (the sidecar starts it in a new session)
                os.killpg(upstream, signal.SIGKILL)
