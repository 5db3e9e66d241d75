"""One server's pinning at sync time: judge each listing, withhold, warn once, remember (issue 27, I17).

A ``PinGuard`` sits in its server's catalog sync (``catalog_sync``), between
the fetch and the swap: ``screen`` takes the fetched tools and prompts, has
``pins.judge`` decide against the server's pins (loaded from the
``PinStore``), writes the records the judgement asks for (first use, new
tools under ``pin_new_tools = "allow"``), and hands back the listings without
the withheld definitions. The rest of the catalog swaps as usual (I3's rule:
withholding one tool never holds back the others).

What the sidecar sees of the definitions it does not serve as pinned
(changed, new, flagged) is noted in the store (``PinStore.note_seen``): the
``pins`` commands run in another process, whose own connection to the server
may see something else (a server that changed at run time lists its original
definitions to a fresh client), so ``pins diff`` shows, and ``pins approve``
approves, what this sidecar holds back.

What it remembers, for everyone else to read:

* ``judgement`` and ``current``: the last verdict and the definitions it was
  about (``status``, ``/metrics``, ``pins list``, ``pins diff``);
* ``withheld_reason(kind, raw_name)``: why a name is missing, so a host's call
  to a withheld tool gets an error that says why and how to approve it
  (``Front.unknown``).

Logging: one warning per (key, fingerprint), never one per sync: a definition
that changes again warns again; one that stays changed does not.

A store that cannot be used (``PinFileRefused``: damaged, too wide a mode) or
cannot be reached fails the sync (the previous generation stays, I2): serving
the listing unjudged would trust whatever the server lists now.

Concurrency: ``screen`` runs only in the server's sync worker, one at a time
(I1); its state is replaced in synchronous code after each await, so readers
(the Front, status) see the previous verdict or the new one, never a mixture.
A listing of more than ``THREAD_FROM_DEFINITIONS`` definitions is fingerprinted
and judged in a worker thread (pure work on objects nobody mutates), so a
5,000-tool server never holds the loop for the ~100 ms that costs (I15).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Final

import mcp_types as types
import trio

from supervisor.catalog.registry import Definition, OwnedListing
from supervisor.errors import UpstreamError
from supervisor.pins.fingerprint import Definition as PinDefinition
from supervisor.pins.fingerprint import prompt_definition, tool_definition
from supervisor.pins.hidden import HiddenCharacter
from supervisor.pins.judge import Judgement, PinKey, PinKind, PinPolicy, PinRecord, judge, now_iso
from supervisor.pins.store import PinFileRefused, PinSignature, PinStore

logger = logging.getLogger(__name__)

THREAD_FROM_DEFINITIONS: Final = 500
"""A listing of more tools and prompts than this is judged in a worker thread (~15-40 µs each on a busy box)."""
SUMMARY_STATES: Final = ("changed", "new", "withheld", "flagged")
"""The states ``status`` and ``/metrics`` count per server (``pinned`` is the rest; ``ops.metrics.PIN_STATES``)."""


class PinsUnavailable(UpstreamError):
    """The server's pins could not be read or written: its listing is not served unjudged."""


