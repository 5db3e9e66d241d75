"""The Front over streamable HTTP: both eras at once, change notices, auth, rebinding, body limit, SIGTERM.

Guard tests run the HTTP front in-process (a Supervisor with no servers whose
Registry the test edits), so they take milliseconds; the end-to-end tests drive
``python -m supervisor run`` with a real fixture server behind it. Every front
listens on port 0: in-process, the link's ``urls`` say where; end to end, the
sidecar's ``host.front listening on URL`` line does.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from supervisor.config.loader import load_settings
from supervisor.host.front import Front
from supervisor.host.http.link import HttpHostLink
from supervisor.host.relay import Relay
from supervisor.root import Supervisor
from tests.fidelity_host import HTTP_CLIENT_LEAKS_ASYNCGENS, Recorder
from tests.sidecar import (
    Host,
    called_tools,
    fixture_server,
    http_supervisor_table,
    open_http_host,
    open_http_sidecar,
    scaled,
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
NOTICE_ATTEMPTS: Final = 10
NOTICE_WAIT_SEC: Final = scaled(2.0)
"""How long one change waits for its notice before the next change is tried (see ``_change_until_noticed``)."""

# The SDK's handshake-era HTTP client drops its httpx2 SSE generators unclosed under trio at
# teardown (a client-side warning, not a sidecar fault); only tests with legacy HTTP hosts get this.
_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@dataclass
class InProcessFront:
    supervisor: Supervisor
    front: Front
    url: str
    link: HttpHostLink

    def publish(self, *names: str) -> None:
        """Make the Registry hold exactly ``names`` (owner ``local``): the Front announces the change."""
        listing = [types.Tool(name=name, input_schema={"type": "object"}) for name in names]
        self.supervisor.registry.swap("local", listing)


@asynccontextmanager
async def serve_front_in_process(
    tmp_path: Path, servers: dict[str, Any] | None = None
) -> AsyncIterator[InProcessFront]:
    table = http_supervisor_table(max_request_body_bytes=BODY_LIMIT)
    config = write_settings(tmp_path, servers or {}, supervisor=table)
    settings = load_settings(config, environ={"MCP_SUPERVISOR_TOKEN": TOKEN})
    relay = Relay()
    supervisor = Supervisor(settings, host=relay)
    front = Front(supervisor, relay)
    link = HttpHostLink({"": front}, settings.supervisor.front)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        await nursery.start(front.run)
        await nursery.start(link.run)
        (url,) = link.urls
        yield InProcessFront(supervisor, front, url, link)
        nursery.cancel_scope.cancel()


async def test_the_http_front_listens_on_the_port_the_os_picked_for_port_0(tmp_path: Path) -> None:
    with trio.fail_after(scaled(10)):
        async with serve_front_in_process(tmp_path) as served:
            port = served.url.split("//")[1].split("/")[0].split(":")[1]
            assert served.url == f"http://127.0.0.1:{port}/mcp"
            assert int(port) != 0
            async with open_http_host(served.url, TOKEN) as host:
                assert await host.tool_names() == []


# -- guards ------------------------------------------------------------------------------


async def test_requests_without_the_right_bearer_token_get_401_and_learn_nothing(tmp_path: Path) -> None:
    with trio.fail_after(scaled(10)):
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
    with trio.fail_after(scaled(10)):
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


@HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_a_2026_hosts_plain_call_is_the_fronts_own_answer_and_any_other_the_sdks(tmp_path: Path) -> None:
    # host.http.posts takes a call that can get no notices (a plain one to this stdio server as bytes, on the
    # splice's HTTP half; one with a log level on the fast path); the host sees the same answers either way.
    recorder = Recorder(name="ada")
    with trio.fail_after(scaled(30)):
        async with serve_front_in_process(tmp_path, {"fx": fixture_server("--fidelity", "--name", "fx")}) as served:
            taken = served.link.fast_calls["/mcp"].taken
            # Calls the SDK serves check Mcp-Param-* headers against the view's schema, not a tools/list per call.
            assert served.front.server.get_tool_input_schema == served.front.view.input_schema
            async with open_http_host(served.url, TOKEN, "auto", **recorder.client_options(Host())) as host:
                await host.wait_tools(lambda names: "mcp__fx__echo" in names)
                before = taken["splice"]
                assert text_of(await host.call("mcp__fx__echo", {"text": "own"})) == "own"
                assert taken["splice"] == before + 1
                with pytest.raises(MCPError) as caught:  # a server's JSON-RPC error passes through, as on the SDK path
                    await host.call("mcp__fx__nope_not_routed_but_prefixed", {})
                assert caught.value.code == types.INVALID_PARAMS
                # Progress: on the splice too (its notices ride the call's event stream, the host's token back).
                before = taken["splice"]
                result = await host.session.call_tool(
                    "mcp__fx__progress", {"steps": 2}, progress_callback=recorder.on_progress
                )
                assert text_of(result) == "progressed 2" and [p for p, _, _ in recorder.progress] == [1, 2]
                assert taken["splice"] == before + 1
            # A host that names a log level: its call's log messages ride the front's own answer, before it.
            async with open_http_host(
                served.url, TOKEN, "auto", log_level="warning", **recorder.client_options(Host())
            ) as logged:
                before = taken["fast"]
                assert text_of(await logged.session.call_tool("mcp__fx__log", {})) == "logged"
                assert taken["fast"] == before + 1
                assert [(m.level, m.data) for m in recorder.logs] == [
                    ("warning", "msg-warning"),
                    ("error", "msg-error"),
                ]


async def test_an_oversized_body_gets_413_whether_declared_or_streamed(tmp_path: Path) -> None:
    auth = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
    big = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "' + b"x" * BODY_LIMIT + b'"}}'

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 1024):
            yield big[start : start + 1024]

    with trio.fail_after(scaled(10)):
        async with serve_front_in_process(tmp_path) as served, httpx2.AsyncClient() as http:
            declared = await http.post(served.url, content=big, headers=auth)
            assert declared.status_code == 413
            streamed = await http.post(served.url, content=chunks(), headers=auth)
            assert "content-length" not in streamed.request.headers
            assert streamed.status_code == 413
            small = await http.post(served.url, json=INITIALIZE, headers=auth)
            assert small.status_code == 200


async def test_other_paths_are_404_after_auth(tmp_path: Path) -> None:
    with trio.fail_after(scaled(10)):
        async with serve_front_in_process(tmp_path) as served, httpx2.AsyncClient() as http:
            elsewhere = served.url.replace("/mcp", "/admin")
            assert (await http.get(elsewhere)).status_code == 401
            assert (await http.get(elsewhere, headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 404


# -- handshake-era hosts -----------------------------------------------------------------


@_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_every_legacy_http_host_gets_the_notice_and_is_forgotten_when_it_leaves(tmp_path: Path) -> None:
    with trio.fail_after(scaled(20)):
        async with serve_front_in_process(tmp_path) as served:
            front = served.front
            async with open_http_host(served.url, TOKEN, mode="legacy") as first:
                async with open_http_host(served.url, TOKEN, mode="legacy") as second:
                    assert first.session.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
                    await wait_until(lambda: front.legacy_hosts == 2, what="two captured legacy connections")
                    published = await _publish_until_noticed(served, [first, second])
                    for host in (first, second):
                        assert await host.tool_names() == [f"mcp__local__{published}"]
                await wait_until(lambda: front.legacy_hosts == 1, what="the closed session to be forgotten")
            await wait_until(lambda: front.legacy_hosts == 0, what="every closed session to be forgotten")


async def _publish_until_noticed(served: InProcessFront, hosts: list[Host]) -> str:
    """Replace the catalog with one new tool until every host has a notice; return that tool's raw name.

    A handshake-era HTTP host only hears notices once its standalone GET stream is
    open, which it opens on its own schedule after the handshake; a notice sent
    before that is (by the spec) lost, so we retry a bounded number of times.
    """

    async def publish(name: str) -> None:
        served.publish(name)

    return await _change_until_noticed(hosts, publish, prefix="mcp__local__")


async def _change_until_noticed(hosts: list[Host], change: Callable[[str], Awaitable[None]], *, prefix: str) -> str:
    """Make ``change(name)`` with a new name until every host got a notice that shows it; return the last name.

    Nothing tells the test when a handshake-era HTTP host's standalone stream is
    open (a notice sent before is lost), so this retries with a bound instead. A
    notice counts only if the listing after it holds ``prefix + name``: a late
    notice of an earlier change (the initial catalog's, say) proves nothing.
    """
    for attempt in range(1, NOTICE_ATTEMPTS + 1):
        name = f"t_{attempt}"
        seen = [host.notices for host in hosts]
        for host in hosts:
            await host.tool_names()  # a host is told of changes to what it holds (I22): it lists first
        await change(name)
        with trio.move_on_after(NOTICE_WAIT_SEC):
            for host, before in zip(hosts, seen, strict=True):
                await _wait_notice_showing(host, before, prefix + name)
            return name
    raise AssertionError(f"no notice reached every host after {NOTICE_ATTEMPTS} changes: {[h.notices for h in hosts]}")


async def _wait_notice_showing(host: Host, before: int, public_name: str) -> None:
    """Wait for a change notice after the ``before``-th after which the host's listing holds ``public_name``."""
    while True:
        await host.wait_notice(after=before)
        before = host.notices
        if public_name in await host.tool_names():
            return


# -- end to end --------------------------------------------------------------------------


@_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_two_http_hosts_of_different_eras_see_a_runtime_tool_and_call_concurrently(tmp_path: Path) -> None:
    config = write_settings(
        tmp_path, {"fx": fixture_server("--tools", "echo,add_tool,meet")}, supervisor=http_supervisor_table()
    )
    with trio.fail_after(scaled(60)):
        async with (
            open_http_sidecar(config, token=TOKEN) as sidecar,
            open_http_host(sidecar.url, TOKEN) as modern,
            open_http_host(sidecar.url, TOKEN, mode="legacy") as legacy,
        ):
            assert modern.session.protocol_version in MODERN_PROTOCOL_VERSIONS
            assert legacy.session.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            assert "mcp__fx__echo" in await modern.tool_names()
            assert "mcp__fx__echo" in await legacy.tool_names()

            async def add_tool(name: str) -> None:
                assert text_of(await legacy.call("mcp__fx__add_tool", {"name": name})) == "added"

            fresh = f"mcp__fx__{await _change_until_noticed([modern, legacy], add_tool, prefix='mcp__fx__')}"
            for host in (modern, legacy):
                assert fresh in await host.tool_names()

            results: dict[str, str] = {}

            async def call(host: Host, key: str, tool: str, arguments: dict[str, Any]) -> None:
                results[key] = text_of(await host.call(tool, arguments))

            # `meet` answers only once both hosts' calls wait at the fixture together: a
            # sidecar that ran them one after the other would hang here, not be slow.
            with trio.fail_after(scaled(10)):
                async with trio.open_nursery() as nursery:
                    for i, host in enumerate((modern, legacy)):
                        nursery.start_soon(call, host, f"meet{i}", "mcp__fx__meet", {"parties": 2})
                        nursery.start_soon(call, host, f"fresh{i}", fresh, {"text": f"hi{i}"})
            assert results == {"meet0": "met", "meet1": "met", "fresh0": "hi0", "fresh1": "hi1"}
        assert sidecar.exit_code == 0


@_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_sigterm_over_http_lets_running_calls_finish_refuses_new_ones_and_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    grace = scaled(3.0)
    config = write_settings(
        tmp_path, {"fx": fixture_server("--log", str(log))}, supervisor=http_supervisor_table(grace_sec=3.0)
    )
    outcomes: dict[str, str] = {}

    async def call(host: Host, key: str, tool: str, arguments: dict[str, Any]) -> None:
        try:
            result = await host.call(tool, arguments)
        except MCPError as exc:
            outcomes[key] = f"error: {exc.error.message}"
        else:
            outcomes[key] = f"error: {text_of(result)}" if result.is_error else text_of(result)

    refusal: dict[str, int | str] = {}
    with trio.fail_after(scaled(60)):
        async with open_http_sidecar(config, token=TOKEN) as sidecar, trio.open_nursery() as outside:
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
                # Outside the hosts' block: when the sidecar closes their sessions, the
                # hosts end their block early, and a check in there would be skipped.
                outside.start_soon(_try_a_late_request, sidecar.url, refusal)
            # The hang call ends when the sidecar closes the sessions at the end of the grace:
            # with an error, or with the SDK client itself failing on the closed connection.
            took = trio.current_time() - stopping
        assert await sidecar.stop() == 0
    assert refusal == {"late": 503}
    assert outcomes["modern_slow"] == "done", outcomes
    assert outcomes["legacy_slow"] == "done"
    assert outcomes.get("hang", "error").startswith("error")
    assert took < grace + scaled(2)


@_HANDSHAKE_HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_a_second_signal_over_http_ends_the_drain_at_once_and_still_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    config = write_settings(
        tmp_path, {"fx": fixture_server("--log", str(log))}, supervisor=http_supervisor_table(grace_sec=60.0)
    )
    with trio.fail_after(scaled(60)):
        async with (
            open_http_sidecar(config, token=TOKEN) as sidecar,
            open_http_host(sidecar.url, TOKEN, server_may_be_gone=True) as host,
            trio.open_nursery() as calls,
        ):

            async def hang() -> None:
                with suppress(MCPError):
                    await host.call("mcp__fx__hang", {})

            assert "mcp__fx__hang" in await host.tool_names()
            calls.start_soon(hang)
            await wait_until(lambda: called_tools(log) == ["hang"], what="the call to reach the server")
            sidecar.terminate()
            async with httpx2.AsyncClient() as http:
                await _wait_refusing(http, sidecar.url)  # the first signal is in: the drain has begun
            sidecar.process.send_signal(signal.SIGTERM)
            with trio.fail_after(scaled(10)):  # the drain alone would wait the 60 s grace
                await sidecar.process.wait()
            assert await sidecar.stop() == 0


async def _try_a_late_request(url: str, refusal: dict[str, int | str]) -> None:
    """Once the stopping sidecar refuses requests, try a real one; record its status (or why there was none)."""
    async with httpx2.AsyncClient() as http:
        try:
            await _wait_refusing(http, url)
            late = await http.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"})
        except (httpx2.TransportError, AssertionError) as exc:
            refusal["late"] = repr(exc)
        else:
            refusal["late"] = late.status_code


async def _wait_refusing(http: httpx2.AsyncClient, url: str) -> None:
    """Poll (bounded) until the front answers 503; before the stop, the unauthenticated probe gets 401."""
    with trio.move_on_after(scaled(10)):
        while (status := (await http.get(url)).status_code) != 503:
            assert status == 401, status
            # Polling another process's state: there is nothing to wait on.
            await trio.sleep(0.02)
        return
    raise AssertionError("the sidecar did not start refusing requests after SIGTERM")
