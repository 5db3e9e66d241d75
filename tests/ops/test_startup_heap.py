"""Full collections wait for the cold start's first attempts (``supervisor.ops.startup_heap``, issue 11)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from supervisor import serve as serve_module
from supervisor.config.loader import load_settings
from supervisor.config.models import Settings
from supervisor.config.servers import ServerSettings
from supervisor.host.front import Front
from supervisor.host.relay import Relay
from supervisor.ops.startup_heap import NO_FULL_COLLECTIONS, SETTLE_MARGIN_SEC, HeapSettler, defer_full_collections
from supervisor.root import Supervisor
from tests.fakes import FakeServer, tool
from tests.sidecar import fixture_server, write_settings
from tests.test_reload import Fleet

BOUND_SEC = 10.0


@pytest.fixture(autouse=True)
def usual_collector() -> Iterator[tuple[int, int, int]]:
    """The session's thresholds and an unfrozen heap, before and after each test."""
    usual = gc.get_threshold()
    gc.unfreeze()
    try:
        yield usual
    finally:
        gc.set_threshold(*usual)
        gc.unfreeze()  # the rest of the test session collects as usual


async def test_full_collections_wait_for_the_first_attempts_then_what_they_kept_is_frozen(
    usual_collector: tuple[int, int, int],
) -> None:
    first_attempts_done = trio.Event()
    with trio.fail_after(BOUND_SEC), defer_full_collections() as heap:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(heap.settle_after, first_attempts_done.wait, BOUND_SEC)
            await trio.testing.wait_all_tasks_blocked()
            assert heap.deferring
            assert gc.get_threshold() == (*usual_collector[:2], NO_FULL_COLLECTIONS), "young collections must go on"
            kept = [[index] for index in range(1000)]  # what a first attempt keeps: tracked containers
            assert gc.get_freeze_count() == 0
            first_attempts_done.set()
        assert not heap.deferring
        assert gc.get_threshold() == usual_collector
        assert gc.get_freeze_count() >= len(kept), "what the cold start kept was not frozen"


async def test_full_collections_resume_unfrozen_when_the_first_attempts_outlast_their_bound(
    usual_collector: tuple[int, int, int], autojump_clock: trio.testing.MockClock
) -> None:
    startup_bound_sec = 30.0
    with trio.fail_after(startup_bound_sec + 2 * SETTLE_MARGIN_SEC), defer_full_collections() as heap:
        await heap.settle_after(trio.sleep_forever, startup_bound_sec)
        assert trio.current_time() == startup_bound_sec + SETTLE_MARGIN_SEC
        assert not heap.deferring
        assert gc.get_threshold() == usual_collector
        assert gc.get_freeze_count() == 0, "a start-up that outlasted its bound must not freeze"


async def test_full_collections_come_back_when_the_run_ends_before_the_fleet_settles(
    usual_collector: tuple[int, int, int],
) -> None:
    with trio.fail_after(BOUND_SEC), trio.CancelScope() as scope, defer_full_collections() as heap:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(heap.settle_after, trio.sleep_forever, BOUND_SEC)
            await trio.testing.wait_all_tasks_blocked()
            assert heap.deferring
            scope.cancel()
    assert gc.get_threshold() == usual_collector
    assert gc.get_freeze_count() == 0


async def test_serve_holds_full_collections_while_it_runs_and_gives_them_back_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, usual_collector: tuple[int, int, int]
) -> None:
    settings = load_settings(write_settings(tmp_path, {"fx": fixture_server("--tools", "echo")}))
    during_run: list[tuple[int, int, int]] = []
    settlers: list[HeapSettler] = []

    async def run_nothing(*args: object, heap: HeapSettler, **_: object) -> None:
        during_run.append(gc.get_threshold())
        settlers.append(heap)
        await trio.lowlevel.checkpoint()

    monkeypatch.setattr(serve_module, "_run", run_nothing)
    with trio.fail_after(BOUND_SEC):
        await serve_module.serve(settings)
    assert during_run == [(*usual_collector[:2], NO_FULL_COLLECTIONS)]
    assert not settlers[0].deferring
    assert gc.get_threshold() == usual_collector


class _QuietLink:
    """A host link with no host: ``_run`` serves nothing but the Supervisor and the Front."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep_forever()

    def refuse_new(self) -> None:
        pass

    async def wait_idle(self) -> None:
        await trio.lowlevel.checkpoint()

    async def close(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_a_running_sidecar_settles_its_heap_once_every_first_attempt_ended(
    usual_collector: tuple[int, int, int],
) -> None:
    fake = FakeServer([tool("echo")], name="a")
    first_fetch = fake.fetch_gate = trio.Event()
    settings = Settings(mcp_servers={"a": ServerSettings(name="a", command="x")})
    relay = Relay()
    supervisor = Supervisor(settings, host=relay, connector=Fleet(a=fake).connect)
    front = Front(supervisor, relay)
    stop = serve_module._Stop()
    with trio.fail_after(BOUND_SEC), defer_full_collections() as heap:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: serve_module._run(settings, supervisor, [front], _QuietLink(), stop, heap=heap))
            await trio.testing.wait_all_tasks_blocked()
            assert supervisor.pending_first_attempts() == ["a"]
            assert heap.deferring, "full collections must wait while a first attempt runs"
            first_fetch.set()
            await supervisor.wait_first_attempts()
            await trio.testing.wait_all_tasks_blocked()
            assert not heap.deferring, "the heap was not settled after the first attempts ended"
            assert gc.get_threshold() == usual_collector
            assert gc.get_freeze_count() > 0
            stop.event.set()