@dataclass(eq=False)
class PinGuard:
    """One server's pins, judged at every sync.

    Args:
        server: The server's name.
        policy: Its ``pin`` and ``pin_new_tools``.
        store: Where its pins live.
        writes: False for read-only users (``pins list`` / ``diff``): judge, never write.
    """

    server: str
    policy: PinPolicy
    store: PinStore
    writes: bool = True
    judgement: Judgement | None = None
    current: dict[PinKey, PinDefinition] = field(default_factory=dict)
    """The definitions of the last listing, by key: what ``pins diff`` compares and ``pins approve`` approves."""
    pinned: dict[PinKey, PinRecord] = field(default_factory=dict)
    """The records the last judgement was made against, plus what it wrote."""
    signature: PinSignature | None = None
    """The store's signature of this server's pins as last judged (``pins.watch`` compares it)."""
    stale: bool = False
    """Judge again even if the signature did not move: this guard wrote, and another writer may have too."""
    last_listings: tuple[Sequence[Definition] | None, Sequence[Definition] | None] | None = None
    """The tools and prompts last screened, as fetched, so a change of the pins is judged without a fetch."""
    _warned: set[tuple[PinKey, str]] = field(default_factory=set)
    _seen_prints: dict[PinKey, str] | None = None
    _loaded: tuple[PinSignature, dict[PinKey, PinRecord] | None] | None = None

    @property
    def active(self) -> bool:
        return self.policy.pin != "off"

    async def screen(
        self, tools: Sequence[Definition] | None, prompts: Sequence[Definition] | None
    ) -> tuple[Sequence[Definition] | None, Sequence[Definition] | None]:
        """Judge a fetched listing (None: that kind was not fetched) and return it without what is withheld.

        Raises:
            PinsUnavailable: The store refused its file or could not be reached.
        """
        fetched: tuple[tuple[PinKind, Sequence[Definition] | None], ...] = (("tool", tools), ("prompt", prompts))
        big = sum(len(listing) for _, listing in fetched if listing is not None) > THREAD_FROM_DEFINITIONS
        stale = wrote = False
        signature = await self._signature()
        try:
            pinned = await self._load(signature) if self.active else None
            work = partial(_judged, self.current, fetched, pinned, self.policy)
            # I15: a big listing is fingerprinted in a worker thread, so the loop keeps serving meanwhile.
            current, verdict = await trio.to_thread.run_sync(work) if big else work()
            if self.writes and (verdict.to_write or verdict.first_use):
                await self.store.update(self.server, verdict.to_write)
                wrote = True
                # Another writer may have come between the load and this write: judge once more (no fetch).
                stale = True
            if self.writes and self.active:
                await self._note_seen(verdict, current)
        except PinFileRefused as exc:
            self.signature = signature  # judged (and refused) as it is now: again only once it changes
            raise PinsUnavailable(self.server, str(exc)) from exc
        except OSError as exc:
            self.signature = signature
            raise PinsUnavailable(
                self.server, f"server {self.server!r}: the pin store could not be used ({exc}); listing kept back"
            ) from exc
        # Synchronous from here: readers see the old verdict or this one.
        self.signature, self.stale = signature, stale
        self.last_listings = (
            tools if tools is not None else (self.last_listings or (None, None))[0],
            prompts if prompts is not None else (self.last_listings or (None, None))[1],
        )
        self.current = current
        self.pinned = {**(pinned or {}), **(verdict.to_write if wrote else {})}
        self.judgement = verdict
        self._report(verdict)
        withheld = verdict.withheld
        return _without(tools, "tool", withheld), _without(prompts, "prompt", withheld)

    async def _note_seen(self, verdict: Judgement, current: dict[PinKey, PinDefinition]) -> None:
        """Tell ``pins diff`` and ``pins approve`` what this sidecar sees of what it does not serve as pinned.

        Written when it changes (and once per process, which clears a note left by a previous one).
        """
        keys = {*verdict.changed, *verdict.new, *verdict.flagged}
        prints = {key: verdict.fingerprints[key] for key in keys}
        if prints == self._seen_prints:
            return
        stamp = now_iso()
        seen = {key: PinRecord(verdict.fingerprints[key], current[key], "seen", stamp) for key in keys}
        await self.store.note_seen(self.server, seen)
        self._seen_prints = prints

    async def _load(self, signature: PinSignature | None) -> dict[PinKey, PinRecord] | None:
        """The server's pins; read again only when the store's signature moved (a 5,000-tool file is MBs)."""
        if signature is not None and self._loaded is not None and self._loaded[0] == signature:
            return self._loaded[1]
        pinned = await self.store.load(self.server)
        self._loaded = (signature, pinned) if signature is not None else None
        return pinned

    async def _signature(self) -> PinSignature | None:
        if not self.active:
            return None
        try:
            return await self.store.signature(self.server)
        except OSError:
            return None

    def forget_listing(self) -> None:
        """The server's entries were withdrawn: nothing is left to judge again until the next sync."""
        self.last_listings = None

    def withheld_reason(self, kind: PinKind, raw_name: str) -> str | None:
        """Why ``raw_name`` is withheld from hosts, with the commands that review and approve it; None if it is not."""
        verdict = self.judgement
        key = (kind, raw_name)
        if verdict is None or key not in verdict.withheld:
            return None
        target = f"{self.server} {raw_name}"
        if key in verdict.changed:
            why = f"its definition changed since it was approved (pin = {self.policy.pin!r})"
        elif key in verdict.new:
            why = f"it is new on a pinned server (pin_new_tools = {self.policy.new_tools!r})"
        else:
            labels = ", ".join(sorted({c.label for c in verdict.flagged.get(key, ())}))
            why = f"its definition holds hidden characters ({labels})"
        return (
            f"withheld by pinning: {why}; review it with `mcp-supervisor pins diff {target}` "
            f"and approve it with `mcp-supervisor pins approve {target}`"
        )

    def summary(self) -> dict[str, list[str]]:
        """``{state: ["tool:name", ...]}`` for each of ``SUMMARY_STATES`` that has any (status, metrics)."""
        verdict = self.judgement
        if verdict is None:
            return {}
        groups: dict[str, set[PinKey]] = {
            "changed": set(verdict.changed),
            "new": set(verdict.new),
            "withheld": set(verdict.withheld),
            "flagged": set(verdict.flagged),
        }
        return {state: sorted(f"{k}:{n}" for k, n in keys) for state, keys in groups.items() if keys}

    def _report(self, verdict: Judgement) -> None:
        """Log each change, new tool and flag once per fingerprint."""
        for key in sorted({*verdict.changed, *verdict.new, *verdict.flagged}):
            mark = (key, verdict.fingerprints[key])
            if mark in self._warned:
                continue
            self._warned.add(mark)
            kind, name = key
            withheld = key in verdict.withheld
            fields = {"server": self.server, "pin_kind": kind, "pin_name": name}
            if key in verdict.flagged:
                where = _where(verdict.flagged[key])
                logger.warning(
                    "server=%s %s %r: its definition holds hidden characters (%s)%s",
                    self.server, kind, name, where, "; withheld until approved" if withheld else "",
                    extra=fields,
                )  # fmt: skip
            if key in verdict.changed:
                logger.warning(
                    "server=%s %s %r changed since it was pinned; %s; review: mcp-supervisor pins diff %s %s",
                    self.server, kind, name, "withheld until approved" if withheld else "served (pin = \"warn\")",
                    self.server, name, extra=fields,
                )  # fmt: skip
            elif key in verdict.new and withheld:
                logger.warning(
                    "server=%s new %s %r withheld until approved (pin_new_tools = \"block\"): "
                    "mcp-supervisor pins approve %s %s",
                    self.server, kind, name, self.server, name, extra=fields,
                )  # fmt: skip
            elif key in verdict.new:
                logger.info("server=%s new %s %r pinned as first seen", self.server, kind, name, extra=fields)


