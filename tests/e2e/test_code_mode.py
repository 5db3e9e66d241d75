"""End to end: code views (issue 58) through real sidecars, fixture servers and hosts of both eras.

A code view lists ``run_code`` and ``search_tools``; a program's calls are its
host's own: routed by the view (a server of another view is not in ``tools``),
transformed, pinned, attributed (an inner call's progress reaches the host that
sent ``run_code``, against its request). Over HTTP a token opens its own views
only, programs included. A cancel mid-run kills the run's worker, and the
sidecar serves on; when it stops, no worker is left.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import MCPError
from mcp.client.client import ConnectMode

from tests.fidelity_host import HTTP_CLIENT_LEAKS_ASYNCGENS, Recorder
from tests.sidecar import (
    HOST_MODES,
    Host,
    fixture_server,
    http_supervisor_table,
    open_host,
    open_http_host,
    open_http_sidecar,
    scaled,
    text_of,
    wait_until,
    write_settings,
)

pytestmark = [pytest.mark.e2e, HTTP_CLIENT_LEAKS_ASYNCGENS]

BOUND_SEC: Final = scaled(60)
CODE_TOKEN: Final = "code-agent-token"
DOCS_TOKEN: Final = "docs-agent-token"
PLUS: Final = {
    "name": "plus",
    "description": "Add forty to x.",
    "arguments": {
        "a": {"rename": "x", "description": "The number to add forty to."},
        "b": {"hide": True, "default": 40},
    },
}
PROGRAM: Final = """
from tools import a
import asyncio

echoed, summed = await asyncio.gather(a.echo(text="hi"), a.plus(x=2))
progressed = await a.progress(steps=2)
try:
    await a.invalid_params()
except RuntimeError as error:
    failed = str(error)
print("done")
{"echoed": echoed, "summed": summed, "progressed": progressed, "failed": failed}
"""


def _servers() -> dict[str, dict[str, Any]]:
    return {
        "a": fixture_server(
            "--fidelity", "--name", "a", "--tools", "echo,add,invalid_params", tags=["code"], tools={"add": PLUS}
        ),
        "b": fixture_server("--name", "b", "--tools", "echo", tags=["docs"]),
    }


def _monty_workers(parent: int) -> set[int]:
    """The live monty worker processes of the sidecar ``parent``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat, cmdline = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == parent and fields[0] != "Z" and b"monty" in cmdline:
                found.add(int(entry.name))
    return found


async def _run(host: Host, code: str, **options: Any) -> types.CallToolResult:
    return await host.session.call_tool("run_code", {"code": code}, **options)


@pytest.mark.parametrize("mode", HOST_MODES)
async def test_a_program_calls_its_views_tools_as_the_host_would(tmp_path: Path, mode: ConnectMode) -> None:
    config = write_settings(
        tmp_path,
        _servers(),
        views={"code": {"servers": ["code"], "catalog": "code", "code": {"max_result_bytes": 4096}}},
        supervisor={"names": {"form": "short"}},
    )
    recorder = Recorder()
    with trio.fail_after(BOUND_SEC):
        options = recorder.client_options(Host())
        async with open_host(config, mode, run_args=["--view", "code"], **options) as host:
            assert sorted(await host.tool_names()) == ["run_code", "search_tools"]
            found = text_of(await host.call("search_tools", {"query": "add forty"}))
            assert "a.plus(*, x: float) -> str\n    Add forty to x" in found, "the transformed tool, typed"

            result = await _run(host, PROGRAM, progress_callback=recorder.on_progress)
            assert not result.is_error, result.content
            value = json.loads(text_of(result))
            assert value["echoed"] == "hi" and value["summed"] == "42", "renamed x, hidden b = 40"
            assert value["progressed"] == "progressed 2"
            assert value["failed"].startswith("a.invalid_params: "), value["failed"]
            assert isinstance(result.content[1], types.TextContent) and result.content[1].text == "printed:\ndone\n"
            await recorder.wait_for(lambda: len(recorder.progress) == 2, what="the inner call's progress")

            asked = await _run(host, "from tools import a\nawait a.elicit()")
            if mode == "legacy":  # the server's question reaches the host, against run_code's request
                assert text_of(asked) == 'elicited: accept {"name": "host"}'
                assert recorder.elicitations == ["form"]
            else:  # a 2026-era host answers questions in input rounds, which a program's call cannot pass on
                assert asked.is_error and "asked for input mid-call" in text_of(asked)

            other = await _run(host, "from tools import b\nawait b.echo(text='x')")
            assert other.is_error and "has no member `b`" in text_of(other), "a server of another view is not in tools"
            wrong = await _run(host, "from tools import a\nawait a.plus(a=1)")
            assert wrong.is_error and "unknown-argument" in text_of(wrong), "the hidden name is not an argument"

            big = await _run(host, "'x' * 10**8")
            assert "cut at 4,096 of 100,000,000 bytes by max_result_bytes" in text_of(big)

            await wait_until(lambda: bool(_monty_workers(host.pid)), what="the sandbox's worker")
            before = _monty_workers(host.pid)
            with trio.move_on_after(scaled(1)) as scope:
                await _run(host, "while True:\n    pass")
            assert scope.cancelled_caught
            await wait_until(lambda: not (_monty_workers(host.pid) & before), what="the cancelled run's worker gone")
            assert text_of(await _run(host, "1 + 1")) == "2", "the sidecar serves on, on a new worker"
            sidecar = host.pid
        assert host.exit_code == 0
        assert not _monty_workers(sidecar)


