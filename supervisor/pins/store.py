"""The pin store: a server's pinned definitions, per principal (issue 27).

:class:`PinStore` is what the sidecar and the CLI use; :class:`FilePinStore`
is the default, one JSON file per (principal, server) beside the token store:
``<store>/pins/<principal>/<server>.json`` (:func:`pin_file`), where
``<store>`` is the ``[supervisor] token_store`` setting, else
``$XDG_STATE_HOME/mcp-supervisor``, else ``~/.local/state/mcp-supervisor``.

A file::

    {"version": 1, "server": "files", "pins": [
        {"kind": "tool", "name": "read_file", "fingerprint": "<sha-256 hex>",
         "source": "first-use", "pinned_at": "2025-06-01T12:00:00+00:00",
         "definition": {"name": "read_file", "description": "…", …}}]}

Written with ``ensure_ascii`` on, so hidden characters in a stored definition
read as ``\\u200b`` escapes to anyone who opens the file. The fingerprint is
what is compared; ``definition`` is kept to show a diff (it is not re-hashed on
load, so a hand edit of it changes only what a diff shows).

Safety (:mod:`supervisor.config.private_files`): mode 0600 in 0700
directories, atomic replace (a reader sees the old file or the new, never half),
and every read-modify-write under an exclusive ``flock`` on ``<server>.json.lock``
so the sidecar (first-use pins) and the CLI (``pins approve``) never lose each
other's writes. A damaged file, one with a mode wider than 0600, or one that
cannot be read raises :class:`PinFileRefused` naming the file and the fix; it
is never re-pinned silently (that would trust whatever the server lists now).

Concurrency: the async methods run the blocking file work in a worker thread
(``trio.to_thread.run_sync``: a 5,000-tool file is megabytes), except for a small
file (``INLINE_BYTES``), which is read and written inline, then checkpointed: a
thread hop would cost more than the I/O, and a test on trio's virtual clock
would see the hop as idle time and jump its clock past every deadline. A lock held by
another process is retried every ``LOCK_RETRY_SEC`` from the trio side, never
waited for in a thread, so a caller's ``fail_after`` can always cancel the
wait; the file work itself is short and not abandoned. ``signature`` is a
single ``stat``, done inline. The module-level ``*_pins`` functions are the
same operations, blocking, for callers without trio.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar, assert_never

import trio

from supervisor.config.models import Settings
from supervisor.config.private_files import (
    PrivateFileRefused,
    Refusal,
    exclusive_lock,
    read_private_json,
    write_private_bytes,
)
from supervisor.config.token_paths import file_signature, pin_file
from supervisor.config.values import server_name_problem
from supervisor.errors import ConfigError
from supervisor.pins.judge import PIN_KINDS, PIN_SOURCES, PinKey, PinRecord

FORMAT_VERSION: Final = 1
LOCK_RETRY_SEC: Final = 0.05
INLINE_BYTES: Final = 64 * 1024
"""A pin file up to this size is read and written in the trio thread (well under a millisecond); larger, in a worker."""
INLINE_RECORDS: Final = 50
"""An update of up to this many records (and a small file) is written inline too."""
T = TypeVar("T")
_FINGERPRINT: Final = re.compile(r"[0-9a-f]{64}")

PinSignature = Hashable
"""An opaque value that changes whenever a server's pins change (compare with ``==``)."""


class PinFileRefused(ConfigError):
    """A pin file exists but must not be used: damaged, unreadable, or its mode is wider than 0600."""


