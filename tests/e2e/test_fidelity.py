"""Full fidelity (DESIGN I13): everything MCP offers crosses the sidecar, for every era pair and front.

``test_everything_crosses_…`` drives one real host through one sidecar to one
fixture server (``--fidelity``) and exercises every feature in turn: prompts
(list, get, list_changed), resources (list, read, template read, subscribe and
update), completions (prompt and template), progress, logging, sampling,
elicitation and roots. It is parametrized over the host's era (2026-07-28 or
the 2025-11-25 handshake), the upstream's era, and the front (stdio or HTTP),
so each of its 8 cases is one column of the closing note's table.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp.client.client import ConnectMode

from tests.fidelity_host import (
    FRONTS,
    HOST_ERAS,
    ROOT_URI,
    UPSTREAM_ERAS,
    Recorder,
    listening_for_updates,
)
from tests.sidecar import (
    Host,
    fixture_server,
    http_supervisor_table,
    open_host,
    open_http_host,
    open_http_sidecar,
    read_log,
    scaled,
    text_of,
    write_settings,
)

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(60)
HELLO = "fixture://static/hello"


@asynccontextmanager
async def fidelity_host(
    tmp_path: Path, front: str, mode: ConnectMode, recorder: Recorder, *fixture_args: str, **server: Any
) -> AsyncIterator[Host]:
    """One sidecar (stdio or HTTP front) over one fidelity fixture named ``fx``, and one host on it."""
    log = tmp_path / "fx.jsonl"
    servers = {"fx": fixture_server("--fidelity", "--name", "fx", "--log", str(log), *fixture_args, **server)}
    options: dict[str, Any] = {"log_level": "warning"}
    if front == "stdio":
        config = write_settings(tmp_path, servers)
        async with open_host(config, mode, **options, **recorder.client_options(Host())) as host:
            _bind(recorder, host)
            yield host
        return
    config = write_settings(tmp_path, servers, supervisor=http_supervisor_table())
    async with (
        open_http_sidecar(config) as sidecar,
        open_http_host(sidecar.url, sidecar.token, mode, **options, **recorder.client_options(Host())) as host,
    ):
        _bind(recorder, host)
        yield host


def _bind(recorder: Recorder, host: Host) -> None:
    recorder.host = host  # type: ignore[attr-defined]


async def set_level(host: Host, level: types.LoggingLevel) -> None:
    """``logging/setLevel`` (handshake-era hosts; the Client wrapper is deprecated, so send it raw)."""
    await host.session.session.send_request(
        types.SetLevelRequest(params=types.SetLevelRequestParams(level=level)), types.EmptyResult
    )


async def subscribe(host: Host, uri: str) -> None:
    await host.session.session.send_request(
        types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
    )


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("upstream", UPSTREAM_ERAS)
@pytest.mark.parametrize("mode", HOST_ERAS)
async def test_everything_crosses_the_sidecar_in_every_era_combination_and_front(
    tmp_path: Path, mode: ConnectMode, upstream: tuple[str, ...], front: str
) -> None:
    recorder = Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with fidelity_host(tmp_path, front, mode, recorder, *upstream) as host:
            session = host.session
            await host.wait_tools(lambda names: "mcp__fx__echo" in names)
            if not host.modern:
                await set_level(host, "warning")

            # prompts: listed under the namespaced name, fetched with the raw name upstream
            prompts = await session.list_prompts(cache_mode="bypass")
            assert [p.name for p in prompts.prompts] == ["mcp__fx__greet"]
            got = await session.get_prompt("mcp__fx__greet", {"name": "Ada"})
            assert got.messages[0].content == types.TextContent(text="Hello, Ada! (greet)")

            # completions, routed by the prompt's public name and by the template
            done = await session.complete(types.PromptReference(name="mcp__fx__greet"), {"name": "name", "value": "al"})
            assert done.completion.values == ["alice", "albert"]
            note = types.ResourceTemplateReference(uri="fixture://note/{id}")
            assert (await session.complete(note, {"name": "id", "value": ""})).completion.values == ["1", "2", "3"]

            # resources and templates, never cached (I9)
            resources = await session.list_resources(cache_mode="bypass")
            assert [str(r.uri) for r in resources.resources] == [HELLO]
            templates = await session.list_resource_templates(cache_mode="bypass")
            assert [t.uri_template for t in templates.resource_templates] == ["fixture://note/{id}"]
            hello = await session.read_resource(HELLO, cache_mode="bypass")
            assert hello.contents[0] == types.TextResourceContents(uri=HELLO, text="hello from fx")
            seven = await session.read_resource("fixture://note/7", cache_mode="bypass")
            assert isinstance(seven.contents[0], types.TextResourceContents)
            assert seven.contents[0].text == "note 7 from fx"

            # progress, against the host's own token
            result = await session.call_tool("mcp__fx__progress", {"steps": 3}, progress_callback=recorder.on_progress)
            assert text_of(result) == "progressed 3"
            await recorder.wait_for(lambda: len(recorder.progress) == 3, what="3 progress notices")
            assert recorder.progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

            # sampling, elicitation, roots: asked of this host, answered by it
            sampled = await session.call_tool("mcp__fx__sample", {"text": "hi"})
            assert text_of(sampled) == "sampled: model of ada (ada-model)"
            assert recorder.samples == ["hi"]
            assert text_of(await session.call_tool("mcp__fx__elicit", {})) == 'elicited: accept {"name": "ada"}'
            assert text_of(await session.call_tool("mcp__fx__roots", {})) == f"roots: {ROOT_URI}"
            assert recorder.roots_asked == 1

            # logging: only what the host asked for (warning and above), logger named after the server
            assert text_of(await session.call_tool("mcp__fx__log", {})) == "logged"
            await recorder.wait_for(lambda: len(recorder.logs) >= 2, what="two log messages")
            assert [(m.level, m.logger, m.data) for m in recorder.logs] == [
                ("warning", "fx.fx", "msg-warning"),
                ("error", "fx.fx", "msg-error"),
            ]

            # resource subscriptions: an update reaches the subscribed host exactly once
            async with listening_for_updates(host, [HELLO]) if host.modern else _nothing():
                if not host.modern:
                    await subscribe(host, HELLO)
                assert text_of(await session.call_tool("mcp__fx__touch", {"uri": HELLO})) == "touched"
                await recorder.wait_for(lambda: recorder.updated == [HELLO], what="one resources/updated")

            # a prompt added upstream: the host is told (prompts/list_changed) and lists it
            async with listening_for_updates(host, [], prompts=True) if host.modern else _nothing():
                notices = recorder.prompt_notices
                assert text_of(await session.call_tool("mcp__fx__add_prompt", {"name": "later"})) == "added"
                await recorder.wait_for(lambda: recorder.prompt_notices > notices, what="prompts/list_changed")
            listed = await session.list_prompts(cache_mode="bypass")
            assert [p.name for p in listed.prompts] == ["mcp__fx__greet", "mcp__fx__later"]
            assert recorder.updated == [HELLO]  # no duplicate arrived meanwhile
        assert host.exit_code == 0 if front == "stdio" else True


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


def _events(log: Path, event: str) -> list[dict[str, Any]]:
    return [e for e in read_log(log) if e["event"] == event]
