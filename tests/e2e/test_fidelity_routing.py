"""Fidelity, the hard parts (DESIGN I13): whose host gets what, cancellation, subscriptions over reconnects.

* Two hosts on one HTTP front: sampling and progress raised by host A's call
  reach A and never B.
* A server→client request that cannot be attributed to exactly one call is
  refused with an error to the upstream, never guessed; a host without the
  capability answers as a direct client would.
* Host cancellation and ``tool_timeout_sec`` cancel the upstream request.
* Resource subscriptions survive an upstream reconnect, with no update lost or doubled.
* A 2026-era upstream that never acknowledges ``subscriptions/listen`` still
  becomes ready, without change notices.
* URL elicitation and its completion notice reach the host that was asked.
* ``namespace = false``, ``protocol`` pins, ``ping``, and a token-less loopback HTTP front.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import MCPError
from mcp.client.client import ConnectMode

from supervisor.upstream.http_calls import ID_PREFIX as HTTP_CALL_ID_PREFIX
from tests.fidelity_host import (
    FRONTS,
    HOST_ERAS,
    HTTP_CLIENT_LEAKS_ASYNCGENS,
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
    open_http_fixture,
    open_http_host,
    open_http_sidecar,
    read_log,
    run_cli,
    scaled,
    text_of,
    wait_until,
    write_settings,
)

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(60)
HELLO = "fixture://static/hello"


def _fx(log: Path, *args: str, **table: Any) -> dict[str, Any]:
    return fixture_server("--fidelity", "--name", "fx", "--log", str(log), *args, **table)


def _events(log: Path, event: str) -> list[dict[str, Any]]:
    return [e for e in read_log(log) if e["event"] == event]


async def _ready(host: Host) -> None:
    await host.wait_tools(lambda names: "mcp__fx__echo" in names)


@HTTP_CLIENT_LEAKS_ASYNCGENS
@pytest.mark.parametrize("upstream", UPSTREAM_ERAS)
async def test_sampling_and_progress_of_host_a_never_reach_host_b(tmp_path: Path, upstream: tuple[str, ...]) -> None:
    """Concurrent calls of two hosts, over an HTTP upstream (each call's traffic rides its own stream)."""
    alice, bob = Recorder(name="alice"), Recorder(name="bob")
    log = tmp_path / "fx.jsonl"
    with trio.fail_after(BOUND_SEC):
        async with open_http_fixture("--fidelity", "--name", "fx", *upstream, log=log) as fixture:
            config = write_settings(tmp_path, {"fx": {"url": fixture.url}}, supervisor=http_supervisor_table())
            await _two_hosts_call_at_once(config, alice, bob)
    # To a 2026-era server, the fast path's own POST (upstream.http_calls) carries every call: the 2026-era host's
    # sample call and its retry, the handshake-era host's call and retry (the sidecar runs its round), and both
    # hosts' calls with a progress token (issue 47); a handshake-era server's POSTs belong to its session, and
    # stay the SDK's.
    calls = [e for e in _events(log, "request") if e["method"] == "tools/call"]
    own = [e for e in calls if str(e["id"]).startswith(HTTP_CALL_ID_PREFIX)]
    assert [e["tool"] for e in own] == ([] if upstream else [e["tool"] for e in calls])
    assert upstream or sorted({e["tool"] for e in calls}) == ["progress", "sample"]


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("mode", HOST_ERAS)
async def test_a_hosts_calls_to_a_2026_http_server_take_our_own_post_with_logs_first_and_rounds_asked_of_it(
    tmp_path: Path, mode: ConnectMode, front: str
) -> None:
    """The fast path's own POST (``upstream.http_calls``) reads the call's event stream: its logs, then its answer.

    From a handshake-era host too (issue 29, round 20: ``host.stdio.tasks``, ``host.http.sessions``):
    the log level it set goes upstream with each call, the input rounds of sampling, elicitation and roots are run
    by the sidecar and asked of this host, and the result has the handshake shape (no ``serverInfo`` stamp).
    """
    recorder = Recorder(name="ada")
    log = tmp_path / "fx.jsonl"
    options: dict[str, Any] = {"log_level": "warning", **recorder.client_options(Host())}
    with trio.fail_after(BOUND_SEC):
        async with open_http_fixture("--fidelity", "--name", "fx", log=log) as fixture, AsyncExitStack() as stack:
            servers = {"fx": {"url": fixture.url}}
            if front == "stdio":
                host = await stack.enter_async_context(open_host(write_settings(tmp_path, servers), mode, **options))
            else:
                config = write_settings(tmp_path, servers, supervisor=http_supervisor_table())
                sidecar = await stack.enter_async_context(open_http_sidecar(config))
                host = await stack.enter_async_context(open_http_host(sidecar.url, sidecar.token, mode, **options))
            await _ready(host)
            if not host.modern:
                await host.session.session.send_request(
                    types.SetLevelRequest(params=types.SetLevelRequestParams(level="warning")), types.EmptyResult
                )
            logged = await host.session.call_tool("mcp__fx__log", {})
            assert text_of(logged) == "logged"
            # Before the result: the host has them as soon as the call returns, no wait.
            assert [(m.level, m.logger, m.data) for m in recorder.logs] == [
                ("warning", "fx.fx", "msg-warning"),
                ("error", "fx.fx", "msg-error"),
            ]
            stamp = (logged.meta or {}).get("io.modelcontextprotocol/serverInfo")
            if host.modern:  # ours; a handshake-era host's result has none (the server's is never passed on)
                assert isinstance(stamp, dict) and stamp["name"] == "mcp-supervisor"
            else:
                assert stamp is None
            sampled = await host.session.call_tool("mcp__fx__sample", {"text": "hi"})
            assert text_of(sampled) == "sampled: model of ada (ada-model)" and recorder.samples == ["hi"]
            elicited = await host.session.call_tool("mcp__fx__elicit", {})
            assert text_of(elicited) == 'elicited: accept {"name": "ada"}'
            assert text_of(await host.session.call_tool("mcp__fx__roots", {})) == f"roots: {ROOT_URI}"
    calls = [e for e in _events(log, "request") if e["method"] == "tools/call"]
    # A 2026-era host runs each round itself, the sidecar a handshake-era host's: either way, every request of
    # them is our own POST (a 2026-era host's retry takes the fast path too: issue 47).
    assert [e["tool"] for e in calls] == ["log", "sample", "sample", "elicit", "elicit", "roots", "roots"]
    own = [e["tool"] for e in calls if str(e["id"]).startswith(HTTP_CALL_ID_PREFIX)]
    assert own == [e["tool"] for e in calls]


async def _two_hosts_call_at_once(config: Path, alice: Recorder, bob: Recorder) -> None:
    """A handshake-era and a 2026-era host each sample and report progress through one sidecar, at once."""
    async with (
        open_http_sidecar(config) as sidecar,
        open_http_host(sidecar.url, sidecar.token, "legacy", **alice.client_options(Host())) as a,
        open_http_host(sidecar.url, sidecar.token, "auto", **bob.client_options(Host())) as b,
    ):
        await _ready(a)
        await _ready(b)
        # Both hosts call at once: each call's sampling and progress go to its own host.
        async with trio.open_nursery() as nursery:
            results: dict[str, str] = {}

            async def call(host: Host, recorder: Recorder) -> None:
                sampled = await host.session.call_tool("mcp__fx__sample", {"text": recorder.name})
                results[recorder.name] = text_of(sampled)
                progressed = await host.session.call_tool(
                    "mcp__fx__progress", {"steps": 2}, progress_callback=recorder.on_progress
                )
                assert text_of(progressed) == "progressed 2"

            nursery.start_soon(call, a, alice)
            nursery.start_soon(call, b, bob)
        assert results == {
            "alice": "sampled: model of alice (alice-model)",
            "bob": "sampled: model of bob (bob-model)",
        }
        assert (alice.samples, bob.samples) == (["alice"], ["bob"])
        assert [p for p, _, _ in alice.progress] == [1, 2]
        assert [p for p, _, _ in bob.progress] == [1, 2]


@pytest.mark.parametrize("mode", HOST_ERAS)
async def test_a_request_raised_while_two_calls_are_in_flight_over_stdio_is_refused_not_guessed(
    tmp_path: Path, mode: ConnectMode
) -> None:
    # Both calls cross the wire splice (issue 29): it counts them in flight, so nothing is guessed.
    log = tmp_path / "fx.jsonl"
    config = write_settings(tmp_path, {"fx": _fx(log, "--legacy-only")})
    recorder = Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode, **recorder.client_options(Host())) as host:
            await _ready(host)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(host.session.call_tool, "mcp__fx__slow", {"seconds": 3})
                await wait_until(lambda: "slow" in [e.get("tool") for e in _events(log, "request")], what="slow")
                refused = await host.session.call_tool("mcp__fx__sample", {"text": "whose?"})
            assert refused.is_error
            assert "cannot tell which host request sampling/createMessage belongs to" in text_of(refused)
            assert recorder.samples == [], "nobody was asked"
            # With the slow call done, the same request is attributed again.
            again = await host.session.call_tool("mcp__fx__sample", {"text": "mine"})
            assert text_of(again) == "sampled: model of ada (ada-model)"