class PinStore(Protocol):
    """Where pins live: a file per server (:class:`FilePinStore`), later the fleet store.

    Every method is about one server of this store's principal.
    """

    async def load(self, server: str) -> dict[PinKey, PinRecord] | None:
        """The server's records; None if it was never pinned (the next judgement is a first use).

        Raises:
            PinFileRefused: The stored pins cannot be used.
        """
        ...

    async def update(self, server: str, records: Mapping[PinKey, PinRecord]) -> None:
        """Add or replace ``records``, keeping every other record; an empty ``records`` marks the server pinned."""
        ...

    async def replace(self, server: str, records: Mapping[PinKey, PinRecord]) -> None:
        """Make ``records`` the server's only records."""
        ...

    async def reset(self, server: str) -> bool:
        """Forget the server's pins (``pins reset``): the next sync pins it afresh. Whether there were any."""
        ...

    async def signature(self, server: str) -> PinSignature | None:
        """A cheap value that changes when the server's pins change (poll it to see an approval); None if none."""
        ...

    async def load_seen(self, server: str) -> dict[PinKey, PinRecord]:
        """What this machine's sidecar last saw of the definitions it did not serve as pinned (``pins diff``)."""
        ...

    async def note_seen(self, server: str, records: Mapping[PinKey, PinRecord]) -> None:
        """Record what the sidecar sees of its changed, new and flagged definitions (replaces the last note)."""
        ...


class FilePinStore:
    """:class:`PinStore` over files: ``<store>/pins/<principal>/<server>.json``.

    Args:
        store_dir_setting: ``[supervisor] token_store`` (None: the default state directory).
        principal: ``[supervisor] principal``; principals never share pins.
    """

    def __init__(self, store_dir_setting: str | None, principal: str) -> None:
        self._store_dir_setting = store_dir_setting
        self._principal = principal

    def path(self, server: str) -> Path:
        """The server's pin file.

        Raises:
            ValueError: ``server`` is not a valid server name (it must not walk out of the directory).
        """
        if (problem := server_name_problem(server)) is not None:
            raise ValueError(f"not a server name: {server!r} ({problem})")
        return pin_file(self._store_dir_setting, self._principal, server)

    async def load(self, server: str) -> dict[PinKey, PinRecord] | None:
        path = self.path(server)
        return await _run(partial(read_pins, path, server), inline=_small(path))

    async def update(self, server: str, records: Mapping[PinKey, PinRecord]) -> None:
        path = self.path(server)
        work = partial(_update, path, server, dict(records), merge=True)
        await _retry_while_locked(work, inline=_small(path) and len(records) <= INLINE_RECORDS)

    async def replace(self, server: str, records: Mapping[PinKey, PinRecord]) -> None:
        work = partial(_update, self.path(server), server, dict(records), merge=False)
        await _retry_while_locked(work, inline=len(records) <= INLINE_RECORDS)

    async def reset(self, server: str) -> bool:
        outcome = await _retry_while_locked(partial(_remove, self.path(server)), inline=True)
        return outcome is True

    async def signature(self, server: str) -> PinSignature | None:
        signature = file_signature(self.path(server))
        await trio.lowlevel.checkpoint()
        return signature

    async def load_seen(self, server: str) -> dict[PinKey, PinRecord]:
        path = seen_file(self.path(server))
        return await _run(partial(read_seen, path, server), inline=_small(path))

    async def note_seen(self, server: str, records: Mapping[PinKey, PinRecord]) -> None:
        path = seen_file(self.path(server))
        await _run(partial(write_seen, path, server, dict(records)), inline=len(records) <= INLINE_RECORDS)


# -- blocking operations (the CLI may call these directly) ----------------------------------------


def read_pins(path: Path, server: str) -> dict[PinKey, PinRecord] | None:
    """The records in the pin file ``path`` of ``server``; None if there is no file.

    Raises:
        PinFileRefused: The file is damaged, unreadable, or its mode is wider than 0600.
    """
    try:
        document = read_private_json(path)
    except PrivateFileRefused as refused:
        raise PinFileRefused(_refusal_message(refused.refusal, server)) from refused
    if document is None:
        return None
    try:
        return _records(document)
    except ValueError as exc:
        raise PinFileRefused(_refusal_message(Refusal(path, "damaged", None, str(exc)), server)) from exc


