"""An in-process fake upstream behind the ``ServerActor`` connector seam (unit tests only).

``FakeServer`` plays one upstream server across all of its generations. A test
scripts it (connect outcomes, the tool list, slow or failing fetches) and then
watches what the actor did (connect and fetch times on the virtual clock, fetch
modes, peak fetch concurrency, calls). Nothing here spawns processes or does I/O;
end-to-end behaviour is tested against real servers elsewhere.

Concurrency: the fake owns no tasks and no nursery. Every wait in it is an
``Event`` the test controls (``fetch_gate``, ``close_gate``) or a virtual-clock
sleep; a generation's in-flight fetches are cancelled when its session closes,
the way a real client fails requests on a closed transport.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as types
import trio
from mcp.client.caching import CacheMode

from supervisor.calls.attribution import CallTracker, HostCall
from supervisor.catalog.registry import Definition, Kind
from supervisor.config.servers import ServerSettings
from supervisor.errors import UpstreamUnavailable
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.session import Identity

ConnectOutcome = Literal["ok", "fail", "hang"]


def tool(name: str, description: str | None = None) -> types.Tool:
    """A minimal upstream tool definition."""
    return types.Tool(name=name, description=description, input_schema={"type": "object"})


def prompt(name: str, description: str | None = None) -> types.Prompt:
    """A minimal upstream prompt definition."""
    return types.Prompt(name=name, description=description)


@dataclass(eq=False)
class FakeSession:
    """One connected generation of a ``FakeServer`` (satisfies ``UpstreamSession``)."""

    server: FakeServer
    generation: int
    health: TransportHealth = field(default_factory=TransportHealth)
    closed: bool = False
    change_notices: bool = True
    _inflight: set[trio.CancelScope] = field(default_factory=set)

    @property
    def protocol_version(self) -> str:
        return "2025-06-18"

    @property
    def identity(self) -> Identity:
        return Identity("fake", "1.0")

    @property
    def about(self) -> str:
        return self.server.about

    @property
    def kinds(self) -> frozenset[Kind]:
        return frozenset({"tools", "prompts"}) if self.server.prompts is not None else frozenset({"tools"})

    async def list_all(self, kind: Kind, cache_mode: CacheMode) -> list[Definition]:
        if kind == "prompts":
            return await self.server._fetch_prompts(self)
        assert kind == "tools", f"the fake serves no {kind}"
        return list(await self.server._fetch(self, cache_mode))

    async def call_tool(
        self, raw_name: str, arguments: dict[str, Any] | None, call: HostCall | None = None
    ) -> types.CallToolResult:
        if self.closed:
            raise UpstreamUnavailable(self.server.name, "fake: session closed")
        self.server.calls.append((raw_name, arguments))
        await trio.lowlevel.checkpoint()
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{raw_name} ok")])

    async def get_prompt(
        self, raw_name: str, arguments: dict[str, str] | None, call: HostCall | None = None
    ) -> types.GetPromptResult:
        raise AssertionError("the fake serves no prompt contents")

    async def read_resource(self, uri: str, call: HostCall | None = None) -> types.ReadResourceResult:
        raise AssertionError("the fake serves no resources")

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None,
    ) -> types.CompleteResult:
        raise AssertionError("the fake serves no completions")

    async def set_log_level(self, level: types.LoggingLevel | None) -> None:
        self.server.log_levels.append(level)

    async def set_subscriptions(self, uris: frozenset[str]) -> None:
        self.server.subscriptions.append(uris)

    async def roots_changed(self) -> None:
        self.server.roots_notices += 1

    def close(self) -> None:
        self.closed = True
        for scope in self._inflight:
            scope.cancel("fake session closed")


class FakeServer:
    """A scriptable upstream server.

    Attributes:
        tools: What a fetch returns (read when the fetch starts).
        connect_script: Outcomes for the next connect attempts, consumed in order;
            once empty, ``connect_default`` applies.
        fetch_gate: When set to an unset Event, fetches block until it is set.
        fetch_delay_sec: Virtual time each fetch takes (after the gate).
        fetch_error: When set, fetches raise it (after the gate and the delay).
        close_delay_sec: Virtual time a generation takes to tear down (a child
            process given its grace period, say).
        close_gate: When set to an unset Event, a generation's (shielded) teardown
            blocks until it is set, so a test can look at the world mid-teardown.
        about: One line of what the server says it does, as a generation reports it.
    """

    def __init__(self, tools: list[types.Tool] | None = None, *, name: str = "srv") -> None:
        self.name = name
        self.tools: list[types.Tool] = list(tools or [])
        self.connect_script: list[ConnectOutcome] = []
        self.connect_default: ConnectOutcome = "ok"
        self.fetch_gate: trio.Event | None = None
        self.fetch_delay_sec = 0.0
        self.fetch_error: Exception | None = None
        self.close_delay_sec = 0.0
        self.close_gate: trio.Event | None = None
        self.about = ""
        """What the fake says it does (``Upstream.about``)."""
        self.closing = False
        """True while a generation is tearing down (inside the shielded cleanup)."""
        self.session: FakeSession | None = None
        self.on_list_changed: Callable[[Kind], None] | None = None
        self.prompts: list[types.Prompt] | None = None
        """None: the server offers no prompts at all."""
        self.prompt_fetch_error: Exception | None = None
        self.log_levels: list[types.LoggingLevel | None] = []
        self.subscriptions: list[frozenset[str]] = []
        self.roots_notices = 0
        self.connect_times: list[float] = []
        self.fetch_times: list[float] = []
        self.fetch_modes: list[CacheMode] = []
        self.fetches_running = 0
        self.max_concurrent_fetches = 0
        self.calls: list[tuple[str, dict[str, Any] | None]] = []

    # -- what the test drives --------------------------------------------------------

    def notify_tools_changed(self) -> None:
        """Deliver one ``tools/list_changed`` notice to the actor, as the client would."""
        assert self.on_list_changed is not None, "no generation has connected yet"
        self.on_list_changed("tools")

    def notify_prompts_changed(self) -> None:
        """Deliver one ``prompts/list_changed`` notice to the actor, as the client would."""
        assert self.on_list_changed is not None, "no generation has connected yet"
        self.on_list_changed("prompts")

    def drop(self, reason: str = "fake: killed") -> None:
        """End the current generation (the transport died)."""
        assert self.session is not None, "no live generation to drop"
        self.session.health.mark_lost(reason)

    # -- the connector seam ------------------------------------------------------------

    @asynccontextmanager
    async def connect(
        self, settings: ServerSettings, *, on_list_changed: Callable[[Kind], None]
    ) -> AsyncIterator[FakeSession]:
        self.connect_times.append(trio.current_time())
        outcome = self.connect_script.pop(0) if self.connect_script else self.connect_default
        if outcome == "hang":
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()
        if outcome == "fail":
            raise UpstreamUnavailable(settings.name, f"fake: server {settings.name!r} refused the connection")
        session = FakeSession(self, generation=len(self.connect_times))
        self.session = session
        self.on_list_changed = on_list_changed
        try:
            yield session
        finally:
            session.close()
            if self.session is session:
                self.session = None
            self.closing = True
            try:
                with trio.CancelScope(shield=True):
                    if self.close_gate is not None:
                        await self.close_gate.wait()
                    await trio.sleep(self.close_delay_sec)
            finally:
                self.closing = False

    async def _fetch_prompts(self, session: FakeSession) -> list[Definition]:
        if session.closed:
            raise UpstreamUnavailable(self.name, "fake: session closed")
        await trio.lowlevel.checkpoint()
        if self.prompt_fetch_error is not None:
            raise self.prompt_fetch_error
        return list(self.prompts or [])

    async def _fetch(self, session: FakeSession, cache_mode: CacheMode) -> list[types.Tool]:
        if session.closed:
            raise UpstreamUnavailable(self.name, "fake: session closed")
        self.fetch_times.append(trio.current_time())
        self.fetch_modes.append(cache_mode)
        # The server answers with the list as it stood when the request arrived; a slow
        # transport delivers that (possibly stale) answer later.
        listing = list(self.tools)
        self.fetches_running += 1
        self.max_concurrent_fetches = max(self.max_concurrent_fetches, self.fetches_running)
        try:
            with trio.CancelScope() as scope:
                session._inflight.add(scope)
                try:
                    if self.fetch_gate is not None:
                        await self.fetch_gate.wait()
                    await trio.sleep(self.fetch_delay_sec)
                    if self.fetch_error is not None:
                        raise self.fetch_error
                    return listing
                finally:
                    session._inflight.discard(scope)
            raise UpstreamUnavailable(self.name, "fake: connection closed during tools/list")
        finally:
            self.fetches_running -= 1


class SpliceFront:
    """What ``host.stdio.reader.HostSplice`` asks of the Front, recording each call's outcome (in-process tests)."""

    def __init__(self) -> None:
        self.outcomes: list[str] = []
        self.server: Any = None
        """Set to something with a ``server_info_stamp`` when a test's splice restamps results."""
        self.calls = CallTracker()
        self.handshake_connection: Any = None

    def connection_log_level(self, connection: Any) -> None:
        return None

    def note_call_failure(self, tool: Any, kind: str, text: str) -> None: ...

    def note_call(self, tool: Any, outcome: str, seconds: float) -> None:
        self.outcomes.append(outcome)


class SpliceTracker:
    """The stdio link's unanswered-request set, recording what was settled."""

    def __init__(self) -> None:
        self.settled: list[str | int] = []

    def track(self, request_id: str | int) -> None: ...

    def settle(self, request_id: str | int) -> None:
        self.settled.append(request_id)