@pytest.mark.parametrize("upstream", UPSTREAM_ERAS)
async def test_a_host_without_sampling_answers_the_upstream_as_a_direct_client_would(
    tmp_path: Path, upstream: tuple[str, ...]
) -> None:
    config = write_settings(tmp_path, {"fx": _fx(tmp_path / "fx.jsonl", *upstream)})
    recorder = Recorder(name="ada", with_sampling=False)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, "legacy", **recorder.client_options(Host())) as host:
            await _ready(host)
            outcome: str
            try:
                result = await host.session.call_tool("mcp__fx__sample", {"text": "hi"})
                outcome = text_of(result)
            except MCPError as exc:  # a 2026-era upstream's round ends in the driver's error
                outcome = exc.error.message
            assert "does not support sampling" in outcome


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("upstream", UPSTREAM_ERAS)
@pytest.mark.parametrize("mode", HOST_ERAS)
async def test_host_cancellation_and_the_tool_timeout_cancel_the_upstream_request(
    tmp_path: Path, mode: ConnectMode, upstream: tuple[str, ...], front: str
) -> None:
    # fx's timeout is far off, so only the host's cancellation can end its call in time; fy's is short.
    fx_log, fy_log = tmp_path / "fx.jsonl", tmp_path / "fy.jsonl"
    servers = {
        "fx": _fx(fx_log, *upstream, tool_timeout_sec=scaled(60)),
        "fy": fixture_server("--name", "fy", "--log", str(fy_log), *upstream, tool_timeout_sec=scaled(2)),
    }
    with trio.fail_after(BOUND_SEC):
        if front == "stdio":
            async with open_host(write_settings(tmp_path, servers), mode) as host:
                await _exercise_cancellation(host, fx_log, fy_log)
        else:
            config = write_settings(tmp_path, servers, supervisor=http_supervisor_table())
            async with (
                open_http_sidecar(config) as sidecar,
                open_http_host(sidecar.url, sidecar.token, mode) as host,
            ):
                await _exercise_cancellation(host, fx_log, fy_log)