def seen_file(path: Path) -> Path:
    """Where the sidecar notes what it saw of the definitions it did not serve as pinned: ``<server>.seen.json``.

    A file of its own, so noting what was seen never moves the pin file's signature (an approval does).
    """
    return path.with_name(f"{path.stem}.seen.json")


def read_seen(path: Path, server: str) -> dict[PinKey, PinRecord]:
    """The records of a seen file (empty if there is none).

    Raises:
        PinFileRefused: The file is damaged, unreadable, or its mode is wider than 0600.
    """
    return read_pins(path, server) or {}


def write_seen(path: Path, server: str, records: dict[PinKey, PinRecord]) -> None:
    """Replace the seen file with ``records`` (atomic; no lock: one sidecar per machine writes it)."""
    if records:
        write_private_bytes(path, encode_pins(server, records))
    else:
        path.unlink(missing_ok=True)


def check_pin_files(settings: Settings) -> None:
    """Read every pinned server's pin file once, so a damaged one stops ``run`` at once, naming the file.

    Raises:
        PinFileRefused: A pin file is damaged, unreadable, or its mode is wider than 0600.
    """
    store = FilePinStore(settings.supervisor.token_store, settings.supervisor.principal)
    for name, server in settings.mcp_servers.items():
        if server.enabled and server.pin != "off":
            read_pins(store.path(name), name)


def update_pins(path: Path, server: str, records: Mapping[PinKey, PinRecord]) -> None:
    """Merge ``records`` into the pin file under its lock (waits for the lock)."""
    _update(path, server, dict(records), merge=True, blocking=True)


def replace_pins(path: Path, server: str, records: Mapping[PinKey, PinRecord]) -> None:
    """Make ``records`` the whole pin file, under its lock (waits for the lock)."""
    _update(path, server, dict(records), merge=False, blocking=True)


def remove_pins(path: Path) -> bool:
    """Delete the pin file under its lock (the lock file stays); whether there was one."""
    return _remove(path, blocking=True) is True


def record_entry(key: PinKey, record: PinRecord) -> dict[str, Any]:
    """One record as its file entry (the fleet store keeps the same entry as one hash field's JSON)."""
    kind, name = key
    return {
        "kind": kind,
        "name": name,
        "fingerprint": record.fingerprint,
        "source": record.source,
        "pinned_at": record.pinned_at,
        "definition": record.definition,
    }


def record_of_entry(entry: Any, where: str = "pins[0]") -> tuple[PinKey, PinRecord]:
    """The key and record of one entry; ``ValueError`` saying what is wrong."""
    return _record(entry, where)


def encode_pins(server: str, records: Mapping[PinKey, PinRecord]) -> bytes:
    """The file text of ``records``: sorted by key, so a rewrite of the same pins is the same bytes."""
    pins = [record_entry(key, record) for key, record in sorted(records.items())]
    return json.dumps({"version": FORMAT_VERSION, "server": server, "pins": pins}, indent=1).encode("ascii")


# -- internals ------------------------------------------------------------------------------------


class _Busy:
    """Another holder has the lock: try again."""


_BUSY: Final = _Busy()


def _small(path: Path) -> bool:
    """Whether the pin file is small enough to read inline (or does not exist)."""
    try:
        return path.stat().st_size <= INLINE_BYTES
    except OSError:
        return True


async def _run(work: Callable[[], T], *, inline: bool) -> T:
    if inline:
        result = work()
        await trio.lowlevel.checkpoint()
        return result
    return await trio.to_thread.run_sync(work)


async def _retry_while_locked(work: partial[object], *, inline: bool) -> object:
    # flock has no way to wake a trio task, and a thread parked in flock could not be cancelled:
    # try without waiting, and sleep between tries (the lock is held for one small file write).
    while True:
        outcome = await _run(partial(work, blocking=False), inline=inline)
        if outcome is not _BUSY:
            return outcome
        await trio.sleep(LOCK_RETRY_SEC)


