"""Pinned definitions in the fleet store: one Redis hash per (principal, server), and a version counter (issue 27).

Keys (one hash tag, so Redis Cluster keeps both in one slot):
``<prefix>:pins:{<principal>:<server>}`` holds one field per pinned key
(``tool:<name>``, ``prompt:<name>``: the record as JSON) plus ``#pinned``,
which marks a server as pinned even with no records; ``...:v`` counts the
writes, so a sidecar polls one ``GET`` to see another machine's approval.

Records are opaque strings here (``pins.redis_store`` encodes them): the
fleet layer knows nothing of pins. Every call goes through ``FleetStore``'s
bounded, breaker-guarded ``_call``, so Redis being slow or down costs at most
``operation_timeout_ms`` and raises ``CatalogStoreUnavailable``.

Concurrency: stateless beyond the registered scripts; each method is one
script or command.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from supervisor.fleet.store import FleetStore

PINNED_FIELD: Final = "#pinned"
_WRITE: Final = """
if ARGV[1] == 'replace' then redis.call('DEL', KEYS[1]) end
redis.call('HSET', KEYS[1], '#pinned', '1')
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return redis.call('INCR', KEYS[2])
"""
_RESET: Final = """
local existed = redis.call('DEL', KEYS[1])
redis.call('INCR', KEYS[2])
return existed
"""


class FleetPins:
    """Raw pin records of one principal in the fleet store."""

    def __init__(self, store: FleetStore, principal: str) -> None:
        self._store = store
        self._principal = principal
        client = store.client
        self._write = client.register_script(_WRITE)
        self._reset = client.register_script(_RESET)

    def _keys(self, server: str) -> tuple[str, str]:
        key = f"{self._store.prefix}:pins:{{{self._principal}:{server}}}"
        return key, f"{key}:v"

    async def load(self, server: str) -> dict[str, str] | None:
        """The server's fields (``#pinned`` left out); None if it was never pinned."""
        key, _ = self._keys(server)
        fields: Any = await self._store._call(lambda: self._store.client.hgetall(key), "pins_load")
        if not fields:
            return None
        return {str(name): str(value) for name, value in dict(fields).items() if name != PINNED_FIELD}

    async def write(self, server: str, fields: Mapping[str, str], *, replace: bool) -> None:
        """Merge (or, with ``replace``, set exactly) ``fields``, mark the server pinned, bump its version."""
        keys = list(self._keys(server))
        args = ["replace" if replace else "merge", *(part for item in sorted(fields.items()) for part in item)]
        client = self._store.client
        await self._store._call(lambda: self._write(keys=keys, args=args, client=client), "pins_write")

    async def reset(self, server: str) -> bool:
        """Forget the server's pins; whether there were any."""
        keys = list(self._keys(server))
        client = self._store.client
        reply: Any = await self._store._call(lambda: self._reset(keys=keys, client=client), "pins_reset")
        return bool(reply)

    async def version(self, server: str) -> int:
        """How many times the server's pins were written (0: never)."""
        _, version_key = self._keys(server)
        value: Any = await self._store._call(lambda: self._store.client.get(version_key), "pins_version")
        return int(value or 0)
