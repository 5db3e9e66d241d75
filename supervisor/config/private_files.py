"""Private state files: JSON documents only their owner may read, written atomically (stdlib only).

The token store (:mod:`supervisor.auth.token_store`) and the pin store
(:mod:`supervisor.pins.store`) keep one small JSON file per (principal, server)
under the state directory. They share the mechanics here and keep their own
words: a read that must be refused raises :class:`PrivateFileRefused`, which
each store translates once into its own error (``TokenFileRefused``,
``PinFileRefused``) with the fix for its files.

* **Modes.** Files are created 0600 and every directory this module creates is
  0700 (the XDG base-directory rule for state). A file whose mode lets anyone
  but its owner in is refused, never used.
* **Atomic writes.** A document goes to a fresh ``O_EXCL`` temporary file
  (mode 0600) in the same directory, is fsynced and renamed over the old one,
  so a reader sees the old file or the new one, never half of either. Readers
  therefore take no lock.
* **Read-modify-write.** A writer that merges into a file holds an exclusive
  ``fcntl.flock`` on a sibling lock file (``<name>.lock``), so two processes
  (the sidecar, the CLI) never lose each other's writes. Lock files are never
  deleted: deleting one would let two writers lock two different files.

Concurrency: plain blocking file I/O, no tasks, no awaits; async callers run it
in a thread or accept a short inline stall. ``exclusive_lock(blocking=False)``
lets an async caller retry instead of parking a thread on a held lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

FILE_MODE: Final = 0o600
DIR_MODE: Final = 0o700

RefusalReason = Literal["unreadable", "too-wide", "damaged"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a private file was not read.

    Attributes:
        path: The file.
        reason: ``unreadable`` (it cannot be stat'ed), ``too-wide`` (mode wider
            than 0600), ``damaged`` (it cannot be read or is not JSON).
        mode: The file's permission bits, when known.
        detail: The OS's or the parser's words (``strerror``, a JSON error).
    """

    path: Path
    reason: RefusalReason
    mode: int | None
    detail: str


class PrivateFileRefused(Exception):
    """A private file exists but must not be used; stores translate it into their own ``ConfigError``."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(f"{refusal.path}: {refusal.reason} ({refusal.detail})")
        self.refusal = refusal


def read_private_json(path: Path) -> Any:
    """The JSON document in ``path``, None if there is no file.

    Raises:
        PrivateFileRefused: The file cannot be stat'ed, its mode is wider than
            0600, or it cannot be read or parsed.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PrivateFileRefused(Refusal(path, "unreadable", None, exc.strerror or str(exc))) from exc
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise PrivateFileRefused(Refusal(path, "too-wide", mode, f"mode {mode:04o}"))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PrivateFileRefused(Refusal(path, "damaged", mode, exc.strerror or str(exc))) from exc
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise PrivateFileRefused(Refusal(path, "damaged", mode, str(exc))) from exc


def make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and any missing parents with mode 0700; existing ones are left as they are."""
    missing: list[Path] = []
    for candidate in (directory, *directory.parents):
        if candidate.is_dir():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        candidate.mkdir(mode=DIR_MODE, exist_ok=True)


def write_private_json(path: Path, document: Any) -> None:
    """Replace ``path`` atomically with ``document`` (file 0600; created directories 0700)."""
    write_private_bytes(path, json.dumps(document).encode("utf-8"))


def write_private_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically with ``data``: ``O_EXCL`` temporary (0600), fsync, rename."""
    make_private_dirs(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def lock_file(path: Path) -> Path:
    """The sibling lock file of ``path`` (``files.json`` -> ``files.json.lock``)."""
    return path.with_name(f"{path.name}.lock")


@contextmanager
def exclusive_lock(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path``'s lock file for the ``with`` block.

    Yields:
        True once the lock is held; False (only with ``blocking=False``) if
        another holder has it, in which case nothing is held and the caller
        should retry later.
    """
    lock = lock_file(path)
    make_private_dirs(lock.parent)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "PrivateFileRefused",
    "Refusal",
    "RefusalReason",
    "exclusive_lock",
    "lock_file",
    "make_private_dirs",
    "read_private_json",
    "write_private_bytes",
    "write_private_json",
]
