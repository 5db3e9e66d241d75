"""Reconnect delays (DESIGN §4 I10): doubling, capped, jittered.

Pure arithmetic; the ServerActor owns the clock and the sleeping.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from supervisor.config.servers import ReconnectSettings


@dataclass
class Backoff:
    """Delay before the next attempt after ``failures`` consecutive failures.

    The first retry waits ``initial_delay_ms``; each further failure doubles the
    wait up to ``max_delay_ms``; the result is scaled by a uniform factor in
    ``[1 - jitter, 1 + jitter]`` (and never exceeds the ceiling by more than
    the jitter allows).
    """

    policy: ReconnectSettings
    rng: random.Random = field(default_factory=random.Random)

    def delay_sec(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure (``failures >= 1``)."""
        exponent = max(failures - 1, 0)
        # min() before the power would still overflow for absurd counts; cap the exponent.
        base_ms: float = min(self.policy.initial_delay_ms * (2 ** min(exponent, 62)), self.policy.max_delay_ms)
        jitter = self.policy.jitter
        factor = 1.0 + self.rng.uniform(-jitter, jitter) if jitter else 1.0
        return base_ms * factor / 1000.0

    @property
    def stability_window_sec(self) -> float:
        """A generation that stays up this long resets the failure count."""
        return self.policy.max_delay_ms / 1000.0
