"""ServerActor against an in-process fake upstream (DESIGN §4 I1, I2, I3, I10).

Everything runs on pytest-trio's ``autojump_clock``: time passes only when every
task is blocked, so every time asserted here is an exact virtual time. Ordering
uses ``trio.testing.wait_all_tasks_blocked`` (it wins the tie against the clock's
jump) and virtual sleeps, never real ones.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import mcp_types as types
import pytest
import trio
import trio.testing

from supervisor.catalog.naming import public_tool_name
from supervisor.catalog.registry import Registry
from supervisor.config.servers import ReconnectSettings, ServerSettings
from supervisor.errors import UpstreamNeedsLogin, UpstreamProtocolError, UpstreamUnavailable
from supervisor.ops.status import ServerStatus
from supervisor.server_actor import LIST_CHANGED_DEBOUNCE_SEC, LIST_CHANGED_MAX_WAIT_SEC, ServerActor
from tests.fakes import FakeServer, tool

BOUND_SEC = 120.0
"""Virtual hard bound of every test (the autojump clock reaches it at once if a test hangs)."""

Catalog = tuple[tuple[str, str | None], ...]


def _settings(
    *,
    max_attempts: int = 4,
    initial_delay_ms: int = 500,
    max_delay_ms: int = 4000,
    startup_timeout_sec: float = 5.0,
) -> ServerSettings:
    return ServerSettings(
        name="srv",
        command="x",
        startup_timeout_sec=startup_timeout_sec,
        tool_timeout_sec=5.0,
        reconnect=ReconnectSettings(
            max_attempts=max_attempts, initial_delay_ms=initial_delay_ms, max_delay_ms=max_delay_ms, jitter=0.0
        ),
    )


def _catalog(registry: Registry) -> Catalog:
    """What the host sees: public names and descriptions, in order."""
    return tuple((t.name, t.description) for t in registry.tools())


def _names(*raw: str) -> list[str]:
    return sorted(public_tool_name("srv", name) for name in raw)


@dataclass(frozen=True)
class _StatusEvent:
    at: float
    state: str
    attempt: int
    last_error: str | None


@dataclass
class _Rig:
    """One actor wired to one fake, with the history of its status and the registry."""

    fake: FakeServer
    settings: ServerSettings = field(default_factory=_settings)
    registry: Registry = field(init=False)
    actor: ServerActor = field(init=False)
    statuses: list[_StatusEvent] = field(default_factory=list)
    catalogs: list[tuple[float, Catalog]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.registry = Registry(on_change=self._on_change)
        self.actor = ServerActor(
            self.settings,
            self.registry,
            connector=self.fake.connect,
            rng=random.Random(0),
            on_status=self._on_status,
        )

    def _on_change(self) -> None:
        self.catalogs.append((trio.current_time(), _catalog(self.registry)))

    def _on_status(self, status: ServerStatus) -> None:
        event = _StatusEvent(trio.current_time(), status.state, status.attempt, status.last_error)
        if not self.statuses or self.statuses[-1] != event:
            self.statuses.append(event)

    def state(self) -> str:
        """The actor's state, read afresh (a plain ``str`` so checks in sequence do not narrow)."""
        return self.actor.status.state

    def registered(self) -> list[str]:
        return [t.public_name for t in self.registry.owned_by("srv")]

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.actor.run)
            yield
            nursery.cancel_scope.cancel("test done")


def _text(result: types.CallToolResult | types.InputRequiredResult) -> str:
    assert isinstance(result, types.CallToolResult)
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# -- I1 serialization ---------------------------------------------------------------------


