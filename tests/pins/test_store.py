"""The file pin store (issue 27): layout, modes, atomic writes, refusals that name the file, locked merges."""

from __future__ import annotations

import json
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from supervisor.config.private_files import exclusive_lock
from supervisor.pins.fingerprint import Definition, fingerprint
from supervisor.pins.judge import PinKey, PinRecord
from supervisor.pins.store import FilePinStore, PinFileRefused, PinStore, read_pins, replace_pins, update_pins

BOUND_SEC = 10.0
NOW = "2025-06-01T12:00:00+00:00"


def _record(name: str, description: str = "Does things.") -> tuple[PinKey, PinRecord]:
    definition: Definition = {"name": name, "description": description, "inputSchema": {"type": "object"}}
    return ("tool", name), PinRecord(fingerprint(definition), definition, "first-use", NOW)


def _records(*names: str) -> dict[PinKey, PinRecord]:
    return dict(_record(name) for name in names)


def _store(tmp_path: Path, principal: str = "local") -> FilePinStore:
    return FilePinStore(str(tmp_path / "state"), principal)


async def test_pins_round_trip_through_the_file_with_prompts_and_non_ascii_text(tmp_path: Path) -> None:
    store: PinStore = _store(tmp_path)
    key, record = _record("search", "Sucht Vorgänge.\u200b")
    prompt: Definition = {"name": "review", "arguments": [{"name": "pr", "required": True}]}
    records = {key: record, ("prompt", "review"): PinRecord(fingerprint(prompt), prompt, "approved", NOW)}
    with trio.fail_after(BOUND_SEC):
        assert await store.load("files") is None
        await store.update("files", records)
        assert await store.load("files") == records


async def test_the_file_is_mode_0600_in_0700_directories_beside_the_token_store(tmp_path: Path) -> None:
    store = _store(tmp_path, principal="alice@example.com")
    with trio.fail_after(BOUND_SEC):
        await store.update("files", _records("search"))
    path = store.path("files")
    assert path == tmp_path / "state" / "pins" / "alice_example.com" / "files.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for directory in (path.parent, path.parent.parent, path.parent.parent.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert sorted(p.name for p in path.parent.iterdir()) == ["files.json", "files.json.lock"]  # no temporary left


def test_without_a_token_store_setting_pins_live_in_the_xdg_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert FilePinStore(None, "..").path("files") == tmp_path / "mcp-supervisor" / "pins" / "_.." / "files.json"


def test_a_server_name_that_could_leave_the_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a server name"):
        _store(tmp_path).path("../../etc/passwd")


async def test_principals_never_share_pins(tmp_path: Path) -> None:
    alice, bob = _store(tmp_path, "alice"), _store(tmp_path, "bob")
    with trio.fail_after(BOUND_SEC):
        await alice.update("files", _records("search"))
        assert await bob.load("files") is None


