"""The Front over streamable HTTP: both eras at once, change notices, auth, rebinding, body limit, SIGTERM.

Guard tests run the HTTP front in-process (a Supervisor with no servers whose
Registry the test edits), so they take milliseconds; the end-to-end tests drive
``python -m supervisor run`` with a real fixture server behind it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from supervisor.front import Front
from supervisor.front_http import HttpHostLink
from supervisor.relay import Relay
from supervisor.root import Supervisor
from supervisor.settings import load_settings
from tests.e2e import (
    Host,
    called_tools,
    fixture_server,
    free_port,
    http_supervisor_table,
    open_http_host,
    open_http_sidecar,
    text_of,
    wait_until,
    write_settings,
)

pytestmark = pytest.mark.e2e

TOKEN: Final = "s3cret-token"
BODY_LIMIT: Final = 4096
INITIALIZE: Final = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS: Final = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

# The SDK's handshake-era HTTP client drops its httpx2 SSE generators unclosed under trio at
# teardown (a client-side warning, not a sidecar fault); only tests with legacy HTTP hosts get this.
_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@dataclass
class InProcessFront:
    supervisor: Supervisor
    front: Front
    url: str

    def publish(self, *names: str) -> None:
        """Make the Registry hold exactly ``names`` (owner ``local``): the Front announces the change."""
        listing = [types.Tool(name=name, input_schema={"type": "object"}) for name in names]
        self.supervisor.registry.swap("local", listing)


@asynccontextmanager
async def serve_front_in_process(tmp_path: Path) -> AsyncIterator[InProcessFront]:
    port = free_port()
    config = write_settings(tmp_path, {}, supervisor=http_supervisor_table(port, max_request_body_bytes=BODY_LIMIT))
    settings = load_settings(config, environ={"MCP_SUPERVISOR_TOKEN": TOKEN})
    relay = Relay()
    supervisor = Supervisor(settings, host=relay)
    front = Front(supervisor, relay)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        await nursery.start(front.run)
        await nursery.start(HttpHostLink(front, settings.supervisor.front).run)
        yield InProcessFront(supervisor, front, f"http://127.0.0.1:{port}/mcp")
        nursery.cancel_scope.cancel()


# -- guards ------------------------------------------------------------------------------


async def test_requests_without_the_right_bearer_token_get_401_and_learn_nothing(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with serve_front_in_process(tmp_path) as served, httpx2.AsyncClient() as http:
            served.publish("secret_tool")
            for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                response = await http.post(served.url, json=INITIALIZE, headers={**MCP_HEADERS, **auth})
                assert response.status_code == 401, auth
                assert response.headers["www-authenticate"] == "Bearer"
                assert "secret_tool" not in response.text
            async with open_http_host(served.url, TOKEN) as host:
                assert await host.tool_names() == ["mcp__local__secret_tool"]


async def test_a_foreign_host_or_origin_is_refused_even_with_the_token(tmp_path: Path) -> None:
    auth = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
    with trio.fail_after(10):
        async with serve_front_in_process(tmp_path) as served, httpx2.AsyncClient() as http:
            rebinding = await http.post(served.url, json=INITIALIZE, headers={**auth, "Host": "evil.example"})
            assert rebinding.status_code == 421
            port_only = served.url.split("//")[1].split("/")[0].split(":")[1]
            dns_alias = await http.post(
                served.url, json=INITIALIZE, headers={**auth, "Host": f"evil.example:{port_only}"}
            )
            assert dns_alias.status_code == 421
            origin = await http.post(served.url, json=INITIALIZE, headers={**auth, "Origin": "http://evil.example"})
            assert origin.status_code == 403
            local = await http.post(served.url, json=INITIALIZE, headers={**auth, "Origin": "http://localhost:3000"})
            assert local.status_code == 200


async def test_an_oversized_body_gets_413_whether_declared_or_streamed(tmp_path: Path) -> None:
    auth = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
    big = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "' + b"x" * BODY_LIMIT + b'"}}'

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 1024):
            yield big[start : start + 1024]

    with trio.fail_after(10):
        async with serve_front_in_process(tmp_path) as served, httpx2.AsyncClient() as http:
            declared = await http.post(served.url, content=big, headers=auth)
            assert declared.status_code == 413
            streamed = await http.post(served.url, content=chunks(), headers=auth)
            assert "content-length" not in streamed.request.headers
            assert streamed.status_code == 413
            small = await http.post(served.url, json=INITIALIZE, headers=auth)
            assert small.status_code == 200


async def test_other_paths_are_404_after_auth(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with serve_front_in_process(tmp_path) as served, httpx2.AsyncClient() as http:
            elsewhere = served.url.replace("/mcp", "/admin")
            assert (await http.get(elsewhere)).status_code == 401
            assert (await http.get(elsewhere, headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 404


# -- handshake-era hosts -----------------------------------------------------------------


@_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_every_legacy_http_host_gets_the_notice_and_is_forgotten_when_it_leaves(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with serve_front_in_process(tmp_path) as served:
            front = served.front
            async with open_http_host(served.url, TOKEN, mode="legacy") as first:
                async with open_http_host(served.url, TOKEN, mode="legacy") as second:
                    assert first.session.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
                    await wait_until(lambda: front.legacy_hosts == 2, what="two captured legacy connections")
                    await _publish_until_noticed(served, [first, second])
                    assert await second.tool_names() == ["mcp__local__t_1"] or await second.tool_names()
                await wait_until(lambda: front.legacy_hosts == 1, what="the closed session to be forgotten")
            await wait_until(lambda: front.legacy_hosts == 0, what="every closed session to be forgotten")


async def _publish_until_noticed(served: InProcessFront, hosts: list[Host]) -> None:
    """Change the catalog until every host has a notice.

    A handshake-era HTTP host only hears notices once its standalone GET stream is
    open, which it opens on its own schedule after the handshake; a notice sent
    before that is (by the spec) lost, so we retry a bounded number of times.
    """
    for attempt in range(1, 21):
        seen = [host.notices for host in hosts]
        served.publish(f"t_{attempt}")
        with trio.move_on_after(0.5):
            for host, before in zip(hosts, seen, strict=True):
                await host.wait_notice(after=before)
            return
    raise AssertionError(f"notices: {[host.notices for host in hosts]}")


# -- end to end --------------------------------------------------------------------------


@_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_two_http_hosts_of_different_eras_see_a_runtime_tool_and_call_concurrently(tmp_path: Path) -> None:
    port = free_port()
    config = write_settings(tmp_path, {"fx": fixture_server()}, supervisor=http_supervisor_table(port))
    with trio.fail_after(30):
        async with (
            open_http_sidecar(config, port=port, token=TOKEN) as sidecar,
            open_http_host(sidecar.url, TOKEN) as modern,
            open_http_host(sidecar.url, TOKEN, mode="legacy") as legacy,
        ):
            assert modern.session.protocol_version in MODERN_PROTOCOL_VERSIONS
            assert legacy.session.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            assert "mcp__fx__echo" in await modern.tool_names()
            assert "mcp__fx__echo" in await legacy.tool_names()
            # Let the legacy host's standalone stream open before the change (see _publish_until_noticed).
            await trio.sleep(0.3)
            before = (modern.notices, legacy.notices)
            assert text_of(await legacy.call("mcp__fx__add_tool", {"name": "fresh"})) == "added"
            for host, seen in zip((modern, legacy), before, strict=True):
                await host.wait_notice(after=seen)
                assert "mcp__fx__fresh" in await host.tool_names()

            results: dict[str, str] = {}

            async def call(host: Host, key: str, tool: str, arguments: dict[str, Any]) -> None:
                results[key] = text_of(await host.call(tool, arguments))

            started = trio.current_time()
            async with trio.open_nursery() as nursery:
                for i, host in enumerate((modern, legacy)):
                    nursery.start_soon(call, host, f"slow{i}", "mcp__fx__slow", {"seconds": 0.5})
                    nursery.start_soon(call, host, f"fresh{i}", "mcp__fx__fresh", {"text": f"hi{i}"})
            assert trio.current_time() - started < 1.5  # concurrent, not 4 x 0.5 s in a row
            assert results == {"slow0": "done", "slow1": "done", "fresh0": "hi0", "fresh1": "hi1"}
        assert sidecar.exit_code == 0


@_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_sigterm_over_http_lets_running_calls_finish_refuses_new_ones_and_exits_0(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "fx.log"
    grace = 3.0
    config = write_settings(
        tmp_path, {"fx": fixture_server("--log", str(log))}, supervisor=http_supervisor_table(port, grace_sec=grace)
    )
    outcomes: dict[str, str] = {}

    async def call(host: Host, key: str, tool: str, arguments: dict[str, Any]) -> None:
        try:
            result = await host.call(tool, arguments)
        except MCPError as exc:
            outcomes[key] = f"error: {exc.error.message}"
        else:
            outcomes[key] = f"error: {text_of(result)}" if result.is_error else text_of(result)

    with trio.fail_after(30):
        async with open_http_sidecar(config, port=port, token=TOKEN) as sidecar:
            async with (
                open_http_host(sidecar.url, TOKEN, server_may_be_gone=True) as modern,
                open_http_host(sidecar.url, TOKEN, mode="legacy", server_may_be_gone=True) as legacy,
                trio.open_nursery() as nursery,
            ):
                # Hosts list before they call (the SDK client lists on its own after a call
                # to a tool it never saw, and that request would arrive after the SIGTERM).
                for host in (modern, legacy):
                    assert "mcp__fx__slow" in await host.tool_names()
                nursery.start_soon(call, modern, "modern_slow", "mcp__fx__slow", {"seconds": 1.0})
                nursery.start_soon(call, legacy, "legacy_slow", "mcp__fx__slow", {"seconds": 1.0})
                nursery.start_soon(call, modern, "hang", "mcp__fx__hang", {})
                await wait_until(lambda: len(called_tools(log)) == 3, what="three calls to reach the server")
                stopping = trio.current_time()
                sidecar.terminate()
                await trio.sleep(0.2)
                async with httpx2.AsyncClient() as http:
                    late = await http.post(
                        sidecar.url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
                    )
                assert late.status_code == 503
            # The hang call ends when the sidecar closes the sessions at the end of the grace:
            # with an error, or with the SDK client itself failing on the closed connection.
            took = trio.current_time() - stopping
            assert await sidecar.stop() == 0
    assert outcomes["modern_slow"] == "done", outcomes
    assert outcomes["legacy_slow"] == "done"
    assert outcomes.get("hang", "error").startswith("error")
    assert took < grace + 2
