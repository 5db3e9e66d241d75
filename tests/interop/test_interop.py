"""Interop: servers nobody here wrote, behind the sidecar, for hosts of both protocol eras (DESIGN §6).

* ``@modelcontextprotocol/server-everything`` (npm, TypeScript SDK 1.x, handshake era), run with
  ``node …/dist/index.js stdio``. After ``initialized`` it registers more tools and announces
  ``notifications/tools/list_changed``; its ``toggle-simulated-logging`` tool starts
  ``notifications/message`` logging on a ``setInterval`` timer, which also keeps node alive
  after stdin EOF, so only the sidecar's signal ends it (the ``no_orphans`` fixture checks).
* ``mcp-server-time`` (PyPI, ``mcp`` SDK 1.x), run from its own venv because its SDK
  conflicts with ours; to an ``auto`` client it answers ``server/discover`` with an error
  and the handshake fallback takes over.

Both are installed, at the versions pinned in ``tests/interop/``, by
``tests/interop/install.sh`` (``.ci/run`` calls it). A missing or stale install fails the
test with that instruction; it never skips. Every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import pytest
import trio
from mcp.client.client import ConnectMode

from tests.sidecar import HOST_MODES, REPO_ROOT, command_server, open_host, scaled, text_of, write_settings

pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("mode", HOST_MODES)]

INTEROP_DIR: Final = REPO_ROOT / "tests" / "interop"
INSTALL_HINT: Final = "run tests/interop/install.sh (.ci/run does)"
EVERYTHING_JS: Final = INTEROP_DIR / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
TIME_BIN: Final = INTEROP_DIR / ".venv-time/bin/mcp-server-time"

BOUND_SEC: Final = scaled(60)
"""Per test; a run takes ~3 s, most of it node's and the time server's startup (far slower under load)."""
CATALOG_BOUND_SEC: Final = scaled(45)
NODE_STARTUP_TIMEOUT_SEC: Final = scaled(30)

EVERYTHING_PREFIX: Final = "mcp__everything__"
EVERYTHING_TOOLS: Final = frozenset(
    {
        # Registered before the handshake.
        "echo",
        "get-annotated-message",
        "get-env",
        "get-resource-links",
        "get-resource-reference",
        "get-structured-content",
        "get-sum",
        "get-tiny-image",
        "gzip-file-as-resource",
        "toggle-simulated-logging",
        "toggle-subscriber-updates",
        "trigger-long-running-operation",
        # Registered on ``initialized``, then announced with tools/list_changed.
        "simulate-research-query",
        # Registered only for clients that declare roots / sampling / elicitation: the sidecar declares
        # them all upstream, so it can forward those requests to the host whose call raised them (I13).
        "get-roots-list",
        "trigger-sampling-request",
        "trigger-elicitation-request",
        "trigger-url-elicitation",
    }
)
TIME_TOOLS: Final = frozenset({"mcp__time__get_current_time", "mcp__time__convert_time"})


def require_installed(what: str, artifact: Path, stamp: Path, lock: Path) -> None:
    """Fail (never skip) unless ``install.sh`` installed ``what`` from ``lock`` as it is now."""
    if not artifact.exists():
        pytest.fail(f"{what} is not installed ({artifact} is missing): {INSTALL_HINT}", pytrace=False)
    if not stamp.exists() or stamp.read_text().strip() != hashlib.sha256(lock.read_bytes()).hexdigest():
        pytest.fail(f"{what} is installed but does not match {lock.name}: {INSTALL_HINT}", pytrace=False)


@pytest.fixture
def time_server() -> dict[str, object]:
    """mcp-server-time's settings table, run from its own venv."""
    require_installed(
        "mcp-server-time",
        TIME_BIN,
        INTEROP_DIR / ".venv-time/.interop-stamp",
        INTEROP_DIR / "requirements-time.txt",
    )
    return command_server([str(TIME_BIN)])


