"""End to end: views, tokens bound to views, tool transforms and search views (issue 26, I16).

Real sidecars (``python -m supervisor run``, stdio or HTTP front) over real fixture
servers, real ``mcp.Client`` hosts of both eras. Which call path a call takes
follows ``host.pipeline.paths``'s table: over stdio a 2026-era host's plain call to a
2026-era upstream is spliced, over HTTP it takes the fast path, and a
handshake-era host's call takes the SDK path; so the transformed tool is called
on every path across these tests' parameters.

An absence (no notice, no update reached a host of another view) cannot be waited
for; each such check is ordered after an event that a leak would have preceded:
the other view's host received its own notice for a later change.
"""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import MCPError
from mcp.client.client import ConnectMode

from tests.fidelity_host import HTTP_CLIENT_LEAKS_ASYNCGENS, Recorder, listening_for_updates
from tests.fixtures.fidelity import HELLO_URI
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
    write_settings,
)

pytestmark = [pytest.mark.e2e, HTTP_CLIENT_LEAKS_ASYNCGENS]

BOUND_SEC: Final = scaled(60)
NOTICE_BOUND_SEC: Final = scaled(10)
CODE_TOKEN: Final = "code-agent-token"
DOCS_TOKEN: Final = "docs-agent-token"
TOKENS_ENV: Final = {"CODE_AGENT_TOKEN": CODE_TOKEN, "DOCS_AGENT_TOKEN": DOCS_TOKEN}
COUNTER_URI: Final = "fixture://counter"
PLUS: Final = {
    # `add(a, b)` becomes `plus(x)`: `a` renamed, `b` hidden and always 40.
    "name": "plus",
    "description": "Add forty to x.",
    "arguments": {
        "a": {"rename": "x", "description": "The number to add forty to."},
        "b": {"hide": True, "default": 40},
    },
}


