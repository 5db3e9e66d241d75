"""The ServerActor's mailbox messages and how queued messages coalesce (DESIGN I1).

Messages are frozen, slotted dataclasses forming a closed union (``Message``).
A request that wants an answer carries its own reply channel (buffer 1);
outcomes travel as values (``SyncOutcome``).

``Pending`` folds everything that queued up behind a running action into one
action: ``refresh`` absorbs ``use``, the kinds to fetch are unioned, one
withdrawal absorbs another, and every reply channel is kept. Plain data with
synchronous methods; only the actor's mailbox worker touches it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, assert_never

import trio
from mcp.client.caching import CacheMode

from supervisor.catalog.registry import ALL_KINDS, Kind

SyncReason = Literal["initial", "reconnect", "list_changed", "unknown_tool", "config_reload", "pins_changed"]
EVERY_KIND: frozenset[Kind] = frozenset(ALL_KINDS)
KINDS_OF_NOTICE: Final[dict[Kind, frozenset[Kind]]] = {
    "tools": frozenset({"tools"}),
    "prompts": frozenset({"prompts"}),
    "resources": frozenset({"resources", "templates"}),
    "templates": frozenset({"resources", "templates"}),
}
"""The kinds a ``<kind>/list_changed`` notice re-syncs (a resource notice covers its templates too)."""


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    """How one sync ended; replies travel as values."""

    ok: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """Fetch the server's listings of ``kinds`` and swap them in."""

    mode: CacheMode
    reason: SyncReason
    reply: trio.MemorySendChannel[SyncOutcome] | None = None
    kinds: frozenset[Kind] = EVERY_KIND


@dataclass(frozen=True, slots=True)
class Withdraw:
    """Remove every tool, prompt and resource of this server from the Registry."""

    reason: str
    reply: trio.MemorySendChannel[SyncOutcome] | None = None


@dataclass(frozen=True, slots=True)
class Rejudge:
    """The server's pins changed (an approval, a reset): judge the listing last fetched again and swap (issue 27).

    No fetch: the listing is the one the last sync judged. A sync queued with it
    judges anyway, so it absorbs this.
    """


Message = SyncRequest | Withdraw | Rejudge


@dataclass
class Pending:
    """Everything queued behind the running action, coalesced."""

    withdraw: Withdraw | None = None
    mode: CacheMode | None = None
    reason: SyncReason | None = None
    kinds: frozenset[Kind] = frozenset()
    replies: list[trio.MemorySendChannel[SyncOutcome]] = field(default_factory=list)
    rejudge: bool = False
    """Judge the last listing again (``Rejudge``); moot when a sync of tools or prompts runs."""

    def add(self, message: Message) -> None:
        match message:
            case Withdraw(reply=reply):
                self.withdraw = message
                if reply is not None:
                    self.replies.append(reply)
            case Rejudge():
                self.rejudge = True
            case SyncRequest(mode=mode, reason=reason, reply=reply, kinds=kinds):
                # refresh absorbs use; the strongest reason names the merged sync.
                if self.mode != "refresh":
                    self.mode = mode
                if self.reason is None or mode == "refresh":
                    self.reason = reason
                self.kinds |= kinds
                if reply is not None:
                    self.replies.append(reply)
            case _:
                assert_never(message)

    def merge(self, other: Pending) -> None:
        """Fold ``other`` (the overflow of a full mailbox) into this one."""
        if other.withdraw is not None:
            self.add(Withdraw(other.withdraw.reason))
        if other.mode is not None and other.reason is not None:
            self.add(SyncRequest(other.mode, other.reason, kinds=other.kinds))
        self.rejudge |= other.rejudge
        self.replies.extend(other.replies)

    @property
    def debounced(self) -> bool:
        """Only pure change-notice re-syncs wait for the storm to settle; a waiter never does."""
        return self.reason == "list_changed" and not self.replies and self.withdraw is None
