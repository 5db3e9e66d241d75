"""Catalogs kept on disk: one file per server, one snapshot per view (issue 57; stdlib only).

With ``[supervisor.catalog_store] backend = "file"`` (the default) the response
cache of every server is mirrored into ``<state>/catalogs/<principal>/``:

* ``<server>.json``, a ``ServerRecord``: the server's fresh ``tools/list`` and
  ``prompts/list`` entries, each with the arm (protocol version, target,
  principal) the SDK keyed it under, its scope and the wall time it expires at,
  plus the ``name@version`` that wrote them. A fresh sidecar loads them into its
  cache (``catalog.cache``), so the first sync of a server that reports the same
  identity reuses its catalog with no ``tools/list`` round trip, as a reconnect
  would (I4-I6); the lifetimes are the same (a server's ``ttlMs`` wins, including
  ``0``, which writes nothing).
* ``views/<view>.json``, a ``ViewSnapshot``: what the stdio front last answered
  a host's first-page ``tools/list`` and ``prompts/list`` with, per protocol
  version, and until when every catalog it was made of stays fresh; and what
  the view offers (prompts, resources, templates). The prelude answers a fresh
  sidecar's first lists from it before the SDK is even imported
  (``host.stdio.prelude``).

Both are the user's alone (0600 in 0700 directories, written atomically:
``config.private_files``). A file that cannot be read or written is a warning,
never a failed start; one that is damaged, of another format, or written for
another server, target, principal or settings (``settings_key``) is ignored,
never trusted. A snapshot is keyed by everything that shapes a listing and is
known before a server connects: the resolved settings (logging aside), the
sidecar's and the SDK's versions, and the pin files' signatures, so an edited
transform, view or pin approval retires it.

Time: the response cache runs on ``trio.current_time()``; a file outlives the
process, so what it stores is wall time (``time.time()``), converted at the
one boundary that reads or writes it (``catalog.cache_files``).

Pure functions and small frozen records; plain blocking file I/O, called from a
worker thread or, at start-up, inline. Nothing here awaits.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Final, Literal

from supervisor._version import __version__
from supervisor.config.models import Settings
from supervisor.config.private_files import PrivateFileRefused, read_private_json, write_private_bytes
from supervisor.config.token_paths import file_signature, pin_file, principal_dir_name, store_dir

logger = logging.getLogger(__name__)

FORMAT: Final = 1
SERVER_KIND: Final = "mcp-supervisor/catalog"
VIEW_KIND: Final = "mcp-supervisor/view-snapshot"
SNAPSHOT_METHODS: Final = ("tools/list", "prompts/list")
"""The lists a snapshot answers: those a catalog lifetime may serve (resource lists bypass it, I9)."""
DEFAULT_VIEW_FILE: Final = "_all"
"""The file name of the unnamed view (everything)."""
_LOG_ONLY_KEYS: Final = frozenset({"log_level", "log_format"})
"""``[supervisor]`` keys that shape no listing: changing them keeps the snapshots."""

Scope = Literal["public", "private"]


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One response-cache entry as a file holds it."""

    method: str
    arm: str
    """The SDK's key partition (scope, protocol version, target, principal), kept as the cache made it."""
    scope: Scope
    expires_at: float
    """Wall time (``time.time()``) after which the entry is stale."""
    value: dict[str, Any]
    """The result as JSON (``model_dump(mode="json", by_alias=True, exclude_none=True)``)."""