def _update(path: Path, server: str, records: dict[PinKey, PinRecord], *, merge: bool, blocking: bool) -> object:
    with exclusive_lock(path, blocking=blocking) as held:
        if not held:
            return _BUSY
        merged = {**(read_pins(path, server) or {}), **records} if merge else records
        write_private_bytes(path, encode_pins(server, merged))
        return None


def _remove(path: Path, *, blocking: bool) -> object:
    with exclusive_lock(path, blocking=blocking) as held:
        if not held:
            return _BUSY
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        return True


def _refusal_message(refusal: Refusal, server: str) -> str:
    path = refusal.path
    reset = f"`mcp-supervisor pins reset {server}`"
    match refusal.reason:
        case "unreadable":
            return (
                f"server {server!r}: cannot read the pin file {path} ({refusal.detail}); its tools are not "
                f"served unpinned. Fix the file's permissions (`chmod 600 {path}`), or run {reset} to pin the "
                "server's current definitions afresh"
            )
        case "too-wide":
            return (
                f"server {server!r}: the pin file {path} has mode {refusal.mode or 0:04o}, wider than 0600, so "
                f"other users may have read or changed it; it is not used. Run `chmod 600 {path}` if you trust "
                f"its content, or {reset} to pin the server's current definitions afresh"
            )
        case "damaged":
            return (
                f"server {server!r}: the pin file {path} is damaged ({refusal.detail}); it is not used and nothing "
                f"is re-pinned. Run {reset} to pin the server's current definitions afresh (review them with "
                f"`mcp-supervisor pins list {server}` after)"
            )
        case unreachable:
            assert_never(unreachable)


def _records(document: Any) -> dict[PinKey, PinRecord]:
    """The records of a parsed file; ``ValueError`` saying what is wrong."""
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    if document.get("version") != FORMAT_VERSION:
        raise ValueError(f"format version {document.get('version')!r}, this mcp-supervisor reads {FORMAT_VERSION}")
    pins = document.get("pins")
    if not isinstance(pins, list):
        raise ValueError('"pins" is not a list')
    records: dict[PinKey, PinRecord] = {}
    for index, entry in enumerate(pins):
        key, record = _record(entry, f"pins[{index}]")
        if key in records:
            raise ValueError(f"pins[{index}]: {key[0]} {key[1]!r} is pinned twice")
        records[key] = record
    return records


def _record(entry: Any, where: str) -> tuple[PinKey, PinRecord]:
    if not isinstance(entry, dict):
        raise ValueError(f"{where} is not an object")
    kind, name, print_, source = entry.get("kind"), entry.get("name"), entry.get("fingerprint"), entry.get("source")
    pinned_at, definition = entry.get("pinned_at"), entry.get("definition")
    if kind not in PIN_KINDS:
        raise ValueError(f"{where}: kind {kind!r} is not one of {', '.join(PIN_KINDS)}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: no name")
    if not isinstance(print_, str) or not _FINGERPRINT.fullmatch(print_):
        raise ValueError(f"{where} ({name!r}): the fingerprint is not a SHA-256 hex digest")
    if source not in PIN_SOURCES:
        raise ValueError(f"{where} ({name!r}): source {source!r} is not one of {', '.join(PIN_SOURCES)}")
    if not isinstance(pinned_at, str):
        raise ValueError(f"{where} ({name!r}): no pinned_at")
    if not isinstance(definition, dict):
        raise ValueError(f"{where} ({name!r}): no definition")
    return (kind, name), PinRecord(print_, definition, source, pinned_at)


__all__ = [
    "FORMAT_VERSION",
    "LOCK_RETRY_SEC",
    "FilePinStore",
    "PinFileRefused",
    "PinSignature",
    "PinStore",
    "check_pin_files",
    "encode_pins",
    "pin_file",
    "read_pins",
    "read_seen",
    "record_entry",
    "record_of_entry",
    "remove_pins",
    "replace_pins",
    "seen_file",
    "update_pins",
    "write_seen",
]
