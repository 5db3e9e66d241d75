"""How one generation's transport is doing: lost or not, and why, with its secrets kept out of the reason.

Every transport (stdio, streamable HTTP, SSE) and the listen stream mark the
generation's ``TransportHealth`` lost; its ServerActor waits on ``lost``.
Synchronous: ``mark_lost`` records the first reason only, so whoever notices
first names the cause.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from supervisor.config.values import MASK
from supervisor.errors import UpstreamNeedsLogin


@dataclass
class TransportHealth:
    """How one generation's transport is doing, as seen by its ServerActor."""

    lost: trio.Event = field(default_factory=trio.Event)
    reason: str = ""
    secrets: tuple[str, ...] = ()
    """Configured values (header values, URL query values) no reason may show."""
    explain: Callable[[], str | None] | None = None
    """Why the server ended the connection, when the transport knows better than "connection closed"
    (an OAuth transport that was refused a scope: ``upstream.http``); asked when the loss is marked."""

    needs_login: UpstreamNeedsLogin | None = None
    """Set when a request found that only a person can help (``upstream.http_calls``): the actor parks."""

    def mark_needs_login(self, error: UpstreamNeedsLogin) -> None:
        """The generation is lost as only a person can fix (``error``: a refused refresh): its actor parks."""
        if not self.lost.is_set():
            self.needs_login = error
        self.mark_lost(str(error))

    def mark_lost(self, reason: str) -> None:
        """Record the first reason the transport died (its ``explain``, if that has one) and wake the watcher."""
        if not self.lost.is_set():
            better = self.explain() if self.explain is not None else None
            self.reason = self.redact(better or reason)
            self.lost.set()

    def redact(self, text: str) -> str:
        """``text`` with every configured secret replaced by ``***`` (an HTTP error names its URL)."""
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text