@dataclass(frozen=True, slots=True)
class ServerRecord:
    """What one server's file holds: its fresh entries and the identity that wrote them."""

    server: str
    target: str
    identity: str | None
    entries: tuple[StoredEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class ViewFacts:
    """What a view offered when its snapshot was made: the capabilities its hosts are declared."""

    prompts: bool
    resources: bool
    templates: bool


ALL_FACTS: Final = ViewFacts(prompts=True, resources=True, templates=True)
"""What a view may offer when nothing is known of it (a first start, or settings changed since)."""


@dataclass(frozen=True, slots=True)
class ViewSnapshot:
    """What the stdio front last answered a view's first lists with, and until when that holds."""

    view: str
    key: str
    facts: ViewFacts
    answers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """method -> protocol version -> the result's JSON text."""
    expires_at: Mapping[str, float] = field(default_factory=dict)
    """method -> the wall time its answers stop being fresh (the earliest of its catalogs' entries)."""

    def answer(self, method: str, version: str, now: float | None = None) -> str | None:
        """The result text for ``method`` in ``version`` while it is fresh, else None."""
        expires = self.expires_at.get(method)
        if expires is None or expires <= (time.time() if now is None else now):
            return None
        return self.answers.get(method, {}).get(version)


class CatalogFiles:
    """Where one principal's catalogs live, and their reads and writes (module docstring)."""

    def __init__(self, store_dir_setting: str | None, principal: str) -> None:
        self.directory = store_dir(store_dir_setting) / "catalogs" / principal_dir_name(principal)
        self._warned: set[str] = set()

    def server_path(self, server: str) -> Path:
        return self.directory / f"{server}.json"

    def view_path(self, view: str) -> Path:
        return self.directory / "views" / f"{view or DEFAULT_VIEW_FILE}.json"

    # -- servers ----------------------------------------------------------------------------

    def read_server(self, server: str, target: str) -> ServerRecord | None:
        """``server``'s record if it was written for ``target``, with the entries still fresh; else None."""
        document = self._read(self.server_path(server))
        if document is None:
            return None
        try:
            if (document["format"], document["kind"], document["server"]) != (FORMAT, SERVER_KIND, server):
                self._foreign(self.server_path(server), "another format or server")
                return None
            if document["target"] != target:
                return None  # the server's command, url or env changed: a new identity (I6)
            identity = document["identity"]
            now = time.time()
            entries = tuple(
                StoredEntry(
                    str(e["method"]), str(e["arm"]), _scope(e["scope"]), float(e["expires_at"]), dict(e["value"])
                )
                for e in document["entries"]
                if float(e["expires_at"]) > now
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            self._foreign(self.server_path(server), "not a catalog record")
            return None
        return ServerRecord(server, target, identity if isinstance(identity, str) else None, entries)

    def write_server(self, record: ServerRecord) -> None:
        """Replace ``record.server``'s file (removed when it holds no entry): a warning on failure, never raises."""
        path = self.server_path(record.server)
        if not record.entries:
            self._remove(path)
            return
        document = {
            "format": FORMAT,
            "kind": SERVER_KIND,
            "server": record.server,
            "target": record.target,
            "identity": record.identity,
            "entries": [
                {"method": e.method, "arm": e.arm, "scope": e.scope, "expires_at": e.expires_at, "value": e.value}
                for e in record.entries
            ],
        }
        self._write(path, document)

    # -- views ------------------------------------------------------------------------------

    def read_view(self, view: str, key: str) -> ViewSnapshot | None:
        """The snapshot of ``view`` made under ``key`` (expired answers included: ``answer`` checks), else None."""
        path = self.view_path(view)
        document = self._read(path)
        if document is None:
            return None
        try:
            if (document["format"], document["kind"], document["view"]) != (FORMAT, VIEW_KIND, view):
                self._foreign(path, "another format or view")
                return None
            if document["key"] != key:
                logger.debug("view %r snapshot made under other settings, versions or pins: not used", view)
                return None  # retired, not trusted
            facts = document["facts"]
            answers = {
                str(method): {str(version): str(text) for version, text in by_version.items()}
                for method, by_version in document["answers"].items()
                if method in SNAPSHOT_METHODS
            }
            expires = {str(method): float(at) for method, at in document["expires_at"].items()}
            snapshot = ViewSnapshot(
                view, key, ViewFacts(bool(facts["prompts"]), bool(facts["resources"]), bool(facts["templates"])),
                answers, expires,
            )  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError):
            self._foreign(path, "not a view snapshot")
            return None
        return snapshot

    def write_view(self, snapshot: ViewSnapshot) -> None:
        """Replace the view's snapshot: a warning on failure, never raises."""
        facts = snapshot.facts
        document = {
            "format": FORMAT,
            "kind": VIEW_KIND,
            "view": snapshot.view,
            "key": snapshot.key,
            "facts": {"prompts": facts.prompts, "resources": facts.resources, "templates": facts.templates},
            "answers": {method: dict(by_version) for method, by_version in snapshot.answers.items()},
            "expires_at": dict(snapshot.expires_at),
        }
        self._write(self.view_path(snapshot.view), document)

    # -- the files --------------------------------------------------------------------------

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            document = read_private_json(path)
        except PrivateFileRefused as exc:
            self._warn_once(str(path), "catalog file %s ignored (%s): it is rebuilt at the next sync", path, exc)
            return None
        if document is None:
            return None  # no file: nothing kept yet
        if not isinstance(document, dict):
            self._foreign(path, "not a JSON object")
            return None
        return document

    def _write(self, path: Path, document: dict[str, Any]) -> None:
        try:
            write_private_bytes(path, json.dumps(document, separators=(",", ":")).encode("utf-8"))
        except OSError as exc:
            self._warn_once(
                f"write {path.parent}", "catalogs cannot be kept on disk in %s (%s); they stay in memory",
                path.parent, exc.strerror or exc,
            )  # fmt: skip

    def _remove(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            self._warn_once(f"remove {path}", "catalog file %s cannot be removed (%s)", path, exc.strerror or exc)

    def _foreign(self, path: Path, why: str) -> None:
        self._warn_once(str(path), "catalog file %s ignored (%s): it is rebuilt at the next sync", path, why)

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message, *args)


def answer_digest(result_text: str) -> str:
    """What identifies a list answer's result text (the prelude's, from a snapshot, against the Front's, I22)."""
    return hashlib.sha256(result_text.encode("utf-8")).hexdigest()


def _scope(value: object) -> Scope:
    if value not in ("public", "private"):
        raise ValueError(f"scope {value!r}")
    return "public" if value == "public" else "private"


def settings_key(
    settings_json: str, *, principal: str, view: str, store_dir_setting: str | None, servers: Iterable[str]
) -> str:
    """The key a view's snapshot is valid under: what shapes its listings and is known before a server connects.

    Args:
        settings_json: The resolved settings as JSON (``Settings.model_dump_json``), secrets masked.
        principal: Whose catalogs.
        view: The view's name (``""``: everything).
        store_dir_setting: Where the pin files live (their signatures are part of the key).
        servers: The servers whose pins count (those of the settings).
    """
    pins = {server: file_signature(pin_file(store_dir_setting, principal, server)) for server in sorted(servers)}
    digest = hashlib.sha256()
    for part in (__version__, _sdk_version(), principal, view, settings_json, json.dumps(pins, sort_keys=True)):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def snapshot_key(settings: Settings, view: str) -> str:
    """The key of ``view``'s snapshot under ``settings``: ``settings_key`` over them, resolved, secrets masked."""
    document = without_log_settings(settings.model_dump(mode="json"))
    sup = settings.supervisor
    return settings_key(
        json.dumps(document, sort_keys=True, default=str),
        principal=sup.principal, view=view, store_dir_setting=sup.token_store, servers=settings.mcp_servers,
    )  # fmt: skip


def catalog_files(settings: Settings) -> CatalogFiles | None:
    """Where the principal's catalogs live, when they are kept on disk (the file backend); else None."""
    sup = settings.supervisor
    return CatalogFiles(sup.token_store, sup.principal) if sup.catalog_store.backend == "file" else None


def without_log_settings(settings_document: Mapping[str, Any]) -> dict[str, Any]:
    """The settings document without the keys that shape no listing (``_LOG_ONLY_KEYS``)."""
    document = dict(settings_document)
    supervisor = document.get("supervisor")
    if isinstance(supervisor, Mapping):
        document["supervisor"] = {k: v for k, v in supervisor.items() if k not in _LOG_ONLY_KEYS}
    return document


def _sdk_version() -> str:
    """The ``mcp`` SDK's version: its sieve shapes the wire forms a snapshot holds."""
    try:
        return metadata.version("mcp")
    except metadata.PackageNotFoundError:
        return "unknown"