async def test_over_http_a_token_runs_programs_in_its_own_views_only(tmp_path: Path) -> None:
    config = write_settings(
        tmp_path,
        _servers(),
        supervisor=http_supervisor_table(
            tokens=[
                {"token_env_var": "CODE_AGENT_TOKEN", "views": ["code"]},
                {"token_env_var": "DOCS_AGENT_TOKEN", "views": ["docs"]},
            ]
        ),
        views={"code": {"servers": ["code"], "catalog": "code"}, "docs": {"servers": ["docs"]}},
    )
    env = {"CODE_AGENT_TOKEN": CODE_TOKEN, "DOCS_AGENT_TOKEN": DOCS_TOKEN}
    with trio.fail_after(BOUND_SEC):
        async with open_http_sidecar(config, env=env) as sidecar:
            base = sidecar.url
            for mode in HOST_MODES:
                async with open_http_host(f"{base}/code", CODE_TOKEN, mode) as host:
                    result = await _run(host, "from tools import a\nawait a.echo(text='over http')")
                    assert text_of(result) == "over http"
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "run_code", "arguments": {"code": "1"}}}  # fmt: skip
            headers = {"Authorization": f"Bearer {DOCS_TOKEN}", "Accept": "application/json, text/event-stream"}
            async with httpx2.AsyncClient() as http:
                refused = await http.post(f"{base}/code", json=body, headers=headers)
            assert refused.status_code in (401, 403), refused.status_code
            async with open_http_host(f"{base}/docs", DOCS_TOKEN) as docs:
                assert "run_code" not in await docs.tool_names()
                with pytest.raises(MCPError, match="Unknown tool: run_code"):
                    await docs.session.call_tool("run_code", {"code": "1"})


async def test_a_pinned_tool_that_changed_is_withheld_from_programs_too(tmp_path: Path) -> None:
    server = fixture_server("--name", "fx", "--tools", "echo,redescribe", pin="block")
    config = write_settings(tmp_path, {"fx": server}, views={"code": {"catalog": "code"}})
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, run_args=["--view", "code"]) as host:
            assert text_of(await _run(host, "from tools import fx\nawait fx.echo(text='before')")) == "before"
            changed = "from tools import fx\nawait fx.redescribe(name='echo', text='Echo, and more.')"
            assert text_of(await _run(host, changed)) == "redescribed"
            await host.log.wait_line(r"'echo' changed since it was pinned; withheld until approved")
            withheld = await _run(host, "from tools import fx\nawait fx.echo(text='after')")
            assert withheld.is_error
            assert "withheld by pinning: its definition changed since it was approved" in text_of(withheld)