def _judged(
    previous: dict[PinKey, PinDefinition],
    fetched: tuple[tuple[PinKind, Sequence[Definition] | None], ...],
    pinned: dict[PinKey, PinRecord] | None,
    policy: PinPolicy,
) -> tuple[dict[PinKey, PinDefinition], Judgement]:
    """The definitions of the listing (the kinds not fetched kept from ``previous``) and their judgement.

    Pure, so it may run in a worker thread: it reads its arguments and builds new objects.
    """
    current = dict(previous)
    for kind, listing in fetched:
        if listing is not None:
            current = {key: value for key, value in current.items() if key[0] != kind}
            current.update(_definitions(kind, listing))
    return current, judge(pinned, current, policy)


def _definitions(kind: PinKind, listing: Sequence[Definition]) -> dict[PinKey, PinDefinition]:
    found: dict[PinKey, PinDefinition] = {}
    for item in listing:
        if kind == "tool" and isinstance(item, types.Tool):
            found[(kind, item.name)] = tool_definition(item)
        elif kind == "prompt" and isinstance(item, types.Prompt):
            found[(kind, item.name)] = prompt_definition(item)
    return found


def _without(
    listing: Sequence[Definition] | None, kind: PinKind, withheld: frozenset[PinKey]
) -> Sequence[Definition] | None:
    if listing is None or not any(key[0] == kind for key in withheld):
        return listing
    kept = [item for item in listing if (kind, getattr(item, "name", "")) not in withheld]
    return OwnedListing(kept) if isinstance(listing, OwnedListing) else kept


def _where(flags: Sequence[HiddenCharacter]) -> str:
    """``description: 15 tag characters; inputSchema.properties.q.description: 1 zero-width character``."""
    counts = Counter((flag.path, flag.kind) for flag in flags)
    return "; ".join(
        f"{path}: {count} {kind} character{'s' if count > 1 else ''}" for (path, kind), count in sorted(counts.items())
    )