async def _exercise_cancellation(host: Host, fx_log: Path, fy_log: Path) -> None:
    await host.wait_tools(lambda names: {"mcp__fx__hang", "mcp__fy__hang"} <= set(names))
    with trio.move_on_after(scaled(1.0)):  # the host gives up on its call
        await host.session.call_tool("mcp__fx__hang", {})
    await wait_until(
        lambda: len(_events(fx_log, "call_ended")) == 1, what="the upstream call to be cancelled", bound_sec=scaled(20)
    )
    timed_out = await host.session.call_tool("mcp__fy__hang", {})  # tool_timeout_sec = 2
    assert timed_out.is_error
    assert "tool_timeout_sec" in text_of(timed_out)
    await wait_until(lambda: len(_events(fy_log, "call_ended")) == 1, what="the timed-out call to be cancelled")


@pytest.mark.parametrize("upstream", UPSTREAM_ERAS)
@pytest.mark.parametrize("mode", HOST_ERAS)
async def test_subscriptions_survive_an_upstream_reconnect_with_no_update_lost_or_doubled(
    tmp_path: Path, mode: ConnectMode, upstream: tuple[str, ...]
) -> None:
    log = tmp_path / "fx.jsonl"
    config = write_settings(tmp_path, {"fx": _fx(log, *upstream)})
    recorder = Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode, **recorder.client_options(Host())) as host:
            await _ready(host)
            async with listening_for_updates(host, [HELLO]) if host.modern else _subscribed(host, HELLO):
                await host.session.call_tool("mcp__fx__touch", {"uri": HELLO})
                await recorder.wait_for(lambda: recorder.updated == [HELLO], what="the first update")
                starts = len(_events(log, "start"))
                crashed = await host.session.call_tool("mcp__fx__crash", {})
                assert crashed.is_error
                await wait_until(lambda: len(_events(log, "start")) == starts + 1, what="the restart")
                await host.wait_call_succeeds("mcp__fx__echo", {"text": "back"})
                # The new generation is subscribed again before the sidecar answers calls with it.
                with trio.move_on_after(scaled(10)):
                    while True:
                        await host.session.call_tool("mcp__fx__touch", {"uri": HELLO})
                        with trio.move_on_after(scaled(0.5)):
                            await recorder.wait_for(lambda: len(recorder.updated) >= 2, what="the second update")
                            break
                touches = len(_events(log, "touched"))
                assert recorder.updated == [HELLO] * touches, "one update per touch, none lost, none doubled"


