"""A one-shot host's first request: every request that routes to a server waits for the first attempts (issue 31).

``supervisor.host.routing`` holds the rule and the table of methods. The fast
test here checks that every request method the Front registers is in exactly
one row of that table; the end-to-end test sends each routed request as the
host's first, to a sidecar whose only server starts only once the sidecar has
found nothing to route it to and waits (the fixture's ``--start-gate``, a named
pipe, opened on the sidecar's debug line saying so), and checks it is answered
as the server answers, never with "unknown".
"""

from __future__ import annotations

import os
import typing
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import mcp_types as types
import pytest
import trio
from mcp import MCPError
from mcp.client.client import ConnectMode

from supervisor.config.models import Settings
from supervisor.host.front import Front
from supervisor.host.relay import Relay
from supervisor.host.routing import LIST_METHODS, LOCAL_METHODS, ROUTED_METHODS
from supervisor.root import Supervisor
from tests.fidelity_host import Recorder, listening_for_updates
from tests.sidecar import Host, fixture_server, open_host, read_log, scaled, text_of, write_settings

BOUND_SEC: Final = scaled(60)
HELLO: Final = "fixture://static/hello"
CONCURRENT_SIDECARS: Final = 6
"""Sidecars started at once, each with its server: enough to overlap the start delays, few enough for 2 cores."""


def test_every_request_method_the_front_registers_has_exactly_one_routing_rule() -> None:
    front = Front(Supervisor(Settings()), Relay())
    every_method = {model.model_fields["method"].default for model in typing.get_args(types.ClientRequest)}
    registered = {method for method in every_method if front.server.get_request_handler(method) is not None}
    rows = (ROUTED_METHODS, LIST_METHODS, LOCAL_METHODS)
    assert sum(map(len, rows)) == len(set().union(*rows)), "a method is in two rows"
    # initialize and server/discover are the SDK's own, not handlers: they are local by nature.
    assert registered - {"initialize", "server/discover"} == set().union(*rows) - {"initialize", "server/discover"}
    assert set(FIRST_REQUESTS) == ROUTED_METHODS, "every routed method has its end-to-end case below"


Check = Callable[[Host, Recorder, Path], Awaitable[None]]


async def _call_tool(host: Host, recorder: Recorder, log: Path) -> None:
    assert text_of(await host.session.call_tool("mcp__fx__echo", {"text": "first"})) == "first"


async def _get_prompt(host: Host, recorder: Recorder, log: Path) -> None:
    got = await host.session.get_prompt("mcp__fx__greet", {"name": "Ada"})
    assert got.messages[0].content == types.TextContent(text="Hello, Ada! (greet)")


async def _read_listed(host: Host, recorder: Recorder, log: Path) -> None:
    hello = await host.session.read_resource(HELLO, cache_mode="bypass")
    assert hello.contents[0] == types.TextResourceContents(uri=HELLO, text="hello from fx")


async def _read_by_template(host: Host, recorder: Recorder, log: Path) -> None:
    seven = await host.session.read_resource("fixture://note/7", cache_mode="bypass")
    assert isinstance(seven.contents[0], types.TextResourceContents)
    assert seven.contents[0].text == "note 7 from fx"


async def _read_by_the_one_resource_server(host: Host, recorder: Recorder, log: Path) -> None:
    # Neither listed nor matching a template: the one server that offers resources answers, with its own error.
    with pytest.raises(MCPError) as raised:
        await host.session.read_resource("fixture://elsewhere", cache_mode="bypass")
    assert raised.value.message == "Unknown resource: fixture://elsewhere"


async def _subscribe(host: Host, recorder: Recorder, log: Path) -> None:
    await host.session.session.send_request(
        types.SubscribeRequest(params=types.SubscribeRequestParams(uri=HELLO)), types.EmptyResult
    )
    # Answered once the server has the subscription: an update sent right after it reaches the host.
    assert text_of(await host.session.call_tool("mcp__fx__touch", {"uri": HELLO})) == "touched"
    await recorder.wait_for(lambda: recorder.updated == [HELLO], what="resources/updated for the first subscribe")