def _servers(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """``a`` (tag ``code``): fidelity, with ``add`` transformed into ``plus``; ``b`` (tag ``docs``): ``fixture://counter``."""
    return {
        "a": fixture_server(
            "--fidelity", "--name", "a", "--tools", "echo,add,add_tool", tags=["code"], tools={"add": PLUS}
        ),
        "b": fixture_server("--resources", "--name", "b", "--tools", "echo,add_tool", tags=["docs"]),
    }


def _http_sidecar_settings(tmp_path: Path, *, code_view: dict[str, Any] | None = None) -> Path:
    return write_settings(
        tmp_path,
        _servers(tmp_path),
        supervisor=http_supervisor_table(
            tokens=[
                {"token_env_var": "CODE_AGENT_TOKEN", "views": ["code"]},
                {"token_env_var": "DOCS_AGENT_TOKEN", "views": ["docs"]},
            ]
        ),
        views={"code": code_view or {"servers": ["code"]}, "docs": {"servers": ["docs"]}},
    )


@asynccontextmanager
async def _view_host(
    base_url: str, view: str, token: str, mode: ConnectMode, recorder: Recorder
) -> AsyncIterator[tuple[Host, Host]]:
    """A host on ``/mcp/<view>``; yields (the connected host, the host its notices are counted on)."""
    counted = Host()
    async with open_http_host(f"{base_url}/{view}", token, mode, **recorder.client_options(counted)) as host:
        yield host, counted


async def _error_of(call: Any) -> tuple[int, str]:
    with pytest.raises(MCPError) as caught:
        await call
    return caught.value.error.code, caught.value.error.message


async def _status_of(url: str, token: str) -> int:
    """The HTTP status a handshake-era ``initialize`` POST gets with ``token``."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    async with httpx2.AsyncClient() as http:
        return (await http.post(url, json=body, headers=headers)).status_code


@pytest.mark.parametrize("mode", HOST_MODES)
async def test_I16_two_view_tokens_each_open_only_their_view_listing_calls_reads_subscriptions_and_notices(
    tmp_path: Path, mode: ConnectMode
) -> None:
    config = _http_sidecar_settings(tmp_path)
    code_seen, docs_seen = Recorder(name="code"), Recorder(name="docs")
    with trio.fail_after(BOUND_SEC):
        async with open_http_sidecar(config, env=TOKENS_ENV) as sidecar:
            base = sidecar.url
            # A token opens its own view only: never another view, never the default one.
            assert await _status_of(f"{base}/docs", CODE_TOKEN) == 403
            assert await _status_of(f"{base}/code", DOCS_TOKEN) == 403
            assert await _status_of(base, CODE_TOKEN) == 403
            assert await _status_of(f"{base}/code", "not-a-token") == 401
            async with (
                _view_host(base, "code", CODE_TOKEN, mode, code_seen) as (code, code_notices),
                _view_host(base, "docs", DOCS_TOKEN, mode, docs_seen) as (docs, docs_notices),
            ):
                # Listings: each view's own server, the transform applied, sorted by public name.
                code_tools = await code.wait_tools(lambda names: "mcp__a__plus" in names)
                docs_tools = await docs.wait_tools(lambda names: "mcp__b__echo" in names)
                assert code_tools == sorted(code_tools)
                assert all(name.startswith("mcp__a__") for name in code_tools), code_tools
                assert "mcp__a__add" not in code_tools
                assert sorted(docs_tools) == ["mcp__b__add_tool", "mcp__b__echo"]
                (plus,) = [t for t in (await code.session.list_tools()).tools if t.name == "mcp__a__plus"]
                assert plus.description == "Add forty to x."
                assert list(plus.input_schema["properties"]) == ["x"]

                # Calls: the transformed tool takes the host's x, the hidden b is always 40.
                assert text_of(await code.call("mcp__a__plus", {"x": 2, "b": 1})) == "42"
                # A hidden tool answers exactly as an unknown one.
                hidden = await _error_of(code.call("mcp__b__echo", {"text": "x"}))
                unknown = await _error_of(code.call("mcp__q__echo", {"text": "x"}))
                assert hidden == (unknown[0], unknown[1].replace("mcp__q__echo", "mcp__b__echo"))
                assert (await _error_of(docs.call("mcp__a__plus", {"x": 1})))[0] == unknown[0]

                # Reads, lists of resources and prompts: the other view's are not there.
                assert [str(r.uri) for r in (await code.session.list_resources()).resources] == [HELLO_URI]
                assert [str(r.uri) for r in (await docs.session.list_resources()).resources] == [COUNTER_URI]
                assert [p.name for p in (await docs.session.list_prompts()).prompts] == []
                assert [p.name for p in (await code.session.list_prompts()).prompts] == ["mcp__a__greet"]
                read_hidden = await _error_of(code.session.read_resource(COUNTER_URI))
                read_unknown = await _error_of(code.session.read_resource("fixture://nothing"))
                assert read_hidden == (read_unknown[0], read_unknown[1].replace("fixture://nothing", COUNTER_URI))
                assert (await docs.session.read_resource(COUNTER_URI)).contents
                assert (await _error_of(docs.session.get_prompt("mcp__a__greet", {"name": "x"})))[0] == unknown[0]

                # Subscriptions: both subscribe to a's resource; only the view that shows it hears it.
                async with (
                    _subscribed(code, HELLO_URI),
                    _subscribed(docs, HELLO_URI),
                ):
                    assert text_of(await code.call("mcp__a__touch", {"uri": HELLO_URI}))
                    await code_seen.wait_for(
                        lambda: HELLO_URI in code_seen.updated, what="the update", bound_sec=NOTICE_BOUND_SEC
                    )

                    # Notices: a change of b reaches the docs host and not the code host. A server may
                    # announce one change more than once, so what is counted is the code host's notices
                    # from then until its own change, which the docs host's notice and re-listing precede.
                    code_before = code_notices.notices
                    docs_before = docs_notices.notices
                    assert text_of(await docs.call("mcp__b__add_tool", {"name": "fresh"})) == "added"
                    with trio.fail_after(NOTICE_BOUND_SEC):
                        await docs_notices.wait_notice(after=docs_before)
                    assert "mcp__b__fresh" in await docs.wait_tools(lambda names: "mcp__b__fresh" in names)
                    assert code_notices.notices == code_before, "the code host heard b's change"
                    assert text_of(await code.call("mcp__a__add_tool", {"name": "mine"})) == "added"
                    with trio.fail_after(NOTICE_BOUND_SEC):
                        await code_notices.wait_notice(after=code_before)
                    code_tools = await code.wait_tools(lambda names: "mcp__a__mine" in names)
                    assert not any(name.startswith("mcp__b__") for name in code_tools)
                    assert docs_seen.updated == [], "the docs host heard an update of a resource it cannot see"


@asynccontextmanager
async def _subscribed(host: Host, uri: str) -> AsyncIterator[None]:
    """Subscribe in the host's era: a listen stream (2026) or ``resources/subscribe`` (handshake)."""
    if host.modern:
        async with listening_for_updates(host, [uri]):
            yield
    else:
        # Sent raw: the Client's handshake-era wrapper is deprecated.
        await host.session.session.send_request(
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
        )
        yield


@pytest.mark.parametrize("mode", HOST_MODES)
async def test_a_stdio_search_view_finds_and_calls_its_tools_with_progress_and_elicitation_and_hides_the_rest(
    tmp_path: Path, mode: ConnectMode
) -> None:
    servers = _servers(tmp_path)
    view = {"servers": ["a"], "catalog": "search", "always_visible": ["mcp__a__echo"]}
    config = write_settings(tmp_path, servers, views={"pick": view})
    recorder = Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode, run_args=["--view", "pick"], **recorder.client_options(Host())) as host:
            assert await host.tool_names() == ["call_tool", "mcp__a__echo", "search_tools"]

            found = await host.call("search_tools", {"query": "add a number", "limit": 3})
            assert not found.is_error
            matches = json.loads(text_of(found))["tools"]
            assert matches == (found.structured_content or {})["tools"]
            (plus,) = [m for m in matches if m["name"] == "mcp__a__plus"]
            assert plus["description"] == "Add forty to x."
            assert list(plus["inputSchema"]["properties"]) == ["x"], "search shows the tool as transformed"
            names = [
                m["name"] for m in json.loads(text_of(await host.call("search_tools", {"query": "echo"})))["tools"]
            ]
            assert not any(name.startswith("mcp__b__") for name in names)

            # call_tool is a direct call: progress against the host's own token, elicitation asked of it.
            progressed = await host.session.call_tool(
                "call_tool",
                {"name": "mcp__a__progress", "arguments": {"steps": 3}},
                progress_callback=recorder.on_progress,
            )
            assert text_of(progressed) == "progressed 3"
            await recorder.wait_for(lambda: len(recorder.progress) == 3, what="3 progress notices")
            elicited = await host.call("call_tool", {"name": "mcp__a__elicit", "arguments": {}})
            assert text_of(elicited) == 'elicited: accept {"name": "ada"}'
            assert text_of(await host.call("call_tool", {"name": "mcp__a__plus", "arguments": {"x": 1}})) == "41"

            # Every tool of the view stays callable by its name (2026 era: the splice; handshake: the SDK path).
            assert text_of(await host.call("mcp__a__plus", {"x": 2})) == "42"
            unknown = await _error_of(host.call("mcp__q__echo", {"text": "x"}))
            hidden = await _error_of(host.call("mcp__b__echo", {"text": "x"}))
            assert hidden == (unknown[0], unknown[1].replace("mcp__q__echo", "mcp__b__echo"))
            through = await _error_of(host.call("call_tool", {"name": "mcp__b__echo", "arguments": {"text": "x"}}))
            assert through == hidden
            assert [str(r.uri) for r in (await host.session.list_resources()).resources] == [HELLO_URI]
        assert host.exit_code == 0


