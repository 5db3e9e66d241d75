"""Rate-limited logging for events that can repeat once per call.

A dead server can fail thousands of calls a second, and one WARNING per
failure buries everything else in the log (3,400 lines in 11 s were seen in a
kill test). ``RateLimitedLog`` keeps, per key (say ``(server, error kind)``),
one window: the first occurrence is logged and opens the window; repeats
inside it are only counted; the first occurrence after it is logged with the
count of those suppressed (in the text and as the ``suppressed`` extra field)
and opens the next window. A count is reported only when its key recurs: a
burst that ends is summed up by the next line of that key, not by a timer.

Time comes from an injectable clock (``trio.current_time`` by default), so
tests drive it. Synchronous and ``await``-free: no lock is needed under trio.
Memory: one small entry per key; entries with nothing pending are pruned once
there are more than ``PRUNE_ABOVE_KEYS``, so keys built from an open-ended set
cannot grow without bound.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Final

import trio

PRUNE_ABOVE_KEYS: Final = 1024


@dataclass(slots=True)
class _Window:
    opened_at: float
    suppressed: int = 0


class RateLimitedLog:
    """Log at most one line per key per window, and say how many were held back.

    Args:
        logger: Where the lines go.
        window_sec: How long after a logged line repeats of its key are only counted.
        clock: The time source; ``trio.current_time`` unless a test injects one.
    """

    def __init__(
        self, logger: logging.Logger, *, window_sec: float, clock: Callable[[], float] = trio.current_time
    ) -> None:
        self._logger = logger
        self._window_sec = window_sec
        self._clock = clock
        self._windows: dict[Hashable, _Window] = {}

    def warning(self, key: Hashable, msg: str, *args: object, extra: Mapping[str, object] | None = None) -> bool:
        """``logger.warning(msg, *args)`` unless ``key``'s window is open; True if it logged."""
        now = self._clock()
        window = self._windows.get(key)
        if window is not None and now < window.opened_at + self._window_sec:
            window.suppressed += 1
            return False
        suppressed = window.suppressed if window is not None else 0
        if suppressed:
            msg += " (%d more like it suppressed since the last one logged)"
            args = (*args, suppressed)
        if window is None and len(self._windows) >= PRUNE_ABOVE_KEYS:
            self._prune(now)
        self._windows[key] = _Window(opened_at=now)
        # stacklevel 2: the record names the line that called ``warning``, not this one.
        self._logger.warning(msg, *args, extra={**(extra or {}), "suppressed": suppressed}, stacklevel=2)
        return True

    def _prune(self, now: float) -> None:
        """Forget keys whose window has closed with nothing pending (they would log at once anyway)."""
        self._windows = {
            key: window
            for key, window in self._windows.items()
            if window.suppressed or now < window.opened_at + self._window_sec
        }
