"""Embedding vectors in the fleet store: one sidecar of a fleet embeds, the others reuse (issue 48).

Key: ``<prefix>:search:{<model>}``, one Redis hash per model (``<model>`` is a hash of
the model's id), whose fields are ``catalog.semantic.text_key``s (the model's id and
the tool's embedded text, hashed) and whose values are the vectors, opaque strings
here (``catalog.semantic_engine`` encodes them). The hash lives ``TTL_MS`` after its
last write: a catalog that no sidecar has embedded anything for in that long is gone,
as the fleet's catalogs are.

Every call goes through ``FleetStore``'s bounded, breaker-guarded ``_call`` (at most
``operation_timeout_ms`` each, ``CatalogStoreUnavailable`` on failure), ``CHUNK``
fields at a time so that one call stays small (~180 KB of 256-d vectors).

Concurrency: stateless; each method is a sequence of single commands. Two sidecars
that embed the same tools at the same moment both embed them (the later write wins,
with the same vector); a sidecar that starts after one of them finished embeds nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final

from supervisor.fleet.store import FleetStore

CHUNK: Final = 128
TTL_MS: Final = 7 * 86_400_000
"""How long a model's vectors outlive their last write."""


class FleetVectors:
    """Vectors by text key, per model, in the fleet store."""

    def __init__(self, store: FleetStore) -> None:
        self._store = store

    def _key(self, model_id: str) -> str:
        return f"{self._store.prefix}:search:{{{hashlib.sha256(model_id.encode()).hexdigest()[:16]}}}"

    async def load(self, model_id: str, keys: Sequence[str]) -> dict[str, str]:
        """The stored vectors of those of ``keys`` the fleet has."""
        key, client = self._key(model_id), self._store.client
        found: dict[str, str] = {}
        for start in range(0, len(keys), CHUNK):
            chunk = list(keys[start : start + CHUNK])
            values: Any = await self._store._call(partial(client.hmget, key, chunk), "vectors_load")
            found.update({field: str(value) for field, value in zip(chunk, values, strict=True) if value})
        return found

    async def save(self, model_id: str, vectors: Mapping[str, str]) -> None:
        """Store ``vectors`` (field → encoded vector) and extend the model's lifetime."""
        key, client, items = self._key(model_id), self._store.client, list(vectors.items())
        for start in range(0, len(items), CHUNK):
            chunk: dict[str, str] = dict(items[start : start + CHUNK])
            await self._store._call(partial(client.hset, key, chunk), "vectors_save")
        if items:
            await self._store._call(lambda: client.pexpire(key, TTL_MS), "vectors_expire")


__all__ = ["CHUNK", "TTL_MS", "FleetVectors"]