async def test_a_reload_that_edits_a_view_notifies_its_hosts_of_both_eras_and_no_other_view(tmp_path: Path) -> None:
    config = _http_sidecar_settings(tmp_path)
    with trio.fail_after(BOUND_SEC):
        async with open_http_sidecar(config, env=TOKENS_ENV) as sidecar:
            base = sidecar.url
            async with (
                _view_host(base, "code", CODE_TOKEN, "auto", Recorder(name="new")) as (new, new_notices),
                _view_host(base, "code", CODE_TOKEN, "legacy", Recorder(name="old")) as (old, old_notices),
                _view_host(base, "docs", DOCS_TOKEN, "auto", Recorder(name="docs")) as (docs, docs_notices),
            ):
                for host in (new, old):
                    await host.wait_tools(lambda names: "mcp__a__echo" in names)
                await docs.wait_tools(lambda names: "mcp__b__echo" in names)
                # Each view's hosts first get a notice of a change of their own: a late notice of the start-up
                # syncs came before it, on the same stream, so nothing from before is counted below.
                await _changed_and_noticed(new, "mcp__a__add_tool", "warm_a", (new_notices, old_notices))
                await _changed_and_noticed(docs, "mcp__b__add_tool", "warm_b", (docs_notices,))
                before = {"new": new_notices.notices, "old": old_notices.notices, "docs": docs_notices.notices}

                _http_sidecar_settings(tmp_path, code_view={"servers": ["code"], "exclude_tools": ["mcp__a__echo"]})
                sidecar.process.send_signal(signal.SIGHUP)
                for host, notices in ((new, new_notices), (old, old_notices)):
                    with trio.fail_after(NOTICE_BOUND_SEC):
                        await notices.wait_notice(after=before["new" if host is new else "old"])
                    names = await host.wait_tools(lambda names: "mcp__a__echo" not in names)
                    assert "mcp__a__plus" in names
                    assert (await _error_of(host.call("mcp__a__echo", {"text": "x"})))[0] == types.INVALID_PARAMS

                # The docs view was not edited: no notice reached its host while both code hosts got theirs
                # and re-listed. Then a change of b does reach it.
                assert docs_notices.notices == before["docs"], "the docs host was notified of the code view's edit"
                assert text_of(await docs.call("mcp__b__add_tool", {"name": "later"})) == "added"
                with trio.fail_after(NOTICE_BOUND_SEC):
                    await docs_notices.wait_notice(after=before["docs"])
                await docs.wait_tools(lambda names: "mcp__b__later" in names)


async def _changed_and_noticed(caller: Host, tool: str, name: str, listeners: tuple[Host, ...]) -> None:
    """``caller`` adds the tool ``name`` upstream (``tool``); return once every listener got a notice since."""
    seen = [listener.notices for listener in listeners]
    assert text_of(await caller.call(tool, {"name": name})) == "added"
    with trio.fail_after(NOTICE_BOUND_SEC):
        for listener, count in zip(listeners, seen, strict=True):
            await listener.wait_notice(after=count)
