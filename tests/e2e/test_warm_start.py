"""A fresh sidecar starts from the catalogs on disk (issue 57, item 1): the first lists before its servers are up.

Each test starts the sidecar twice on one state directory. The second start's
server waits at a gate (``--start-gate``: a FIFO the test writes when it wants
the server up), so what the host is answered before the test opens it cannot
have come from the server: it came from disk, through the prelude. Once the
server is up, a catalog that matches what the host holds tells it nothing; one
that changed (the server was upgraded between the starts) is swapped in with
one ``list_changed``, as after a reconnect. A server that says its catalog may
not be kept (``ttlMs`` 0) is not served from disk, and a damaged file is
ignored with a warning.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.client.client import ConnectMode

from tests.sidecar import HOST_MODES, Host, fixture_server, open_host, read_log, scaled, text_of, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(60)


class _Gate:
    """A FIFO the fixture waits on (``--start-gate``); held open, so the byte that opens it waits for the server."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)

    def open(self) -> None:
        os.write(self._fd, b"x")

    def close(self) -> None:
        os.close(self._fd)


def _requests(log: Path, method: str) -> list[dict[str, Any]]:
    return [e for e in read_log(log) if e["event"] == "request" and e.get("method") == method]


def _served(log: Path) -> int:
    """How many of the fixture's starts have passed their gate."""
    return sum(e["event"] == "serving" for e in read_log(log))


def _server(tmp_path: Path, *extra: str, gate: Path | None = None) -> dict[str, Any]:
    args = ["--name", "fx", "--log", str(tmp_path / "fx.jsonl"), "--version-file", str(tmp_path / "version"), *extra]
    return fixture_server(*args, *(["--start-gate", str(gate)] if gate is not None else []))


@asynccontextmanager
async def _gated_start(tmp_path: Path, mode: ConnectMode) -> AsyncIterator[tuple[Host, _Gate]]:
    """The second start: the same settings (the gate's path is the same file), the server held at its gate."""
    gate = _Gate(tmp_path / "gate")
    try:
        async with open_host(tmp_path / "settings.toml", mode) as host:
            yield host, gate
    finally:
        gate.close()
        gate.path.unlink()


async def _first_start(tmp_path: Path, mode: ConnectMode, *extra: str) -> list[str]:
    """Start once with the gate open from the first, list, and stop: the catalog and the view's snapshot are kept."""
    gate = _Gate(tmp_path / "gate")
    gate.open()
    try:
        write_settings(tmp_path, {"fx": _server(tmp_path, *extra, gate=gate.path)})
        async with open_host(tmp_path / "settings.toml", mode) as host:
            return await host.tool_names()
    finally:
        gate.close()
        gate.path.unlink()


@pytest.mark.parametrize("mode", HOST_MODES)
async def test_a_fresh_sidecar_answers_its_first_list_from_disk_and_tells_nothing_when_the_server_agrees(
    tmp_path: Path, mode: ConnectMode
) -> None:
    (tmp_path / "version").write_text("1.0.0")
    with trio.fail_after(BOUND_SEC):
        listed = await _first_start(tmp_path, mode, "--ttl-ms", "300000")
        assert "mcp__fx__echo" in listed
        lists_before = len(_requests(tmp_path / "fx.jsonl", "tools/list"))
        async with _gated_start(tmp_path, mode) as (host, gate):
            assert await host.tool_names() == listed  # the server is still at its gate: this came from disk
            assert _served(tmp_path / "fx.jsonl") == 1, "the second start's server was up already"
            gate.open()
            assert text_of(await host.call("mcp__fx__echo", {"text": "up"})) == "up"  # waits for its first attempt
            # The same name@version within its lifetime: reused, no tools/list round trip (I4 across starts).
            assert len(_requests(tmp_path / "fx.jsonl", "tools/list")) == lists_before
            # Nothing changed for the host: a real change afterwards is the first notice it gets (I22).
            assert text_of(await host.call("mcp__fx__add_tool", {"name": "fresh"})) == "added"
            await host.wait_notice(after=0)
            assert host.notices == 1


@pytest.mark.parametrize("mode", HOST_MODES)
async def test_a_server_upgraded_since_is_listed_live_and_swapped_in_with_one_list_changed(
    tmp_path: Path, mode: ConnectMode
) -> None:
    (tmp_path / "version").write_text("1.0.0")
    grows = tmp_path / "starts"
    grows.mkdir()
    with trio.fail_after(BOUND_SEC):
        listed = await _first_start(tmp_path, mode, "--ttl-ms", "300000", "--grow-per-start", str(grows))
        (tmp_path / "version").write_text("2.0.0")  # the next start lists one tool more, under a new version
        async with _gated_start(tmp_path, mode) as (host, gate):
            assert await host.tool_names() == listed
            gate.open()
            await host.wait_notice(after=0)
            names = await host.tool_names()
            assert set(names) - set(listed) == {"mcp__fx__extra_2"}
            assert host.notices == 1


async def test_a_catalog_the_server_says_not_to_keep_is_not_served_from_disk(tmp_path: Path) -> None:
    (tmp_path / "version").write_text("1.0.0")
    with trio.fail_after(BOUND_SEC):
        await _first_start(tmp_path, "legacy", "--ttl-ms", "0")
        async with _gated_start(tmp_path, "legacy") as (host, gate), trio.open_nursery() as nursery:
            listed: list[list[str]] = []

            async def list_tools() -> None:
                listed.append(await host.tool_names())

            nursery.start_soon(list_tools)
            await host.log.wait_line(r"prelude answered 1 request")  # its initialize; the list went to the Front
            assert not listed, "a list of a catalog with ttlMs 0 was answered before its server was up"
            gate.open()
        assert "mcp__fx__echo" in listed[0]


async def test_a_damaged_catalog_file_is_ignored_with_a_warning_and_the_start_goes_on(
    tmp_path: Path, private_state_home: Path
) -> None:
    (tmp_path / "version").write_text("1.0.0")
    with trio.fail_after(BOUND_SEC):
        await _first_start(tmp_path, "legacy", "--ttl-ms", "300000")
        catalogs = private_state_home / "mcp-supervisor" / "catalogs" / "local"
        for damaged in (catalogs / "fx.json", catalogs / "views" / "_all.json"):
            damaged.write_text("{ not json")
        async with _gated_start(tmp_path, "legacy") as (host, gate):
            gate.open()
            assert "mcp__fx__echo" in await host.tool_names()
            await host.log.wait_line(r"catalog file .*fx\.json ignored")
