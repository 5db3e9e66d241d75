"""Rate-limited logging: one line per key per window, with the count of what was held back.

The limiter runs on an injected fake clock with exact counts; the Front's
per-call failure warning runs on the autojump clock against a fake upstream
that stays down, so a flood of failed calls is observed deterministically.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, cast

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp.server import ServerRequestContext

from supervisor.catalog.registry import Registry
from supervisor.config.models import Settings
from supervisor.config.servers import ReconnectSettings, ServerSettings
from supervisor.host.front import CALL_FAILURE_LOG_WINDOW_SEC, Front
from supervisor.host.pipeline.adapters import call_tool
from supervisor.host.relay import Relay
from supervisor.ops.logs import PRUNE_ABOVE_KEYS, RateLimitedLog
from supervisor.root import Supervisor
from supervisor.server_actor import ServerActor
from tests.fakes import FakeServer, tool

BOUND_SEC = 120.0


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _down_server_settings() -> ServerSettings:
    """Server "a": slow to give up (a hanging connect takes an hour), retried 100 ms after a drop."""
    return ServerSettings(
        name="a",
        command="x",
        startup_timeout_sec=3600.0,
        reconnect=ReconnectSettings(max_attempts=10, initial_delay_ms=100, max_delay_ms=1000, jitter=0.0),
    )


def _lines(caplog: pytest.LogCaptureFixture, name: str) -> list[tuple[str, int]]:
    return [(r.getMessage(), getattr(r, "suppressed", -1)) for r in caplog.records if r.name == name]


def test_the_first_line_logs_repeats_in_its_window_are_counted_and_the_next_line_says_how_many(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="test.ratelimit")
    clock = _Clock()
    limiter = RateLimitedLog(logging.getLogger("test.ratelimit"), window_sec=10.0, clock=clock)
    assert limiter.warning(("a", "down"), "server=%s failed", "a", extra={"server": "a"})
    for tenth in range(1, 100):  # 0.1 s … 9.9 s: inside the window
        clock.now = tenth / 10
        assert not limiter.warning(("a", "down"), "server=%s failed", "a", extra={"server": "a"})
    clock.now = 5.0
    assert limiter.warning(("b", "down"), "server=%s failed", "b"), "another key has its own window"
    clock.now = 10.0
    assert limiter.warning(("a", "down"), "server=%s failed", "a", extra={"server": "a"})
    clock.now = 10.5
    assert not limiter.warning(("a", "down"), "server=%s failed", "a")
    clock.now = 40.0
    assert limiter.warning(("a", "down"), "server=%s failed", "a")
    clock.now = 50.0
    assert limiter.warning(("a", "down"), "server=%s failed", "a"), "a quiet window reports nothing"
    assert _lines(caplog, "test.ratelimit") == [
        ("server=a failed", 0),
        ("server=b failed", 0),
        ("server=a failed (99 more like it suppressed since the last one logged)", 99),
        ("server=a failed (1 more like it suppressed since the last one logged)", 1),
        ("server=a failed", 0),
    ]
    assert [getattr(r, "server", None) for r in caplog.records][:3] == ["a", None, "a"]
    assert {r.filename for r in caplog.records} == {"test_logs.py"}, "records name the caller's line"


def test_keys_with_nothing_pending_are_forgotten_once_there_are_many() -> None:
    clock = _Clock()
    limiter = RateLimitedLog(logging.getLogger("test.ratelimit.prune"), window_sec=1.0, clock=clock)
    for key in range(PRUNE_ABOVE_KEYS):
        limiter.warning(key, "k")
    limiter.warning(0, "k")  # key 0 has a count pending: it must survive the prune
    clock.now = 2.0
    limiter.warning("new", "k")
    assert set(limiter._windows) == {0, "new"}
    assert limiter.warning(0, "k")
    assert limiter._windows[0].suppressed == 0


async def test_a_flood_of_failed_calls_to_a_down_server_logs_one_warning_per_window(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="supervisor.host.front")
    fake = FakeServer([tool("echo")], name="a")
    supervisor = Supervisor(Settings(mcp_servers={"a": _down_server_settings()}), connector=fake.connect)
    front = Front(supervisor, Relay())
    # A handshake-era host's request: enough of a context for the Front to route and fail the call.
    fields = {"request_id": None, "protocol_version": "2025-11-25", "meta": None, "params": None}
    ctx = cast("ServerRequestContext[Any]", SimpleNamespace(session=SimpleNamespace(_connection=object()), **fields))
    params = types.CallToolRequestParams(name="a__echo", arguments={})
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run)
            await supervisor.wait_first_attempts()
            fake.connect_default = "hang"  # it stays down, its tools stay listed (I2)
            fake.drop()
            await trio.testing.wait_all_tasks_blocked()
            assert supervisor.statuses()[0].state == "reconnecting"
            for _ in range(500):
                assert getattr(await call_tool(front, ctx, params), "is_error", False)
            await trio.sleep(CALL_FAILURE_LOG_WINDOW_SEC)
            assert getattr(await call_tool(front, ctx, params), "is_error", False)
            nursery.cancel_scope.cancel()
    records = [r for r in caplog.records if r.name == "supervisor.host.front"]
    assert [(r.levelname, getattr(r, "suppressed", None)) for r in records] == [("WARNING", 0), ("WARNING", 499)]
    assert [(getattr(r, "server", None), getattr(r, "tool", None)) for r in records] == [("a", "echo")] * 2
    assert records[0].getMessage().startswith("server=a tool=echo call failed: server 'a' is reconnecting")


async def test_a_servers_lifecycle_records_carry_server_and_generation_as_fields(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="supervisor.server_actor")
    fake = FakeServer([tool("echo")], name="a")
    actor = ServerActor(_down_server_settings(), Registry(), connector=fake.connect)
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await actor.wait_first_attempt()
            fake.drop()
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(1)  # the backoff, then generation 2 comes up
            nursery.cancel_scope.cancel()
    fields = [(r.getMessage().split(":")[0], getattr(r, "server", None), getattr(r, "generation", None))
              for r in caplog.records if r.name == "supervisor.server_actor"]  # fmt: skip
    assert fields == [
        ("server=a generation=1 ready", "a", 1),
        ("server=a generation=1 ended", "a", 1),
        ("server=a generation=2 ready", "a", 2),
    ]
