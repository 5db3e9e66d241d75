"""What of one server's catalog is served, given its pins and its policy (issue 27, DESIGN I17).

:func:`judge` is the one place where pinning decides. It is pure: the pins
come from a :class:`~supervisor.pins.store.PinStore`, the definitions from a
sync, and the caller writes ``to_write`` back and withholds ``withheld``.

Keys are ``(kind, raw_name)``: ``("tool", "search_issues")``, with the name the
server uses on the wire (not the public ``mcp__…`` name, not a transform's
rename).

Per listed key, with ``pin = "warn" | "block"`` (``off``: everything served,
nothing written, only ``flagged`` reported):

====================  =============================  =========  ==================  ===================
the key               condition                      warn       block               written
====================  =============================  =========  ==================  ===================
server never pinned   (first use: ``pinned`` None)   served     served              first-use record
no record             ``pin_new_tools = "allow"``    served     served              first-use record
no record             ``pin_new_tools = "block"``    withheld   withheld            nothing
record, other print   (changed)                      served     withheld            nothing (approve)
record, same print    (pinned)                       served     served              nothing
hidden characters     (flagged), on top of the above served     withheld unless an  as above
                                                                ``approved`` record
                                                                has this print
====================  =============================  =========  ==================  ===================

A first-use record of a flagged definition does not make it trusted: only an
approval (a person who saw the diff) does. Keys pinned but not listed keep
their records, so a tool that comes back is judged against them.

Limit: the key is the name. A renamed tool (a new name, the old description)
is a *new* tool, not a changed one, and follows ``pin_new_tools``; with
``allow`` it is served and pinned at once. Use ``pin_new_tools = "block"`` if a
rename must be reviewed too.

Pure functions; nothing here awaits. Time: records carry the wall-clock time
they were written (``now``, injectable), since they outlive the process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from supervisor.pins.fingerprint import Definition, canonical_json, fingerprint_of_text
from supervisor.pins.hidden import HiddenCharacter, contains_hidden, hidden_characters

PinKind = Literal["tool", "prompt"]
PinKey = tuple[PinKind, str]
"""``(kind, raw_name)``."""
PinSource = Literal["first-use", "approved", "seen"]
"""``seen`` only in the seen file (``pins.store``): what a sidecar saw of a definition it did not serve as pinned."""
PinState = Literal["pinned", "changed", "new", "withheld", "flagged", "absent", "unpinned"]
PIN_KINDS: tuple[PinKind, ...] = ("tool", "prompt")
PIN_SOURCES: tuple[PinSource, ...] = ("first-use", "approved", "seen")


@dataclass(frozen=True, slots=True)
class PinPolicy:
    """One server's policy (settings ``pin`` and ``pin_new_tools``)."""

    pin: Literal["off", "warn", "block"] = "warn"
    new_tools: Literal["allow", "block"] = "allow"