async def _complete_prompt(host: Host, recorder: Recorder, log: Path) -> None:
    done = await host.session.complete(types.PromptReference(name="mcp__fx__greet"), {"name": "name", "value": "al"})
    assert done.completion.values == ["alice", "albert"]


async def _complete_template(host: Host, recorder: Recorder, log: Path) -> None:
    note = types.ResourceTemplateReference(uri="fixture://note/{id}")
    assert (await host.session.complete(note, {"name": "id", "value": ""})).completion.values == ["1", "2", "3"]


async def _listen(host: Host, recorder: Recorder, log: Path) -> None:
    async with listening_for_updates(host, [HELLO]):  # acknowledged once the server has the subscription
        assert text_of(await host.session.call_tool("mcp__fx__touch", {"uri": HELLO})) == "touched"
        await recorder.wait_for(lambda: recorder.updated == [HELLO], what="resources/updated for the first listen")


FIRST_REQUESTS: Final[dict[str, list[tuple[str, ConnectMode, Check]]]] = {
    "tools/call": [("tools/call", "auto", _call_tool), ("tools/call, handshake host", "legacy", _call_tool)],
    "prompts/get": [("prompts/get", "auto", _get_prompt)],
    "resources/read": [
        ("resources/read, listed", "auto", _read_listed),
        ("resources/read, by template", "auto", _read_by_template),
        ("resources/read, by the one resource server", "legacy", _read_by_the_one_resource_server),
    ],
    "resources/subscribe": [("resources/subscribe", "legacy", _subscribe)],
    "completion/complete": [
        ("completion/complete, by prompt", "auto", _complete_prompt),
        ("completion/complete, by template", "legacy", _complete_template),
    ],
    "subscriptions/listen": [("subscriptions/listen with a resource URI", "auto", _listen)],
}


@pytest.mark.e2e
async def test_each_routed_request_sent_first_is_answered_as_the_slow_starting_server_answers(tmp_path: Path) -> None:
    cases = [case for per_method in FIRST_REQUESTS.values() for case in per_method]
    failures: dict[str, str] = {}
    slots = trio.CapacityLimiter(CONCURRENT_SIDECARS)

    async def run_case(index: int, name: str, mode: ConnectMode, check: Check) -> None:
        async with slots:
            directory = tmp_path / f"case{index}"
            directory.mkdir()
            log, gate = directory / "fx.jsonl", directory / "gate"
            os.mkfifo(gate)
            # Held open (read-write never blocks on a FIFO): the byte written to open the gate stays in
            # the pipe until the server reads it, whether the server has opened its end yet or not.
            gate_fd = os.open(gate, os.O_RDWR | os.O_NONBLOCK)
            server = fixture_server("--fidelity", "--name", "fx", "--log", str(log), "--start-gate", str(gate))
            config = write_settings(directory, {"fx": server})
            recorder = Recorder(name=f"host{index}")
            try:
                async with open_host(config, mode, **recorder.client_options(Host())) as host, trio.open_nursery() as n:
                    recorder.host = host  # type: ignore[attr-defined]
                    n.start_soon(check, host, recorder, log)
                    # The server may start only once the sidecar has routed the request, found nothing
                    # and is waiting for the first attempts (its debug line): so the request certainly
                    # came while the server was still starting. Without the wait, the check fails first.
                    await host.log.wait_line(r"is not routed yet: waiting for the first attempts of fx")
                    assert not [e for e in read_log(log) if e["event"] == "serving"], "the server started too early"
                    os.write(gate_fd, b"x")
            except* (AssertionError, MCPError) as group:
                failures[name] = "; ".join(repr(leaf) for leaf in _leaves(group))
            finally:
                os.close(gate_fd)  # after the sidecar (and its server) stopped: nobody waits on the gate any more

    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            for index, (name, mode, check) in enumerate(cases):
                nursery.start_soon(run_case, index, name, mode, check)
    if failures:
        pytest.fail("\n".join(f"{name}: {why}" for name, why in failures.items()), pytrace=False)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    return [leaf for e in group.exceptions for leaf in (_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])]
