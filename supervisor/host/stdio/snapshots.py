"""The stdio front's view snapshot, kept on disk for the next start's prelude (issue 57).

With the file backend (``[supervisor.catalog_store] backend = "file"``), the
stdio link runs one ``SnapshotWriter``. Once the view has settled (every
server of it has finished its first attempt and is ready), and after every
change of its catalog or every first list in a protocol version not kept yet,
it writes what the Front would answer now: each first-page ``tools/list`` and
``prompts/list`` in every version its host has spoken, the same text the
Front's own encoders make (``Front.encoded_list``), and until when each is
fresh: the earliest expiry of the catalogs it was made of (a server whose
entry is missing, ``ttlMs`` 0 say, leaves that list out). With them go the
view's facts (does it have prompts, resources, templates), which decide the
capabilities the next start declares (``host.capabilities``). The snapshot's
key (``catalog.disk.settings_key``) retires it when the settings, the
versions or the pins change.

Concurrency: ``serve`` is one task in the stdio link's nursery, woken by the
Supervisor's ``catalog_changed`` and by the Front's first list in a new
version; files are written in a worker thread, one at a time, only when the
snapshot differs from the last one written.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import trio

from supervisor.catalog.disk import SNAPSHOT_METHODS, CatalogFiles, ViewFacts, ViewSnapshot
from supervisor.catalog.registry import Kind

if TYPE_CHECKING:
    from supervisor.host.front import Front

logger = logging.getLogger(__name__)

_KIND_OF: dict[str, Kind] = {"tools/list": "tools", "prompts/list": "prompts"}


class SnapshotWriter:
    """Writes the Front's view snapshot whenever it changes (module docstring)."""

    def __init__(self, front: Front, files: CatalogFiles, key: Callable[[], str]) -> None:
        """``key``: the snapshot's key, computed when it is written (a first start writes its pin files meanwhile)."""
        self._front = front
        self._files = files
        self._key = key
        self._wake = trio.Event()
        self.written: ViewSnapshot | None = None
        """The last snapshot written (tests read it)."""

    def poke(self) -> None:
        """Something it may keep changed (a host listed in a new version): look again."""
        self._wake.set()

    async def serve(self) -> None:
        """Write the snapshot whenever what it holds changes, until cancelled."""
        supervisor = self._front.supervisor
        try:
            await supervisor.wait_first_attempts()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._wake_on_catalog_changes)
                while True:
                    await self._write_if_changed()
                    await self._wake.wait()
                    self._wake = trio.Event()
        finally:
            # A host that lists and leaves at once (``claude -p``, a script) stops us before the loop came round.
            with trio.CancelScope(shield=True), trio.move_on_after(STOP_WRITE_SEC):
                await self._write_if_changed()

    async def _write_if_changed(self) -> None:
        snapshot = self.build()
        if snapshot is not None and snapshot != self.written:
            await trio.to_thread.run_sync(self._files.write_view, snapshot)
            self.written = snapshot
            logger.debug("view %r snapshot written (%s)", snapshot.view, ", ".join(sorted(snapshot.answers)))

    async def _wake_on_catalog_changes(self) -> None:
        while True:
            await self._front.supervisor.catalog_changed.wait()
            self._wake.set()

    def build(self) -> ViewSnapshot | None:
        """The snapshot of the view as it is now; None while a server of it is not ready."""
        front = self._front
        supervisor, view, lists = front.supervisor, front.view, front.lists
        if supervisor.pending_first_attempts():
            return None
        servers = [s.name for s in supervisor.statuses() if view.shows_server(s.name) and s.state != "disabled"]
        if any(supervisor.actors[name].ready_upstream is None for name in servers):
            return None
        answers: dict[str, dict[str, str]] = {}
        expires_at: dict[str, float] = {}
        for method in SNAPSHOT_METHODS:
            kind = _KIND_OF[method]
            until = self._fresh_until(kind, method, servers)
            texts = {v: t for v in sorted(lists.host_versions) if (t := lists.encoded_list(kind, v)) is not None}
            if until is not None and texts:
                answers[method] = texts
                expires_at[method] = until
        facts = ViewFacts(
            prompts=bool(view.entries("prompts")),
            resources=bool(view.entries("resources")),
            templates=bool(view.entries("templates")),
        )
        return ViewSnapshot(view.name, self._key(), facts, answers, expires_at)

    def _fresh_until(self, kind: Kind, method: str, servers: list[str]) -> float | None:
        """Until when (wall time, whole seconds, floored) every catalog of ``kind`` in the view may be reused.

        None when one may not be (``ttlMs`` 0, or its entry is gone); a server that does not list the kind adds
        nothing, and a list no server adds to (a search view's own tools) lasts the default catalog lifetime.
        """
        supervisor = self._front.supervisor
        now_trio = trio.current_time()
        remaining = math.inf
        for name in servers:
            upstream = supervisor.actors[name].ready_upstream
            if upstream is None or kind not in upstream.kinds:
                continue
            fresh = supervisor.cache.fresh_until(name, method)
            if fresh is None:
                return None
            remaining = min(remaining, fresh - now_trio)
        if remaining == math.inf:
            remaining = _NO_SERVER_SEC
        return float(int(time.time() + remaining))  # whole seconds: two builds of one state compare equal


STOP_WRITE_SEC: Final = 1.0
"""How long the last write may take when the link stops."""
_NO_SERVER_SEC: Final = 300.0
"""How long a list no server contributes to (a search view's own tools) is kept: the default catalog lifetime."""