@dataclass(frozen=True, slots=True)
class PinRecord:
    """What was pinned for one key.

    Attributes:
        fingerprint: The pinned definition's fingerprint: what is compared.
        definition: The pinned definition itself, so a diff can be shown (not
            copied: treat definitions as immutable once judged).
        source: ``first-use`` (trusted because it was there first) or
            ``approved`` (a person approved this fingerprint).
        pinned_at: When it was written, ISO 8601 wall-clock time with offset.
    """

    fingerprint: str
    definition: Definition
    source: PinSource
    pinned_at: str


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict on one server's catalog.

    Attributes:
        withheld: Keys that must not be listed to a host nor called.
        changed: Keys whose fingerprint differs from their record.
        new: Keys with no record on an already-pinned server.
        flagged: Keys whose definition holds hidden characters, and where.
        to_write: Records to add or replace in the store (merge, never replace all).
        fingerprints: The current fingerprint of every listed key (say "one
            warning per change" as one per ``(key, fingerprint)``).
        first_use: The server had no pins: write ``to_write`` even if it is
            empty, so that the next sync is not a first use again.
        policy: The policy judged under.
        pinned: Keys that had a record (before ``to_write``), listed or not.
    """

    withheld: frozenset[PinKey]
    changed: frozenset[PinKey]
    new: frozenset[PinKey]
    flagged: Mapping[PinKey, tuple[HiddenCharacter, ...]]
    to_write: Mapping[PinKey, PinRecord]
    fingerprints: Mapping[PinKey, str]
    first_use: bool
    policy: PinPolicy
    pinned: frozenset[PinKey]

    def served(self, key: PinKey) -> bool:
        """Whether a listed ``key`` may be listed to a host and called."""
        return key in self.fingerprints and key not in self.withheld

    def state(self, key: PinKey) -> PinState:
        """One word for ``key`` (``pins list``), the first that holds:

        ==========  =========================================================
        withheld    not served (changed or new under block, flagged under block)
        flagged     served, but holds hidden characters
        changed     served, fingerprint differs from the record (warn)
        new         served, no record yet (pinned now under ``allow``)
        unpinned    served, ``pin = "off"``
        pinned      served, matches its record
        absent      pinned, but the server does not list it now
        ==========  =========================================================

        Raises:
            KeyError: ``key`` is neither listed nor pinned.
        """
        if key not in self.fingerprints:
            if key in self.pinned:
                return "absent"
            raise KeyError(key)
        if key in self.withheld:
            return "withheld"
        if key in self.flagged:
            return "flagged"
        if key in self.changed:
            return "changed"
        if key in self.new:
            return "new"
        return "unpinned" if self.policy.pin == "off" else "pinned"


def now_iso() -> str:
    """The wall-clock time for ``pinned_at`` (UTC, seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def judge(
    pinned: Mapping[PinKey, PinRecord] | None,
    current: Mapping[PinKey, Definition],
    policy: PinPolicy,
    *,
    now: str | None = None,
) -> Judgement:
    """Decide what of ``current`` is served (the table in the module docstring).

    Args:
        pinned: The server's records; None if it was never pinned (trust on first use).
        current: The definitions the server lists now.
        policy: The server's policy.
        now: ``pinned_at`` for new records (default: the wall clock now).
    """
    withheld: set[PinKey] = set()
    changed: set[PinKey] = set()
    new: set[PinKey] = set()
    flagged: dict[PinKey, tuple[HiddenCharacter, ...]] = {}
    to_write: dict[PinKey, PinRecord] = {}
    fingerprints: dict[PinKey, str] = {}
    block = policy.pin == "block"
    stamp = now or now_iso()
    for key, definition in current.items():
        canonical = canonical_json(definition)
        current_print = fingerprints[key] = fingerprint_of_text(canonical)
        if contains_hidden(canonical):
            flagged[key] = hidden_characters(definition)
        if policy.pin == "off":
            continue
        record = None if pinned is None else pinned.get(key)
        if record is None:
            if pinned is not None:
                new.add(key)
                if policy.new_tools == "block":
                    withheld.add(key)
                    continue
            to_write[key] = PinRecord(current_print, definition, "first-use", stamp)
        elif record.fingerprint != current_print:
            changed.add(key)
            if block:
                withheld.add(key)
        # A flagged definition is trusted only by an approval; one of another fingerprint is changed, withheld above.
        if block and key in flagged and not (record and record.source == "approved"):
            withheld.add(key)
    return Judgement(
        withheld=frozenset(withheld),
        changed=frozenset(changed),
        new=frozenset(new),
        flagged=flagged,
        to_write=to_write,
        fingerprints=fingerprints,
        first_use=pinned is None and policy.pin != "off",
        policy=policy,
        pinned=frozenset(pinned or ()),
    )


def approve(
    current: Mapping[PinKey, Definition], keys: Iterable[PinKey] | None = None, *, now: str | None = None
) -> dict[PinKey, PinRecord]:
    """``approved`` records of the given definitions, to merge into the store (``pins approve``).

    Pass the definitions the person reviewed (the ones ``pins diff`` showed),
    so that what is approved is what was seen.

    Args:
        current: The definitions to approve from.
        keys: Which; None approves all of ``current``. Keys not in ``current``
            are skipped: compare the result's keys to report them.
        now: ``pinned_at`` (default: the wall clock now).
    """
    stamp = now or now_iso()
    chosen = current.keys() if keys is None else [key for key in keys if key in current]
    return {
        key: PinRecord(fingerprint_of_text(canonical_json(current[key])), current[key], "approved", stamp)
        for key in chosen
    }


__all__ = [
    "PIN_KINDS",
    "PIN_SOURCES",
    "Judgement",
    "PinKey",
    "PinKind",
    "PinPolicy",
    "PinRecord",
    "PinSource",
    "PinState",
    "approve",
    "judge",
    "now_iso",
]
