"""What every generation of one server must carry: the hosts' log level, their subscriptions, a roots notice.

A generation starts with none of it, so the ServerActor's standing-state
worker applies it to the current generation after the generation's first sync
(``generation_ready``) and whenever a host changes it. A host's
``roots/list_changed`` is passed on once, however many came meanwhile, and
never blocks the host.

Concurrency: ``StandingState.serve`` is one task in the ServerActor's nursery,
the only one that sends these to an upstream (``ServerActor.apply_subscriptions``
aside, which a host's ``resources/subscribe`` awaits). The setters are
synchronous, so they are safe from any task; each application is bounded by
``tool_timeout_sec``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import mcp_types as types
import trio
from mcp import MCPError

from supervisor.errors import UpstreamError
from supervisor.seams import UpstreamSession

logger = logging.getLogger(__name__)


class StandingState:
    """One server's standing log level, subscriptions and pending roots notice.

    Args:
        name: The server's name (for the log).
        timeout_sec: ``tool_timeout_sec``: the bound on applying it all once.
        current_upstream: The generation to apply it to, or None between generations.
        ready: Whether that generation has finished its first sync.
    """

    def __init__(
        self,
        name: str,
        timeout_sec: float,
        current_upstream: Callable[[], UpstreamSession | None],
        ready: Callable[[], bool],
    ) -> None:
        self._name = name
        self._timeout_sec = timeout_sec
        self._current_upstream = current_upstream
        self._ready = ready
        self.log_level: types.LoggingLevel | None = None
        self.subscriptions: frozenset[str] = frozenset()
        self._changed = trio.Event()
        self._roots_notice_due = False

    def set_log_level(self, level: types.LoggingLevel | None) -> None:
        """Ask every generation, from now on, for log messages at ``level`` and above (None: no change)."""
        if level != self.log_level:
            self.log_level = level
            self._changed.set()

    def set_subscriptions(self, uris: frozenset[str]) -> None:
        """Keep every generation, from now on, subscribed to exactly ``uris``."""
        if uris != self.subscriptions:
            self.subscriptions = uris
            self._changed.set()

    def notify_roots_changed(self) -> None:
        """A host's roots changed: tell the current generation (once, however many notices came meanwhile)."""
        self._roots_notice_due = True
        self._changed.set()

    def generation_ready(self) -> None:
        """A new generation finished its first sync: it carries no log level or subscriptions yet."""
        self._changed.set()

    async def serve(self) -> None:
        """Apply the log level, the resource subscriptions and a due roots notice to the current generation."""
        while True:
            await self._changed.wait()
            self._changed = trio.Event()
            upstream = self._current_upstream()
            if upstream is None or not self._ready():
                self._roots_notice_due = False  # a new generation has cached no roots: nothing to tell it
                continue  # the next generation gets the rest after its first sync
            try:
                with trio.fail_after(self._timeout_sec):
                    await upstream.set_log_level(self.log_level)
                    await upstream.set_subscriptions(self.subscriptions)
                    if self._roots_notice_due:
                        self._roots_notice_due = False
                        await upstream.roots_changed()
            except (UpstreamError, MCPError, trio.TooSlowError) as exc:
                logger.warning("server=%s could not apply log level / subscriptions / roots: %s", self._name, exc)