async def test_I1_a_single_notice_resyncs_once_exactly_one_debounce_window_later(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rig = _Rig(FakeServer([tool("echo")]))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            await trio.sleep(1.0)
            rig.fake.tools = [tool("echo"), tool("added")]
            rig.fake.notify_tools_changed()
            await trio.sleep(10.0)

            assert rig.fake.fetch_times == [0.0, 1.0 + LIST_CHANGED_DEBOUNCE_SEC]
            assert rig.fake.fetch_modes == ["refresh", "refresh"]
            assert [at for at, _ in rig.catalogs] == [0.0, 1.0 + LIST_CHANGED_DEBOUNCE_SEC]
            assert rig.registered() == _names("echo", "added")
            assert rig.actor.status.last_sync_reason == "list_changed"


async def test_I1_a_notice_inside_the_quiet_window_restarts_the_window(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rig = _Rig(FakeServer([tool("echo")]))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            await trio.sleep(1.0)
            rig.fake.notify_tools_changed()
            await trio.sleep(0.03125)  # inside the 0.05 s window
            rig.fake.notify_tools_changed()
            await trio.sleep(10.0)

            assert rig.fake.fetch_times == [0.0, 1.03125 + LIST_CHANGED_DEBOUNCE_SEC]


async def test_I1_a_burst_of_1000_notices_during_a_slow_fetch_costs_one_more_fetch_and_never_overlaps(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """1,000 notices queued behind a running fetch coalesce into exactly one more fetch.

    Fetches: the initial sync (t=0), the re-sync of the first notice (it starts one
    debounce window later and blocks until t=2), and one coalesced re-sync for the
    whole burst, which starts one debounce window after the blocked fetch ends.
    """
    rig = _Rig(FakeServer([tool("echo")]))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            gate = rig.fake.fetch_gate = trio.Event()
            rig.fake.notify_tools_changed()
            await trio.sleep(1.0)
            assert rig.fake.fetches_running == 1  # the first notice's re-sync is stuck in its fetch

            for i in range(1000):
                rig.fake.tools = [tool("echo"), tool(f"v{i}")]
                rig.fake.notify_tools_changed()
                if i % 50 == 0:
                    await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(1.0)  # far past the maximum wait: the burst must still queue
            assert rig.fake.fetches_running == 1
            rig.fake.fetch_gate = None
            gate.set()
            await trio.sleep(10.0)

            assert rig.fake.max_concurrent_fetches == 1
            assert rig.actor.fetches == 3
            assert rig.fake.fetch_times == [0.0, LIST_CHANGED_DEBOUNCE_SEC, 2.0 + LIST_CHANGED_DEBOUNCE_SEC]
            assert rig.registered() == _names("echo", "v999")
            assert rig.actor.syncs_running == 0


async def test_I1_a_continuous_storm_is_resynced_within_the_maximum_wait_and_ends_on_the_final_list(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A notice every millisecond for one second, each fetch taking 0.1 s.

    The quiet window never opens during the storm, so the first re-sync starts at
    the maximum wait after the first notice, and each later one at most a fetch
    plus the maximum wait after the previous; the last one starts exactly a quiet
    window after the last notice. The count is bounded by the storm's length over
    the maximum wait, whatever the constants are.
    """
    rig = _Rig(FakeServer([tool("echo")]))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            rig.fake.fetch_delay_sec = 0.1
            await trio.sleep(1.0)
            for i in range(1000):
                rig.fake.tools = [tool("echo"), tool(f"v{i}")]
                rig.fake.notify_tools_changed()
                await trio.sleep(0.001)
            last_notice_at = trio.current_time() - 0.001
            await trio.sleep(10.0)

            assert rig.fake.max_concurrent_fetches == 1
            resyncs = rig.fake.fetch_times[1:]
            assert 2 <= len(resyncs) <= math.ceil(1.0 / LIST_CHANGED_MAX_WAIT_SEC) + 1
            assert resyncs[0] == 1.0 + LIST_CHANGED_MAX_WAIT_SEC
            for previous, start in itertools.pairwise(resyncs):
                assert start <= previous + 0.1 + LIST_CHANGED_MAX_WAIT_SEC + 1e-9
            assert resyncs[-1] == pytest.approx(last_notice_at + LIST_CHANGED_DEBOUNCE_SEC, abs=1e-9)
            assert rig.registered() == _names("echo", "v999")


@pytest.mark.parametrize("queued", [("use", "refresh"), ("refresh", "use")])
async def test_I1_refresh_absorbs_use_when_both_queue_behind_a_running_sync(
    autojump_clock: trio.testing.MockClock, queued: tuple[str, str]
) -> None:
    rig = _Rig(FakeServer([tool("echo")]))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            gate = rig.fake.fetch_gate = trio.Event()
            rig.actor.request_sync("use", "reconnect")
            await trio.testing.wait_all_tasks_blocked()
            assert rig.fake.fetches_running == 1

            for mode in queued:
                if mode == "use":
                    rig.actor.request_sync("use", "reconnect")
                else:
                    rig.actor.request_sync("refresh", "unknown_tool")
            await trio.testing.wait_all_tasks_blocked()
            assert rig.fake.fetches_running == 1  # both wait behind the running sync
            rig.fake.fetch_gate = None
            gate.set()
            await trio.sleep(10.0)

            assert rig.fake.fetch_modes == ["refresh", "use", "refresh"]
            assert rig.fake.fetch_times == [0.0, 0.0, 0.0]  # neither is a change notice: no debounce
            assert rig.actor.status.last_sync_reason == "unknown_tool"
            assert rig.fake.max_concurrent_fetches == 1


# -- I2 fetch failure keeps the old ------------------------------------------------------


async def test_I2_a_resync_whose_fetch_fails_keeps_the_previous_tools_registered_and_callable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rig = _Rig(FakeServer([tool("echo", "v1")]))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            before = _catalog(rig.registry)
            rig.fake.tools = [tool("echo", "v2"), tool("new")]
            rig.fake.fetch_error = UpstreamProtocolError("srv", "fake: tools/list answered garbage")
            rig.fake.notify_tools_changed()
            await trio.sleep(1.0)

            assert rig.actor.fetches == 2
            assert _catalog(rig.registry) == before
            assert len(rig.catalogs) == 1  # the failed sync never touched the registry
            assert rig.state() == "ready"
            assert rig.actor.status.last_error is not None
            assert "garbage" in rig.actor.status.last_error
            assert _text(await rig.actor.call_tool("echo", {"x": 1})) == "echo ok"
            assert rig.fake.calls == [("echo", {"x": 1})]

            rig.fake.fetch_error = None  # the next notice recovers
            rig.fake.notify_tools_changed()
            await trio.sleep(1.0)
            assert rig.registered() == _names("echo", "new")


async def test_I2_a_resync_slower_than_the_startup_timeout_fails_after_exactly_that_and_keeps_the_old(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rig = _Rig(FakeServer([tool("echo")]), _settings(startup_timeout_sec=4.0))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            before = _catalog(rig.registry)
            rig.fake.fetch_gate = trio.Event()  # never set: this fetch never answers
            rig.fake.tools = [tool("other")]
            await trio.sleep(1.0)
            rig.fake.notify_tools_changed()
            await trio.sleep(2.0)

            # Mid-fetch: the old tools are registered and calls go through.
            assert rig.fake.fetches_running == 1
            assert _text(await rig.actor.call_tool("echo", None)) == "echo ok"

            await trio.sleep(10.0)
            fetch_started = rig.fake.fetch_times[-1]
            assert fetch_started == 1.0 + LIST_CHANGED_DEBOUNCE_SEC
            failures = [e for e in rig.statuses if e.last_error is not None]
            assert failures[0].at == fetch_started + 4.0
            assert failures[0].state == "ready"
            assert "did not answer within 4s" in (failures[0].last_error or "")
            assert rig.fake.fetches_running == 0
            assert _catalog(rig.registry) == before
            assert _text(await rig.actor.call_tool("echo", None)) == "echo ok"


async def test_I2_a_reconnect_whose_first_fetch_fails_leaves_the_previous_generation_registered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rig = _Rig(FakeServer([tool("echo")]))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            rig.fake.fetch_error = UpstreamProtocolError("srv", "fake: bad listing")
            rig.fake.drop()
            await trio.sleep(1.0)  # generation 2 connected at 0.5 and failed its first sync

            assert rig.fake.connect_times == [0.0, 0.5]
            assert rig.state() == "reconnecting"
            assert rig.registered() == _names("echo")

            rig.fake.fetch_error = None
            await trio.sleep(1.0)  # generation 3 at 1.5
            assert rig.state() == "ready"
            assert rig.fake.fetch_modes == ["refresh", "use", "use"]
            assert [at for at, _ in rig.catalogs] == [0.0]  # never emptied, never re-registered


# -- I3 atomic swap, restore on conflict ---------------------------------------------------


async def test_I3_a_resync_that_collides_with_a_squatter_keeps_the_previous_generation_callable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rig = _Rig(FakeServer([tool("stable", "v1")]))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            taken = public_tool_name("srv", "taken")
            rig.registry.claim("squatter", taken, tool("mine", "the squatter's"))
            squatter_before = rig.registry.lookup(taken)
            stable_before = rig.registry.lookup("mcp__srv__stable")

            rig.fake.tools = [tool("stable", "v2"), tool("taken"), tool("fresh")]
            rig.fake.notify_tools_changed()
            await trio.sleep(1.0)

            assert rig.actor.fetches == 2
            assert rig.registry.lookup("mcp__srv__stable") == stable_before  # same definition, same name
            assert rig.registered() == ["mcp__srv__stable"]
            assert rig.registry.lookup(taken) == squatter_before
            assert rig.registry.lookup("mcp__srv__fresh") is None
            assert rig.actor.status.conflicts == [f"{taken} (owned by squatter)"]
            assert rig.actor.status.tool_count == 1
            assert rig.state() == "ready"
            assert _text(await rig.actor.call_tool("stable", {})) == "stable ok"
            assert rig.fake.calls == [("stable", {})]


async def test_I3_a_first_sync_that_collides_registers_no_tools_for_the_server(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rig = _Rig(FakeServer([tool("a"), tool("taken"), tool("b")]))
    taken = public_tool_name("srv", "taken")
    rig.registry.claim("squatter", taken, tool("taken", "the squatter's"))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()

            assert rig.registered() == []
            assert _catalog(rig.registry) == ((taken, "the squatter's"),)
            assert rig.actor.status.conflicts == [f"{taken} (owned by squatter)"]
            assert rig.actor.status.tool_count == 0


class _CatalogWatcher(trio.abc.Instrument):
    """Snapshots the host-visible catalog after every task step of every task.

    A reader task can only run between two task steps, so this sees every state a
    concurrent reader (the Front answering ``tools/list``) could ever observe; a
    reader task spinning on checkpoints would do the same but would also stop the
    autojump clock from ever advancing.
    """

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.seen: list[Catalog] = []

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        catalog = _catalog(self.registry)
        if not self.seen or self.seen[-1] != catalog:
            self.seen.append(catalog)


async def test_I3_readers_see_the_old_or_the_new_generation_never_a_mixture_or_an_empty_set(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gen_a = [tool("a1"), tool("shared", "v1")]
    gen_b = [tool("shared", "v2"), tool("b1"), tool("b2")]
    gen_c = [tool("c1")]
    rig = _Rig(FakeServer(gen_a))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            taken = public_tool_name("srv", "taken")
            watcher = _CatalogWatcher(rig.registry)
            trio.lowlevel.add_instrument(watcher)
            try:
                rig.fake.fetch_delay_sec = 0.125  # fetches span many scheduling points
                rig.fake.tools = gen_b
                rig.fake.notify_tools_changed()
                await trio.sleep(1.0)
                rig.registry.claim("squatter", taken, tool("taken"))
                rig.fake.tools = [*gen_c, tool("taken")]  # conflicts: generation B must stay
                rig.fake.notify_tools_changed()
                await trio.sleep(1.0)
                rig.fake.tools = gen_c
                rig.fake.drop()  # the reconnect's sync replaces B with C
                await trio.sleep(2.0)
            finally:
                trio.lowlevel.remove_instrument(watcher)

        squatter = ((taken, None),)
        expected = [
            tuple((public_tool_name("srv", t.name), t.description) for t in sorted(gen, key=lambda t: t.name))
            for gen in (gen_a, gen_b)
        ]
        a, b = expected
        c = tuple(sorted([(public_tool_name("srv", "c1"), None), *squatter]))
        assert watcher.seen == [a, b, tuple(sorted(b + squatter)), c]
        assert rig.actor.fetches == 4


# -- I10 reconnect policy -------------------------------------------------------------------


async def test_I10_a_server_that_never_connects_is_retried_with_doubling_delays_then_marked_failed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")])
    fake.connect_default = "fail"
    rig = _Rig(fake)
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await trio.sleep(60.0)

            assert fake.connect_times == [0.0, 0.5, 1.5, 3.5]
            assert rig.state() == "failed"
            assert rig.actor.status.attempt == 4
            assert [(e.at, e.state, e.attempt) for e in rig.statuses] == [
                (0.0, "reconnecting", 1),
                (0.5, "reconnecting", 2),
                (1.5, "reconnecting", 3),
                (3.5, "reconnecting", 4),
                (3.5, "failed", 4),
            ]
            assert "refused the connection" in (rig.actor.status.last_error or "")
            with pytest.raises(UpstreamUnavailable, match=r"'srv' failed after 4 attempts .*reload"):
                await rig.actor.call_tool("echo", None)


async def test_I10_delays_stop_doubling_at_max_delay(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeServer()
    fake.connect_default = "fail"
    rig = _Rig(fake, _settings(max_attempts=6, initial_delay_ms=500, max_delay_ms=1000))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await trio.sleep(60.0)
            assert fake.connect_times == [0.0, 0.5, 1.5, 2.5, 3.5, 4.5]
            assert rig.state() == "failed"


async def test_I10_on_give_up_the_tools_of_an_earlier_generation_are_withdrawn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")])
    fake.connect_script = ["ok"]
    fake.connect_default = "fail"
    rig = _Rig(fake)
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            fake.drop()
            await trio.sleep(3.0)
            assert rig.registered() == _names("echo")  # kept while it is only reconnecting

            await trio.sleep(57.0)
            assert fake.connect_times == [0.0, 0.5, 1.5, 3.5]
            assert rig.catalogs == [(0.0, (("mcp__srv__echo", None),)), (3.5, ())]
            assert rig.state() == "failed"
            assert rig.actor.status.attempt == 4
            assert rig.actor.status.tool_count == 0

            fake.notify_tools_changed()  # a late notice of the dead generation re-adds nothing
            await trio.sleep(1.0)
            assert rig.registered() == []


@pytest.mark.parametrize(
    ("up_for_sec", "next_connect_at", "attempt"),
    [
        (4.0, 5.5 + 0.5, 1),  # stayed up for the stability window: a new outage, first delay
        (3.5, 5.0 + 2.0, 3),  # dropped earlier: the third consecutive failure, third delay
    ],
)
async def test_I10_the_failure_count_resets_only_after_a_generation_stays_up_for_max_delay(
    autojump_clock: trio.testing.MockClock, up_for_sec: float, next_connect_at: float, attempt: int
) -> None:
    fake = FakeServer([tool("echo")])
    fake.connect_script = ["fail", "fail"]
    rig = _Rig(fake)
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()  # the first failure
            await trio.sleep(1.5)
            await trio.testing.wait_all_tasks_blocked()  # let the connect due at 1.5 happen first
            assert fake.connect_times == [0.0, 0.5, 1.5]
            assert rig.state() == "ready"
            assert rig.actor.status.attempt == 0

            await trio.sleep(up_for_sec)
            fake.drop()
            await trio.testing.wait_all_tasks_blocked()
            assert rig.state() == "reconnecting"
            assert rig.actor.status.attempt == attempt
            await trio.sleep(10.0)

            assert fake.connect_times == [0.0, 0.5, 1.5, next_connect_at]
            assert rig.state() == "ready"


async def test_I10_calls_fail_fast_while_reconnecting_naming_the_server_state_and_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")])
    rig = _Rig(fake)
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            await trio.sleep(1.0)
            fake.connect_default = "fail"
            fake.drop()
            await trio.sleep(0.75)  # the reconnect at 1.5 failed too: attempt 2 of 4
            assert fake.connect_times == [0.0, 1.5]

            # An expired deadline: any wait inside call_tool would raise TooSlowError instead.
            with trio.fail_after(0), pytest.raises(UpstreamUnavailable) as caught:
                await rig.actor.call_tool("echo", {})
            assert trio.current_time() == 1.75
            assert caught.value.server == "srv"
            message = str(caught.value)
            assert "'srv'" in message
            assert "reconnecting" in message
            assert "attempt 2/4" in message
            assert fake.calls == []
            assert rig.registered() == _names("echo")


async def test_I10_calls_during_the_teardown_of_a_lost_generation_fail_fast_saying_it_reconnects(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")])
    fake.close_delay_sec = 1.0  # the dead generation takes a second to clean up
    rig = _Rig(fake)
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            fake.drop()
            await trio.sleep(0.5)  # mid-teardown

            with trio.fail_after(0), pytest.raises(UpstreamUnavailable) as caught:
                await rig.actor.call_tool("echo", {})
            assert "'srv'" in str(caught.value)
            assert "reconnecting" in str(caught.value)
            assert fake.calls == []

            await trio.sleep(10.0)
            assert fake.connect_times == [0.0, 1.5]
            assert rig.state() == "ready"


async def test_I10_a_connect_that_hangs_fails_the_generation_after_exactly_startup_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")])
    fake.connect_script = ["hang"]
    rig = _Rig(fake, _settings(startup_timeout_sec=4.0))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            assert trio.current_time() == 4.0
            assert rig.statuses[0].at == 4.0
            assert rig.statuses[0].state == "reconnecting"
            assert "within 4s (startup_timeout_sec)" in (rig.statuses[0].last_error or "")

            await trio.sleep(10.0)
            assert fake.connect_times == [0.0, 4.5]
            assert rig.state() == "ready"


async def test_I10_a_first_fetch_that_hangs_fails_the_generation_after_exactly_startup_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")])
    gate = fake.fetch_gate = trio.Event()
    rig = _Rig(fake, _settings(startup_timeout_sec=4.0))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            assert trio.current_time() == 4.0
            assert rig.state() == "reconnecting"
            assert rig.registered() == []
            await trio.testing.wait_all_tasks_blocked()
            assert fake.fetches_running == 0  # the abandoned fetch did not outlive its generation

            gate.set()
            await trio.sleep(10.0)
            assert fake.connect_times == [0.0, 4.5]
            assert fake.fetch_times == [0.0, 4.5]
            assert rig.state() == "ready"
            assert rig.registered() == _names("echo")


# -- spawn concurrency --------------------------------------------------------------------


async def test_a_startup_slot_is_held_from_connect_until_ready_and_waiting_for_one_costs_no_startup_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots = trio.CapacityLimiter(1)
    registry = Registry()
    fakes = [FakeServer([tool("echo")], name=f"s{i}") for i in range(3)]
    for fake in fakes:
        fake.fetch_delay_sec = 3.0  # each first sync takes 3 s; the startup timeout is 5 s
    actors = [
        ServerActor(
            _settings().model_copy(update={"name": fake.name}),
            registry,
            connector=fake.connect,
            rng=random.Random(0),
            startup_slots=slots,
        )
        for fake in fakes
    ]
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            for actor in actors:
                await nursery.start(actor.run)
            for actor in actors:
                await actor.wait_first_attempt()
            nursery.cancel_scope.cancel()
    # One at a time: each starts when the previous one is ready, and none timed out waiting.
    assert [fake.connect_times for fake in fakes] == [[0.0], [3.0], [6.0]]
    assert [actor.status.state for actor in actors] == ["ready", "ready", "ready"]


async def test_a_hosts_roots_notice_reaches_the_current_generation_once_however_many_came_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rig = _Rig(FakeServer([tool("echo")]))
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            await trio.testing.wait_all_tasks_blocked()
            assert rig.fake.roots_notices == 0  # a new generation is told nothing: it cached no roots
            for _ in range(3):
                rig.actor.notify_roots_changed()
            await trio.testing.wait_all_tasks_blocked()
            assert rig.fake.roots_notices == 1
            rig.actor.notify_roots_changed()
            await trio.testing.wait_all_tasks_blocked()
            assert rig.fake.roots_notices == 2


async def test_a_generation_lost_because_only_a_login_helps_parks_in_needs_login_without_reconnecting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The fast path's own HTTP POST found the refresh refused (upstream.http_calls): no backoff loop.
    fake = FakeServer([tool("echo")])
    rig = _Rig(fake)
    with trio.fail_after(BOUND_SEC):
        async with rig.running():
            await rig.actor.wait_first_attempt()
            assert rig.state() == "ready" and fake.session is not None
            refused = UpstreamNeedsLogin("srv", "server 'srv': run `mcp-supervisor login srv`")
            fake.session.health.mark_needs_login(refused)
            await trio.testing.wait_all_tasks_blocked()
            assert rig.state() == "needs_login"
            autojump_clock.jump(60.0)  # far past every reconnect delay: a parked actor does not retry
            await trio.testing.wait_all_tasks_blocked()
            assert rig.state() == "needs_login" and len(fake.connect_times) == 1
            assert "mcp-supervisor login srv" in (rig.actor.status.last_error or "")