def _everything_names() -> frozenset[str]:
    return frozenset(EVERYTHING_PREFIX + tool for tool in EVERYTHING_TOOLS)


async def test_server_everything_is_served_under_its_prefix_and_echo_and_get_sum_answer_through_the_sidecar(
    tmp_path: Path, mode: ConnectMode, everything_server: dict[str, object]
) -> None:
    config = write_settings(tmp_path, {"everything": everything_server})
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode) as host:
            expected = _everything_names()
            names = await host.wait_tools(lambda n: set(n) >= expected, bound_sec=CATALOG_BOUND_SEC)
            # Exactly the upstream's tools, each once, all under the server's prefix.
            assert sorted(names) == sorted(expected)

            echoed = await host.call("mcp__everything__echo", {"message": "hello through the sidecar"})
            assert not echoed.is_error, echoed
            assert text_of(echoed) == "Echo: hello through the sidecar"

            summed = await host.call("mcp__everything__get-sum", {"a": 2, "b": 40.5})
            assert not summed.is_error, summed
            assert text_of(summed) == "The sum of 2 and 40.5 is 42.5."

            # The upstream validates arguments itself; its refusal reaches the host as a tool error.
            refused = await host.call("mcp__everything__get-sum", {"a": "two", "b": 40})
            assert refused.is_error, refused
        assert host.bad_frames == []
        assert host.exit_code == 0


async def test_server_everything_notifications_break_nothing_and_the_sidecar_terminates_it_though_it_ignores_eof(
    tmp_path: Path, mode: ConnectMode, everything_server: dict[str, object]
) -> None:
    config = write_settings(tmp_path, {"everything": everything_server})
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode) as host:
            expected = _everything_names()
            names = await host.wait_tools(lambda n: set(n) >= expected, bound_sec=CATALOG_BOUND_SEC)
            # The startup tools/list_changed left one consistent catalog behind.
            assert sorted(names) == sorted(expected)

            started = await host.call("mcp__everything__toggle-simulated-logging")
            assert not started.is_error, started
            assert text_of(started).startswith("Started simulated, random-leveled logging")
            # Its first notifications/message is sent at once; the connection must survive it and later ones.
            for i in range(5):
                echoed = await host.call("mcp__everything__echo", {"message": f"still here {i}"})
                assert text_of(echoed) == f"Echo: still here {i}"
            assert sorted(await host.tool_names()) == sorted(expected)
        # Node now outlives stdin EOF (its logging timer keeps it alive): the no_orphans
        # fixture proves the sidecar signalled it, and the sidecar still exited cleanly.
        assert host.bad_frames == []
        assert host.exit_code == 0


async def test_mcp_server_time_tools_are_served_and_get_current_time_returns_the_time(
    tmp_path: Path, mode: ConnectMode, time_server: dict[str, object]
) -> None:
    config = write_settings(tmp_path, {"time": time_server})
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, mode) as host:
            names = await host.wait_tools(lambda n: set(n) >= TIME_TOOLS, bound_sec=CATALOG_BOUND_SEC)
            assert sorted(names) == sorted(TIME_TOOLS)

            before = datetime.now(UTC)
            result = await host.call("mcp__time__get_current_time", {"timezone": "UTC"})
            after = datetime.now(UTC)
            assert not result.is_error, result
            answer = json.loads(text_of(result))
            assert answer["timezone"] == "UTC"
            told = datetime.fromisoformat(answer["datetime"])
            assert told.utcoffset() == timedelta(0)
            # The server reports whole seconds.
            assert before - timedelta(seconds=1) <= told <= after, (before, told, after)

            converted = await host.call(
                "mcp__time__convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            )
            assert not converted.is_error, converted
            target = json.loads(text_of(converted))["target"]
            assert target["timezone"] == "Asia/Tokyo"
            assert datetime.fromisoformat(target["datetime"]).strftime("%H:%M%z") == "21:00+0900"
        assert host.bad_frames == []
        assert host.exit_code == 0
