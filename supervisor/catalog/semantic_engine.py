"""The semantic index's engine: loads the model in the background and embeds tools off the loop (issue 48).

One ``SemanticEngine`` per sidecar, shared by its search views; ``Supervisor.run``
starts ``run`` in its nursery. States, as ``check`` and the logs name them:

===========  =====================================================================
``off``      ``[supervisor.search] semantic = false``, or no view searches
``loading``  the model is loading; searches answer lexically meanwhile
``ready``    the model is loaded; a view whose tools all have vectors fuses
``failed``   the extra is missing or the model would not load (the reason is kept);
             searches stay lexical for the sidecar's life
===========  =====================================================================

Vectors are kept by ``semantic.text_key`` (the model's id and the tool's embedded
text), in memory and in one file per model under the state directory
(``<token_store>/search/<model>.npz``, written whole to a temporary file and
renamed). A reconnect or restart that lists the same definitions finds every
vector and embeds nothing (``embedded`` counts what was embedded); a changed
definition has a new text and so a new key.

With the fleet store (``[supervisor.catalog_store] backend = "redis"``) the
Supervisor gives the engine ``shared`` (``fleet.vectors.FleetVectors``): a batch
asks the fleet first and embeds only what no sidecar has embedded, then shares
what it embedded. A store that is down costs one bounded call and is skipped.

Concurrency invariants:

* ``run`` signals ``started`` at once: the sidecar's start-up never waits for the
  model, and its shutdown does not either: loading and bulk embedding are abandoned
  on cancel (``abandon_on_cancel``; the thread ends on its own, its result unused,
  and the vectors' file is only ever replaced whole).
* Loading, embedding and the cache file's reads and writes run in worker threads
  (``trio.to_thread.run_sync``) under one ``CapacityLimiter(1)``, so at most one
  thread works for the engine at a time and a query's embedding waits for at most
  one batch (``BATCH`` texts) of a bulk embedding.
* ``index_for`` is synchronous and never waits: it answers an index built from
  the vectors it has, or None, and asks ``run`` for what is missing: a view's
  texts and keys (``_to_read``, made in a worker thread once per catalog change)
  or vectors (``_wanted``); the state it changes is changed with no ``await`` in
  between. Only stacking the view's vectors into one matrix runs on the loop.
* Only ``run`` writes ``_vectors``; it adds a batch in one synchronous step after
  its thread returns, so a reader on the loop never sees half a batch.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import trio

from supervisor.catalog.registry import RegisteredTool
from supervisor.catalog.semantic import (
    DEFAULT_MODEL,
    Embedder,
    SemanticUnavailable,
    VectorIndex,
    embedding_text,
    load_embedder,
    text_key,
)
from supervisor.errors import CatalogStoreUnavailable

if TYPE_CHECKING:
    from supervisor.catalog.semantic import Vectors

logger = logging.getLogger(__name__)

State = Literal["off", "loading", "ready", "failed"]
BATCH: Final = 256
"""Texts per worker-thread call of a bulk embedding (a query waits for at most one)."""
CACHE_MAX: Final = 100_000
"""Vectors kept per model, in memory and in the file (~100 MB at 256-d); past it the oldest unused go."""


class SharedVectors(Protocol):
    """Vectors shared by a fleet of sidecars, by text key (``fleet.vectors.FleetVectors``)."""

    async def load(self, model_id: str, keys: Sequence[str]) -> Mapping[str, str]: ...

    async def save(self, model_id: str, vectors: Mapping[str, str]) -> None: ...


@dataclass(frozen=True, slots=True)
class SemanticConfig:
    """What the engine loads: ``[supervisor.search]`` as the catalog layer sees it."""

    enabled: bool = True
    model: str = DEFAULT_MODEL
    path: str | None = None


class SemanticEngine:
    """Loads one embedding model in the background and keeps every tool's vector, by its text's key.

    Args:
        config: Whether and which model to load.
        cache_dir: Where the vectors' file goes (None: memory only).
        loader: Loads the model (a seam for tests: the default reads the installed packages' files).
    """

    def __init__(
        self,
        config: SemanticConfig,
        cache_dir: Path | None = None,
        *,
        loader: Callable[[str, str | None], Embedder] = load_embedder,
    ) -> None:
        self._config = config
        self._cache_dir = cache_dir
        self._loader = loader
        self._state: State = "loading" if config.enabled else "off"
        self._reason = "" if config.enabled else "semantic = false"
        self._embedder: Embedder | None = None
        self._limiter = trio.CapacityLimiter(1)
        self._vectors: dict[str, Vectors] = {}
        self._wanted: dict[str, str] = {}
        """Texts some view needs a vector for, by key (filled by ``index_for``, emptied by ``run``)."""
        self._wake = trio.Event()
        self._progress = trio.Event()
        """Set (and replaced) whenever loading ends or a batch is added (``wait_settled``)."""
        self._views: dict[str, tuple[object, list[str], list[str]]] = {}
        """Per view: the version its keys and texts were made for, the keys, the texts."""
        self._to_read: dict[str, tuple[object, list[RegisteredTool]]] = {}
        """Views whose texts ``run`` is to make (in a worker thread): their version and tools."""
        self.embedded = 0
        """Tools embedded since start (a restart over a cached catalog leaves it at 0)."""
        self.reused = 0
        """Tools whose vector came from the fleet (``shared``) instead of the model."""
        self.shared: SharedVectors | None = None
        """The fleet's vectors, if any (set by the Supervisor with the Redis catalog store)."""
        self.about: Mapping[str, str] = {}
        """What each server does (its description), added to its tools' texts."""

    @property
    def state(self) -> State:
        return self._state

    def describe(self) -> str:
        """One line for ``check`` and logs: the state and the model, or why it is not used."""
        match self._state:
            case "ready":
                assert self._embedder is not None
                return f"semantic index active ({self._embedder.model_id}); lexical and semantic fused"
            case "loading":
                return f"semantic index loading ({self._config.model}); lexical until it is ready"
            case "failed" | "off":
                return f"lexical only: {self._reason}"

    def disable(self, reason: str) -> None:
        """Give up the semantic index (no search view, or a test that simulates a missing extra)."""
        self._state = "off"
        self._reason = reason
        self._wake.set()
        self._moved()

    def _moved(self) -> None:
        self._progress.set()
        self._progress = trio.Event()

    async def wait_settled(self) -> None:
        """Wait until the model is loaded (or failed) and every vector asked for is there (callers bound it)."""
        while self._state == "loading" or (self._state == "ready" and (self._wanted or self._to_read)):
            await self._progress.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the model, then embed what views ask for, until cancelled; started at once."""
        task_status.started()
        if self._state != "loading":
            return
        config = self._config
        try:
            embedder = await trio.to_thread.run_sync(
                self._loader, config.model, config.path, limiter=self._limiter, abandon_on_cancel=True
            )
        except SemanticUnavailable as exc:
            self._state, self._reason = "failed", str(exc)
            logger.warning("search: %s; search_tools answers from the lexical index only", exc)
            self._moved()
            return
        if self._state != "loading":
            return  # disabled while it loaded
        self._vectors.update(await trio.to_thread.run_sync(self._read_file, embedder.model_id, limiter=self._limiter))
        self._embedder = embedder
        self._state = "ready"
        self._moved()
        logger.info("search: %s loaded, %d vectors cached", embedder.model_id, len(self._vectors))
        while self._state == "ready":
            if self._to_read:
                await self._read_texts(embedder)
            elif self._wanted:
                await self._embed_wanted(embedder)
            else:
                self._wake = trio.Event()
                await self._wake.wait()

    async def _read_texts(self, embedder: Embedder) -> None:
        """Make one view's texts and keys in a worker thread (~40 ms for 5,000 tools: not on the loop)."""
        view, (version, entries) = next(iter(self._to_read.items()))
        about, model_id = dict(self.about), embedder.model_id

        def read() -> tuple[list[str], list[str]]:
            # Entries are immutable (a generation's definitions), so a thread may read them.
            texts = [embedding_text(entry, about) for entry in entries]
            return [text_key(model_id, text) for text in texts], texts

        keys, texts = await trio.to_thread.run_sync(read, limiter=self._limiter, abandon_on_cancel=True)
        # One synchronous step: the view's keys and what they lack are in place together.
        if self._to_read.get(view, (None,))[0] == version:
            del self._to_read[view]
        self._views[view] = (version, keys, texts)
        self._wanted.update({key: text for key, text in zip(keys, texts, strict=True) if key not in self._vectors})
        self._moved()

    async def _embed_wanted(self, embedder: Embedder) -> None:
        keys = list(self._wanted)[:BATCH]
        reused = await self._from_fleet(embedder.model_id, keys)
        todo = [key for key in keys if key not in reused]
        rows: Vectors | list[Vectors] = []
        if todo:
            texts = [self._wanted[key] for key in todo]
            rows = await trio.to_thread.run_sync(embedder.embed, texts, limiter=self._limiter, abandon_on_cancel=True)
        # One synchronous step: readers see the batch whole or not at all.
        for key, row in [*reused.items(), *zip(todo, rows, strict=True)]:
            self._vectors[key] = row
            self._wanted.pop(key, None)
        self.embedded += len(todo)
        self.reused += len(reused)
        if todo:
            await self._to_fleet(embedder.model_id, dict(zip(todo, rows, strict=True)))
        if not self._wanted:
            self._trim()
            snapshot = dict(self._vectors)
            await trio.to_thread.run_sync(self._write_file, embedder.model_id, snapshot, limiter=self._limiter)
            logger.info(
                "search: semantic index complete; %d tools embedded since start, %d taken from the fleet",
                self.embedded,
                self.reused,
            )
        self._moved()

    def index_for(self, view: str, version: object, entries: Sequence[RegisteredTool]) -> VectorIndex | None:
        """A vector index over ``entries`` if every one has its vector; else None, and their embedding is asked for
        (while the model loads too: asked during start-up, a view is indexed once it is in).

        Synchronous, never waits; ``version`` is the view's catalog version, so texts are made once per change.
        """
        embedder = self._embedder
        if self._state == "loading":  # its texts are read as soon as the model is in: the search that comes next fuses
            self._to_read[view] = (version, list(entries))
            return None
        if self._state != "ready" or embedder is None:
            return None
        held = self._views.get(view)
        if held is None or held[0] != version:
            self._to_read[view] = (version, list(entries))
            self._wake.set()
            return None
        _, keys, texts = held
        vectors = self._vectors
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in vectors}
        if missing:
            self._wanted.update(missing)
            self._wake.set()
            return None
        import numpy as np  # noqa: PLC0415 - ready means the extra is there

        matrix = np.stack([vectors[key] for key in keys]) if keys else np.zeros((0, 1), dtype=np.float32)
        return VectorIndex(entries, matrix)

    async def embed_query(self, query: str) -> Vectors | None:
        """The query's unit vector (in a worker thread), or None while the model is not ready."""
        embedder = self._embedder
        if self._state != "ready" or embedder is None:
            return None
        rows = await trio.to_thread.run_sync(embedder.embed, [query], limiter=self._limiter)
        vector: Vectors = rows[0]
        return vector

    # -- the fleet's vectors (bounded calls; a store that is down is skipped) -----------------------

    async def _from_fleet(self, model_id: str, keys: list[str]) -> dict[str, Vectors]:
        if self.shared is None:
            return {}
        import numpy as np  # noqa: PLC0415 - ready means the extra is there

        try:
            stored = await self.shared.load(model_id, keys)
        except CatalogStoreUnavailable as exc:
            logger.debug("search: fleet vectors unavailable (%s); embedding here", exc)
            return {}
        found: dict[str, Vectors] = {}
        for key, text in stored.items():
            row = np.frombuffer(base64.b64decode(text), dtype=np.float32)
            if row.size:  # a value that is not a vector is embedded again
                found[key] = row
        return found

    async def _to_fleet(self, model_id: str, rows: dict[str, Vectors]) -> None:
        if self.shared is None:
            return
        encoded = {key: base64.b64encode(row.astype("float32").tobytes()).decode() for key, row in rows.items()}
        try:
            await self.shared.save(model_id, encoded)
        except CatalogStoreUnavailable as exc:
            logger.debug("search: could not share %d vectors with the fleet (%s)", len(encoded), exc)

    # -- the vectors' file (worker threads only) -----------------------------------------------

    def _file(self, model_id: str) -> Path | None:
        if self._cache_dir is None:
            return None
        return self._cache_dir / "search" / f"{hashlib.sha256(model_id.encode()).hexdigest()[:16]}.npz"

    def _read_file(self, model_id: str) -> dict[str, Any]:
        file = self._file(model_id)
        if file is None or not file.exists():
            return {}
        import numpy as np  # noqa: PLC0415 - the search extra only

        try:
            with np.load(file, allow_pickle=False) as saved:
                keys, matrix = saved["keys"], saved["vectors"]
                return {str(key): matrix[index] for index, key in enumerate(keys)}
        except (OSError, ValueError, KeyError) as exc:
            logger.warning("search: ignoring the unreadable vector cache %s (%s)", file, exc)
            return {}

    def _write_file(self, model_id: str, vectors: dict[str, Any]) -> None:
        file = self._file(model_id)
        if file is None or not vectors:
            return
        import numpy as np  # noqa: PLC0415 - the search extra only

        try:
            file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            partial = file.with_name(f"{file.stem}.{os.getpid()}.partial.npz")
            np.savez(partial, keys=np.array(list(vectors)), vectors=np.stack(list(vectors.values())))
            partial.replace(file)
        except OSError as exc:
            logger.warning("search: could not save the vector cache %s (%s); a restart embeds again", file, exc)

    def _trim(self) -> None:
        """Keep at most ``CACHE_MAX`` vectors, those of the views' current tools first (synchronous)."""
        excess = len(self._vectors) - CACHE_MAX
        if excess <= 0:
            return
        current = {key for _, keys, _ in self._views.values() for key in keys}
        for key in [key for key in self._vectors if key not in current][:excess]:
            del self._vectors[key]


__all__ = ["BATCH", "SemanticConfig", "SemanticEngine", "SharedVectors", "State"]
