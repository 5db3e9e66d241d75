"""Catalogs kept on disk (issue 57): the user's alone, never trusted when damaged or foreign, keyed by what shapes them.

``catalog.disk`` in the fast lane: real files in the test's own state directory
(``conftest.private_state_home``), no process.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from pathlib import Path

import pytest

from supervisor.catalog.disk import (
    ALL_FACTS,
    CatalogFiles,
    ServerRecord,
    StoredEntry,
    ViewFacts,
    ViewSnapshot,
    snapshot_key,
)
from supervisor.config.models import Settings, SupervisorSection
from supervisor.config.servers import ServerSettings
from supervisor.config.token_paths import pin_file
from supervisor.config.transforms import ToolTransformSettings

TARGET = "stdio:python -m demo"
LISTING = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}


def _entry(expires_in_sec: float, method: str = "tools/list") -> StoredEntry:
    return StoredEntry(method, '["private","2025-11-25","t","local"]', "private", time.time() + expires_in_sec, LISTING)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    records = caplog.records
    return [r.getMessage() for r in records if r.name == "supervisor.catalog.disk" and r.levelno >= logging.WARNING]


def test_a_servers_record_round_trips_in_a_file_only_its_user_may_read() -> None:
    files = CatalogFiles(None, "local")
    files.write_server(ServerRecord("demo", TARGET, "demo@1.0", (_entry(60), _entry(60, "prompts/list"))))
    path = files.server_path("demo")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    record = files.read_server("demo", TARGET)
    assert record is not None
    assert record.identity == "demo@1.0"
    assert [e.method for e in record.entries] == ["tools/list", "prompts/list"]
    assert record.entries[0].value == LISTING


def test_expired_entries_are_left_out_and_a_record_without_entries_removes_the_file() -> None:
    files = CatalogFiles(None, "local")
    files.write_server(ServerRecord("demo", TARGET, "demo@1.0", (_entry(-1), _entry(60, "prompts/list"))))
    record = files.read_server("demo", TARGET)
    assert record is not None and [e.method for e in record.entries] == ["prompts/list"]
    files.write_server(ServerRecord("demo", TARGET, "demo@1.0", ()))
    assert not files.server_path("demo").exists()


def test_a_record_for_another_target_loads_nothing_silently(caplog: pytest.LogCaptureFixture) -> None:
    files = CatalogFiles(None, "local")
    files.write_server(ServerRecord("demo", TARGET, "demo@1.0", (_entry(60),)))
    assert files.read_server("demo", "stdio:python -m demo --other") is None  # a new command: a new identity (I6)
    assert _warnings(caplog) == []


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "damaged"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"format": 1, "kind": "mcp-supervisor/view-snapshot", "server": "demo"}', "another format or server"),
        (b'{"format": 1, "kind": "mcp-supervisor/catalog", "server": "demo", "target": "stdio:python -m demo"}', ""),
    ],
)
def test_a_damaged_or_foreign_file_is_ignored_with_one_warning_never_trusted(
    content: bytes, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    files = CatalogFiles(None, "local")
    path = files.server_path("demo")
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(content)
    path.chmod(0o600)
    assert files.read_server("demo", TARGET) is None
    assert files.read_server("demo", TARGET) is None
    (warning,) = _warnings(caplog)
    assert str(path) in warning and "ignored" in warning and why in warning


def test_a_file_others_may_read_is_refused() -> None:
    files = CatalogFiles(None, "local")
    files.write_server(ServerRecord("demo", TARGET, "demo@1.0", (_entry(60),)))
    files.server_path("demo").chmod(0o644)
    assert files.read_server("demo", TARGET) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_directory_that_cannot_be_written_is_a_warning_never_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    files = CatalogFiles(str(locked), "local")
    files.write_server(ServerRecord("demo", TARGET, "demo@1.0", (_entry(60),)))
    assert any("cannot be kept on disk" in w for w in _warnings(caplog))


def test_a_catalog_path_that_is_a_file_is_a_warning_never_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "state"
    blocked.write_text("not a directory")
    files = CatalogFiles(str(blocked), "local")
    files.write_server(ServerRecord("demo", TARGET, "demo@1.0", (_entry(60),)))
    files.write_view(ViewSnapshot("", "k", ALL_FACTS))
    assert files.read_server("demo", TARGET) is None
    assert any("cannot be kept on disk" in w for w in _warnings(caplog))


def test_a_view_snapshot_answers_while_fresh_and_only_under_its_key() -> None:
    files = CatalogFiles(None, "local")
    facts = ViewFacts(prompts=False, resources=True, templates=False)
    now = time.time()
    answers = {"tools/list": {"2025-11-25": '{"tools":[]}'}, "prompts/list": {"2025-11-25": '{"prompts":[]}'}}
    files.write_view(ViewSnapshot("code", "key-1", facts, answers, {"tools/list": now + 60, "prompts/list": now - 1}))
    assert files.read_view("code", "key-2") is None
    snapshot = files.read_view("code", "key-1")
    assert snapshot is not None and snapshot.facts == facts
    assert snapshot.answer("tools/list", "2025-11-25") == '{"tools":[]}'
    assert snapshot.answer("tools/list", "2026-07-28") is None
    assert snapshot.answer("prompts/list", "2025-11-25") is None, "expired"
    assert snapshot.answer("tools/list", "2025-11-25", now=now + 61) is None


def _settings(**supervisor: object) -> Settings:
    servers = {"demo": ServerSettings(name="demo", command="python", args=["-m", "demo"])}
    return Settings(supervisor=SupervisorSection.model_validate(supervisor), mcp_servers=servers)


def test_a_snapshots_key_moves_with_what_shapes_a_listing_and_not_with_logging() -> None:
    base = snapshot_key(_settings(), "")
    assert snapshot_key(_settings(log_level="debug", log_format="json"), "") == base
    assert snapshot_key(_settings(), "code") != base
    assert snapshot_key(_settings(principal="team"), "") != base
    assert snapshot_key(_settings(names={"form": "mcp"}), "") != base
    renamed = _settings()
    renamed.mcp_servers["demo"] = ServerSettings(
        name="demo", command="python", args=["-m", "demo"], tools={"echo": ToolTransformSettings(name="say")}
    )
    assert snapshot_key(renamed, "") != base


def test_a_snapshots_key_moves_when_a_pin_file_changes() -> None:
    before = snapshot_key(_settings(), "")
    pins = pin_file(None, "local", "demo")
    pins.parent.mkdir(parents=True)
    pins.write_text("{}")
    pinned = snapshot_key(_settings(), "")
    assert pinned != before
    assert snapshot_key(_settings(), "") == pinned
    pins.write_text('{"approved": 1}')
    assert snapshot_key(_settings(), "") != pinned