class _subscribed:
    """A handshake-era host's ``resources/subscribe`` … ``resources/unsubscribe``."""

    def __init__(self, host: Host, uri: str) -> None:
        self._host, self._uri = host, uri

    async def __aenter__(self) -> None:
        await self._host.session.session.send_request(
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=self._uri)), types.EmptyResult
        )

    async def __aexit__(self, *exc_info: object) -> None:
        await self._host.session.session.send_request(
            types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=self._uri)), types.EmptyResult
        )


async def test_an_upstream_that_never_acknowledges_listen_is_served_without_change_notices(tmp_path: Path) -> None:
    config = write_settings(tmp_path, {"fx": _fx(tmp_path / "fx.jsonl", "--listen-never-acks")})
    with trio.fail_after(BOUND_SEC):
        done = await run_cli("tools", "--config", str(config))
    assert done.code == 0, done.stderr
    assert "mcp__fx__echo" in done.stdout
    assert "no change notices" in done.stderr + done.stdout


async def test_url_elicitation_and_its_completion_notice_reach_the_host_that_was_asked(tmp_path: Path) -> None:
    config = write_settings(tmp_path, {"fx": _fx(tmp_path / "fx.jsonl", "--legacy-only")})
    recorder = Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, "legacy", **recorder.client_options(Host())) as host:
            await _ready(host)
            result = await host.session.call_tool("mcp__fx__elicit_url", {})
            assert text_of(result) == "url-elicited: accept null" or text_of(result).startswith("elicited: accept")
            assert recorder.elicitations == ["url"]
            await recorder.wait_for(lambda: recorder.elicitations_completed == ["e-1"], what="elicitation/complete")


async def test_namespace_false_exposes_raw_names_and_a_legacy_pin_skips_discovery(tmp_path: Path) -> None:
    log = tmp_path / "fx.jsonl"
    config = write_settings(tmp_path, {"fx": _fx(log, namespace=False, protocol="legacy")})
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, "legacy") as host:
            await host.wait_tools(lambda names: "echo" in names)
            assert text_of(await host.call("echo", {"text": "raw"})) == "raw"
            prompts = await host.session.list_prompts(cache_mode="bypass")
            assert [p.name for p in prompts.prompts] == ["greet"]
            got = await host.session.get_prompt("greet", {"name": "Ada"})
            assert got.messages[0].content == types.TextContent(text="Hello, Ada! (greet)")
            # ping is answered by the sidecar itself
            await host.session.session.send_request(types.PingRequest(), types.EmptyResult)
    methods = [e.get("method") for e in _events(log, "request")]
    assert "initialize" in methods
    assert "server/discover" not in methods


@HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_a_loopback_http_front_may_run_without_a_token_when_allowed(tmp_path: Path) -> None:
    table = http_supervisor_table(allow_unauthenticated_loopback=True)
    del table["front"]["token"]
    config = write_settings(tmp_path, {"fx": _fx(tmp_path / "fx.jsonl")}, supervisor=table)
    with trio.fail_after(BOUND_SEC):
        async with open_http_sidecar(config) as sidecar, open_http_host(sidecar.url, "", "auto") as host:
            await _ready(host)
            assert text_of(await host.call("mcp__fx__echo", {"text": "open"})) == "open"


async def test_the_sidecars_own_warnings_about_a_server_reach_hosts_that_set_a_log_level(tmp_path: Path) -> None:
    config = write_settings(tmp_path, {"fx": _fx(tmp_path / "fx.jsonl", "--legacy-only")})
    recorder = Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, "legacy", **recorder.client_options(Host())) as host:
            await _ready(host)
            await host.session.session.send_request(
                types.SetLevelRequest(params=types.SetLevelRequestParams(level="warning")), types.EmptyResult
            )
            assert (await host.session.call_tool("mcp__fx__crash", {})).is_error

            # Other own warnings may come first (the crash can cut the level's own upstream setLevel short).
            def ended() -> list[types.LoggingMessageNotificationParams]:
                own = [m for m in recorder.logs if m.logger == "mcp-supervisor"]
                return [m for m in own if "generation=1 ended" in str(m.data)]

            await recorder.wait_for(lambda: bool(ended()), what="the sidecar's own warning")
            assert ended()[0].level == "warning"
            assert str(ended()[0].data).startswith("server=fx generation=1 ended")


@HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_sidecar_shutdown_cancels_the_upstream_request_after_the_grace(tmp_path: Path) -> None:
    log = tmp_path / "fx.jsonl"
    config = write_settings(tmp_path, {"fx": _fx(log)}, supervisor=http_supervisor_table(grace_sec=1))
    with trio.fail_after(BOUND_SEC):
        async with (
            open_http_sidecar(config) as sidecar,
            open_http_host(sidecar.url, sidecar.token, "legacy", server_may_be_gone=True) as host,
        ):
            await _ready(host)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(host.session.call_tool, "mcp__fx__hang", {})
                await wait_until(lambda: "hang" in [e.get("tool") for e in _events(log, "request")], what="hang")
                sidecar.terminate()
                await sidecar.stop()
                nursery.cancel_scope.cancel()
        # Checked out here: the host's block may end early once the sidecar closes its session.
        assert sidecar.exit_code == 0
        assert len(_events(log, "call_ended")) == 1, "the upstream request was cancelled, not left hanging"


async def test_a_handshake_hosts_roots_list_changed_reaches_every_handshake_server(tmp_path: Path) -> None:
    # Roots belong to the host; a server that cached them must hear that they changed. The
    # 2026 era has no such notice (roots travel with each request), so only handshake
    # servers are told.
    legacy_log, modern_log = tmp_path / "legacy.jsonl", tmp_path / "modern.jsonl"
    config = write_settings(
        tmp_path,
        {"old": _fx(legacy_log, "--legacy-only", "--name", "old"), "new": _fx(modern_log, "--name", "new")},
    )
    recorder = Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, "legacy", **recorder.client_options(Host())) as host:
            await host.wait_tools(lambda names: "mcp__old__roots" in names and "mcp__new__roots" in names)
            # The Client's helper is deprecated (2026 has no such notice); a handshake host still sends it.
            await host.session.session.send_notification(types.RootsListChangedNotification())
            await wait_until(lambda: bool(_events(legacy_log, "roots_list_changed")), what="the roots notice")
            # The modern server answered a call after the notice went out: it was never sent one.
            assert text_of(await host.call("mcp__new__echo", {"text": "after"})) == "after"
    assert len(_events(legacy_log, "roots_list_changed")) == 1
    assert _events(modern_log, "roots_list_changed") == []
