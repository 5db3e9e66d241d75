"""Pins shared by a fleet: the fleet store first, this machine's pin file as its copy and fallback (issue 27, I14).

With ``catalog_store.backend = "redis"``, a server's pins live in the fleet
store (``fleet.pins``), so an approval on one machine holds for every sidecar
of the fleet: each polls the server's version counter (``signature``) and
judges again when it moves. The local pin file (``FilePinStore``) is kept as a
copy:

* every write goes to the file, then to the fleet store;
* a load reads the fleet store and refreshes the file when what it read
  differs from what this process last read; pins only the file has (written
  before the fleet store was configured, or while it was down) are uploaded;
* Redis down or slow (``CatalogStoreUnavailable``, bounded by
  ``operation_timeout_ms``): loads read the file, writes reach only the file
  and ``local_only`` says so (``pins approve`` warns that the approval holds
  on this machine until the fleet store is back and it is approved again).

Concurrency: as ``FilePinStore``; ``_last`` (the records last read per
server) is replaced in synchronous code after each await.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from supervisor.errors import CatalogStoreUnavailable
from supervisor.pins.judge import PinKey, PinRecord
from supervisor.pins.store import FilePinStore, PinFileRefused, PinSignature, record_entry, record_of_entry

if TYPE_CHECKING:
    from supervisor.fleet.pins import FleetPins

logger = logging.getLogger(__name__)


class FleetPinStore:
    """``PinStore`` over the fleet store, with the local pin file as copy and fallback.

    Args:
        fleet: The fleet store's pin hashes of this principal.
        local: This machine's pin files.
    """

    def __init__(self, fleet: FleetPins, local: FilePinStore) -> None:
        self._fleet = fleet
        self._local = local
        self._last: dict[str, dict[PinKey, PinRecord]] = {}
        self.local_only = False
        """The last write reached only the local file (the fleet store was unavailable)."""

    def path(self, server: str) -> object:
        return self._local.path(server)

    async def load(self, server: str) -> dict[PinKey, PinRecord] | None:
        try:
            fields = await self._fleet.load(server)
        except CatalogStoreUnavailable as exc:
            logger.debug("server=%s pins read from the local file: %s", server, exc)
            return await self._local.load(server)
        if fields is None:
            local = await self._local.load(server)
            if local is not None:  # pinned here before the fleet store had it: share it
                await self._write_fleet(server, local, replace=False)
            return local
        records = _decode(server, fields)
        if records != self._last.get(server):
            await self._local.replace(server, records)
            self._last[server] = records
        return records

    async def update(self, server: str, records: Mapping[PinKey, PinRecord]) -> None:
        await self._local.update(server, records)
        await self._write_fleet(server, records, replace=False)

    async def replace(self, server: str, records: Mapping[PinKey, PinRecord]) -> None:
        await self._local.replace(server, records)
        await self._write_fleet(server, records, replace=True)

    async def reset(self, server: str) -> bool:
        had = await self._local.reset(server)
        self._last.pop(server, None)
        try:
            had = await self._fleet.reset(server) or had
        except CatalogStoreUnavailable as exc:
            self.local_only = True
            logger.warning("server=%s pins reset on this machine only: %s", server, exc)
        return had

    async def signature(self, server: str) -> PinSignature | None:
        try:
            version: object = await self._fleet.version(server)
        except CatalogStoreUnavailable:
            version = "unavailable"
        return (version, await self._local.signature(server))

    async def load_seen(self, server: str) -> dict[PinKey, PinRecord]:
        return await self._local.load_seen(server)  # what this machine's sidecar saw: local by nature

    async def note_seen(self, server: str, records: Mapping[PinKey, PinRecord]) -> None:
        await self._local.note_seen(server, records)

    async def _write_fleet(self, server: str, records: Mapping[PinKey, PinRecord], *, replace: bool) -> None:
        fields = {f"{kind}:{name}": json.dumps(record_entry((kind, name), r)) for (kind, name), r in records.items()}
        try:
            await self._fleet.write(server, fields, replace=replace)
        except CatalogStoreUnavailable as exc:
            self.local_only = True
            logger.warning("server=%s pins written on this machine only: %s", server, exc)
        else:
            self.local_only = False


def _decode(server: str, fields: Mapping[str, str]) -> dict[PinKey, PinRecord]:
    """The records of a server's hash.

    Raises:
        PinFileRefused: A field is not a record (the fleet store's copy is damaged).
    """
    records: dict[PinKey, PinRecord] = {}
    for field, value in fields.items():
        try:
            key, record = record_of_entry(json.loads(value), field)
        except ValueError as exc:
            raise PinFileRefused(
                f"server {server!r}: the fleet store's pins are damaged ({exc}); "
                f"run `mcp-supervisor pins reset {server}` to pin the server afresh"
            ) from exc
        records[key] = record
    return records