async def test_an_empty_update_marks_a_server_as_pinned(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with trio.fail_after(BOUND_SEC):
        await store.update("files", {})
        assert await store.load("files") == {}


async def test_update_merges_replace_replaces_and_reset_forgets(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with trio.fail_after(BOUND_SEC):
        await store.update("files", _records("a", "b"))
        changed = dict([_record("b", "Other words.")])
        await store.update("files", {**changed, **_records("c")})
        assert await store.load("files") == {**_records("a", "c"), **changed}
        await store.replace("files", _records("z"))
        assert await store.load("files") == _records("z")
        assert await store.reset("files") is True
        assert await store.load("files") is None
        assert await store.reset("files") is False


async def test_the_signature_is_none_before_any_pin_and_changes_with_every_write(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with trio.fail_after(BOUND_SEC):
        assert await store.signature("files") is None
        await store.update("files", _records("a"))
        first = await store.signature("files")
        assert first is not None and await store.signature("files") == first
        await store.update("files", _records("b"))
        assert await store.signature("files") not in (None, first)


# -- refusals -------------------------------------------------------------------------------------------


async def test_a_pin_file_with_a_mode_wider_than_0600_is_refused_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with trio.fail_after(BOUND_SEC):
        await store.update("files", _records("a"))
        path = store.path("files")
        path.chmod(0o644)
        with pytest.raises(PinFileRefused) as refused:
            await store.load("files")
    message = str(refused.value)
    assert str(path) in message and "mode 0644, wider than 0600" in message
    assert f"chmod 600 {path}" in message and "mcp-supervisor pins reset files" in message


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"version": 1, "pins": [', "Expecting"),
        ("[]", "not a JSON object"),
        ('{"version": 9, "pins": []}', "format version 9"),
        ('{"version": 1, "pins": [{"kind": "tool", "name": "a"}]}', "pins[0] ('a'): the fingerprint"),
        ('{"version": 1, "pins": [{"kind": "resource", "name": "a"}]}', "kind 'resource'"),
    ],
)
async def test_a_damaged_pin_file_is_refused_naming_the_file_and_never_re_pinned(
    tmp_path: Path, text: str, why: str
) -> None:
    store = _store(tmp_path)
    path = store.path("files")
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    with trio.fail_after(BOUND_SEC):
        with pytest.raises(PinFileRefused) as refused:
            await store.load("files")
        message = str(refused.value)
        assert str(path) in message and "is damaged" in message and why in message
        assert "mcp-supervisor pins reset files" in message
        with pytest.raises(PinFileRefused):  # a merge into it does not overwrite it either
            await store.update("files", _records("a"))
        assert path.read_text(encoding="utf-8") == text
        assert await store.reset("files") is True  # the fix the message names works
        assert await store.load("files") is None


def test_a_pin_file_that_cannot_be_read_is_refused_naming_the_file(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = store.path("files")
    path.parent.parent.mkdir(parents=True)
    path.parent.write_text("not a directory", encoding="utf-8")  # so stat fails (ENOTDIR), even for root
    with pytest.raises(PinFileRefused, match=rf"cannot read the pin file {path}.*pins reset files"):
        read_pins(path, "files")


def test_a_pin_record_twice_in_a_file_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "files.json"
    update_pins(path, "files", _records("a"))
    document = json.loads(path.read_text(encoding="utf-8"))
    document["pins"].append(document["pins"][0])
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(PinFileRefused, match="pinned twice"):
        read_pins(path, "files")


# -- concurrency ----------------------------------------------------------------------------------------


def test_concurrent_updates_from_two_threads_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "pins" / "local" / "files.json"
    errors: list[BaseException] = []

    def writer(prefix: str) -> None:
        try:
            for i in range(40):
                update_pins(path, "files", _records(f"{prefix}{i}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(prefix,)) for prefix in ("sidecar-", "cli-")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=BOUND_SEC)
        assert not thread.is_alive()
    assert errors == []
    assert read_pins(path, "files") == _records(*(f"{p}{i}" for p in ("sidecar-", "cli-") for i in range(40)))


def test_a_reader_never_sees_half_a_file(tmp_path: Path) -> None:
    path = tmp_path / "files.json"
    small = _records("a")
    large = _records(*(f"tool_{i}" for i in range(1000)))  # ~0.2 MB: the old file is replaced, never rewritten
    replace_pins(path, "files", small)
    seen: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                records = read_pins(path, "files")
                assert records in (small, large)
                seen.append(len(records or {}))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(10):
            replace_pins(path, "files", large)
            replace_pins(path, "files", small)
    finally:
        stop.set()
        thread.join(timeout=BOUND_SEC)
    assert not thread.is_alive() and errors == []
    assert seen


@contextmanager
def _locked_elsewhere(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock from another thread (the CLI in another process), for at most BOUND_SEC.

    The bound matters: were an update to park a thread in a blocking flock, this
    release is what lets the test end (and fail) instead of hanging.
    """
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with exclusive_lock(path):
            held.set()
            release.wait(timeout=BOUND_SEC)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(timeout=BOUND_SEC)
        yield
    finally:
        release.set()
        thread.join(timeout=BOUND_SEC)


async def test_an_update_waits_for_a_lock_held_by_another_writer_then_writes(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = store.path("files")
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            with _locked_elsewhere(path):
                nursery.start_soon(store.update, "files", _records("a"))
                await trio.testing.wait_all_tasks_blocked()
                assert not path.exists()
        assert await store.load("files") == _records("a")


async def test_an_update_waiting_for_a_held_lock_can_be_cancelled(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = store.path("files")
    with trio.fail_after(BOUND_SEC / 2), _locked_elsewhere(path):
        with trio.move_on_after(0.2) as scope:  # a caller's bound (settings give it in real use)
            await store.update("files", _records("a"))
        assert scope.cancelled_caught
        assert not path.exists()
