"""A request to a server not ready fails fast (I10), but for the last moment of the server's first attempt.

A server's first sync swaps its tools into the Registry a moment before its
generation marks it ready (the mailbox answers the sync, then the generation
task runs on). A host's call routed in that moment waits for the first attempt
to end, as a call routed before it would (``HostRequests.until_first_attempt_ends``):
at the Front's route, so that its span and its path see the server ready, and
for every request before it is sent. Two CI runs of
the tracing e2e test met that moment: one got "is connecting", one a CLIENT span
without the protocol version. On the virtual clock.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing
from mcp import MCPError

from supervisor.errors import UpstreamUnavailable
from supervisor.host_requests import HostRequests

STARTUP_SEC = 30.0
CONNECTING = "server 'fx' is connecting; try again shortly"


class _Actor(HostRequests):
    """The attributes a ``ServerActor`` gives its ``HostRequests``, its first attempt ended by the test."""

    def __init__(self, *, first_attempt_done: bool, state: str = "connecting") -> None:
        self.name = "fx"
        self.settings = cast(Any, SimpleNamespace(startup_timeout_sec=STARTUP_SEC, tool_timeout_sec=60.0))
        self.status = cast(Any, SimpleNamespace(state=state, unavailable_message=lambda: CONNECTING))
        self.stopping_reason = None
        self._upstream = None
        self._done = trio.Event()
        if first_attempt_done:
            self._done.set()

    @property
    def first_attempt_done(self) -> bool:
        return self._done.is_set()

    async def wait_first_attempt(self) -> None:
        await self._done.wait()

    def heal_unknown_tool(self, raw_name: str, error: MCPError) -> None: ...

    def become_ready(self) -> None:
        """What the generation loop does once the first sync's answer reaches it."""

        async def read_resource(uri: str, call: Any) -> str:
            return f"read {uri}"

        self._upstream = cast(Any, SimpleNamespace(read_resource=read_resource))
        self.status.state = "ready"
        self._done.set()


async def test_a_request_routed_before_the_first_attempt_ends_waits_for_it_and_is_served(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actor = _Actor(first_attempt_done=False)
    got: list[Any] = []
    with trio.fail_after(STARTUP_SEC * 2):
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                got.append(await actor.read_resource("fixture://x"))

            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []  # waiting, not failed
            actor.become_ready()
    assert got == ["read fixture://x"] and trio.current_time() == 0.0


async def test_a_request_to_a_server_whose_first_attempt_ended_fails_fast_while_it_is_not_ready(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actor = _Actor(first_attempt_done=True, state="reconnecting")
    with trio.fail_after(STARTUP_SEC * 2), pytest.raises(UpstreamUnavailable, match="connecting"):
        await actor.read_resource("fixture://x")
    assert trio.current_time() == 0.0  # I10: no wait for a reconnect


async def test_the_wait_for_a_first_attempt_is_bounded_by_startup_timeout_sec(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actor = _Actor(first_attempt_done=False)
    with trio.fail_after(STARTUP_SEC * 2), pytest.raises(UpstreamUnavailable, match="connecting"):
        await actor.read_resource("fixture://x")
    assert trio.current_time() == STARTUP_SEC


@pytest.mark.parametrize("ends", ["ready", "never", "ended before"])
async def test_a_route_found_before_the_first_attempt_ends_waits_for_its_end_bounded(
    autojump_clock: trio.testing.MockClock, ends: str
) -> None:
    actor = _Actor(first_attempt_done=ends == "ended before")
    waited = trio.Event()

    async def wait() -> None:
        await actor.until_first_attempt_ends()
        waited.set()

    with trio.fail_after(STARTUP_SEC * 2):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert waited.is_set() == (ends == "ended before")  # nothing to wait for once it ended
            if ends == "ready":
                actor.become_ready()
    assert trio.current_time() == (STARTUP_SEC if ends == "never" else 0.0)
