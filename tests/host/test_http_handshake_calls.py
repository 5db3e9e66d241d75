"""The HTTP front's own answer to a handshake-era session's plain call (``host.http.sessions``).

The front runs in-process (``serve_front_in_process``) over a real fidelity
fixture that speaks only the handshake era; the host is a real ``mcp.Client``
in its ``legacy`` mode, over streamable HTTP. Each test reads the front's
``taken`` counters to prove which way a POST went, and checks the host saw
what the SDK's path would have given it. Which calls take this way is pinned
with the rest of the table in ``test_tool_call_paths.py``; the POST's own
conditions, over raw HTTP, at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import httpx2
import mcp_types as types
import pytest
import trio

from tests.e2e.test_fidelity import set_level
from tests.fidelity_host import HTTP_CLIENT_LEAKS_ASYNCGENS, ROOT_URI, Recorder
from tests.host.test_http_front import INITIALIZE, MCP_HEADERS, TOKEN, serve_front_in_process
from tests.sidecar import Host, fixture_server, open_http_host, scaled, text_of, wait_until

pytestmark = [pytest.mark.e2e, HTTP_CLIENT_LEAKS_ASYNCGENS]

SERVERS: Final = {"fx": fixture_server("--fidelity", "--name", "fx", "--legacy-only")}
AUTH: Final = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}


async def test_a_plain_call_is_the_fronts_own_answer_and_its_servers_questions_ride_its_response(
    tmp_path: Path,
) -> None:
    recorder = Recorder(name="ada")
    with trio.fail_after(scaled(30)):
        async with serve_front_in_process(tmp_path, SERVERS) as served:
            taken = served.link.fast_calls["/mcp"].taken
            async with open_http_host(served.url, TOKEN, "legacy", **recorder.client_options(Host())) as host:
                await host.wait_tools(lambda names: "mcp__fx__sample" in names)
                assert text_of(await host.call("mcp__fx__echo", {"text": "own"})) == "own"
                assert taken["handshake splice"] == 1
                # The upstream asks its host mid-call: on the call's own response, answered by a reply POST.
                sampled = await host.call("mcp__fx__sample", {"text": "hi"})
                assert text_of(sampled) == "sampled: model of ada (ada-model)" and recorder.samples == ["hi"]
                assert text_of(await host.call("mcp__fx__elicit", {})) == 'elicited: accept {"name": "ada"}'
                assert text_of(await host.call("mcp__fx__roots", {})) == f"roots: {ROOT_URI}"
                assert taken["handshake splice"] == 4 and taken["handshake reply"] == 3
                # Progress crosses the splice too: a token of ours upstream, the host's back on the call's response.
                result = await host.session.call_tool(
                    "mcp__fx__progress", {"steps": 2}, progress_callback=recorder.on_progress
                )
                assert text_of(result) == "progressed 2" and [p for p, _, _ in recorder.progress] == [1, 2]
                assert taken["handshake splice"] == 5


async def test_a_call_to_a_2026_era_server_has_its_input_rounds_run_here_and_its_log_messages_on_its_response(
    tmp_path: Path,
) -> None:
    recorder = Recorder(name="ada")
    servers = {"fx": fixture_server("--fidelity", "--name", "fx")}
    with trio.fail_after(scaled(30)):
        async with serve_front_in_process(tmp_path, servers) as served:
            taken = served.link.fast_calls["/mcp"].taken
            async with open_http_host(served.url, TOKEN, "legacy", **recorder.client_options(Host())) as host:
                await host.wait_tools(lambda names: "mcp__fx__sample" in names)
                await set_level(host, "warning")
                assert text_of(await host.call("mcp__fx__echo", {"text": "own"})) == "own"
                # The server answers with an input round; the sidecar asks this host on the call's response.
                sampled = await host.call("mcp__fx__sample", {"text": "hi"})
                assert text_of(sampled) == "sampled: model of ada (ada-model)" and recorder.samples == ["hi"]
                assert text_of(await host.call("mcp__fx__elicit", {})) == 'elicited: accept {"name": "ada"}'
                assert text_of(await host.session.call_tool("mcp__fx__log", {})) == "logged"
                assert [(m.level, m.data) for m in recorder.logs] == [
                    ("warning", "msg-warning"),
                    ("error", "msg-error"),
                ]
                assert taken["handshake splice"] == 4 and taken["handshake reply"] == 2


async def test_a_hosts_cancel_abandons_the_call_upstream_and_the_session_serves_on(tmp_path: Path) -> None:
    recorder = Recorder(name="ada")
    asked = trio.Event()

    async def never(*_: Any) -> types.CreateMessageResult:
        asked.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    recorder.sampling = never  # type: ignore[method-assign,assignment]
    with trio.fail_after(scaled(30)):
        async with serve_front_in_process(tmp_path, SERVERS) as served:
            fast_calls = served.link.fast_calls["/mcp"]
            assert fast_calls.handshake is not None
            async with open_http_host(served.url, TOKEN, "legacy", **recorder.client_options(Host())) as host:
                await host.wait_tools(lambda names: "mcp__fx__sample" in names)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(host.call, "mcp__fx__sample", {"text": "hi"})
                    await asked.wait()
                    nursery.cancel_scope.cancel()  # the SDK's client sends notifications/cancelled for it
                await wait_until(lambda: fast_calls.taken["handshake cancel"] == 1, what="the host's cancel")
                assert fast_calls.handshake.splice.in_flight == 0
                assert text_of(await host.call("mcp__fx__echo", {"text": "after"})) == "after"


async def test_posts_it_does_not_take_reach_the_sdk_and_get_the_sdks_answers(tmp_path: Path) -> None:
    with trio.fail_after(scaled(30)):
        async with serve_front_in_process(tmp_path, SERVERS) as served, httpx2.AsyncClient() as http:
            taken = served.link.fast_calls["/mcp"].taken
            await wait_until(lambda: served.front.route("mcp__fx__echo") is not None, what="the tools")
            opened = await http.post(served.url, json=INITIALIZE, headers=AUTH)
            session = {**AUTH, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcp__fx__echo"}}
            # Not initialized yet: the SDK answers (and the host learns nothing new).
            early = await http.post(
                served.url, json={**call, "params": {"name": "mcp__fx__echo", "arguments": {}}}, headers=session
            )
            assert taken["handshake splice"] == 0 and early.status_code == 200
            # A log level set before notifications/initialized: the Front knows the connection, still not initialized.
            level = {"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "error"}}
            assert (await http.post(served.url, json=level, headers=session)).status_code == 200
            await http.post(
                served.url, json={**call, "params": {"name": "mcp__fx__echo", "arguments": {}}}, headers=session
            )
            assert taken["handshake splice"] == 0
            await http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            plain = {**call, "params": {"name": "mcp__fx__echo", "arguments": {"text": "raw"}}}
            answered = await http.post(served.url, json=plain, headers=session)
            assert taken["handshake splice"] == 1
            assert answered.headers["mcp-session-id"] == session["Mcp-Session-Id"]
            assert answered.headers["content-type"] == "application/json"
            reply = answered.json()
            assert reply == {
                "jsonrpc": "2.0",
                "id": 2,
                "result": {"content": [{"type": "text", "text": "raw"}], "isError": False},
            }
            # An unknown session: the SDK's 404; a 2026 version header: not this era's; JSON only: the SDK's 406.
            gone = await http.post(served.url, json=plain, headers={**session, "Mcp-Session-Id": "nope"})
            assert gone.status_code == 404
            only_json = await http.post(served.url, json=plain, headers={**session, "Accept": "application/json"})
            assert only_json.status_code == 406
            # A _meta key of the host's own: the SDK's path, its answer an event stream.
            meta = {"name": "mcp__fx__echo", "arguments": {"text": "p"}, "_meta": {"x-test/own": 1}}
            progressed = await http.post(served.url, json={**call, "params": meta}, headers=session)
            assert progressed.headers["content-type"].startswith("text/event-stream")
            assert taken["handshake splice"] == 1
