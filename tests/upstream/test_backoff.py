"""Reconnect delays (DESIGN §4 I10): doubling from the initial delay, capped, jittered."""

from __future__ import annotations

import random

from supervisor.config.servers import ReconnectSettings
from supervisor.upstream.backoff import Backoff


def _backoff(*, initial_ms: int = 500, max_ms: int = 4000, jitter: float = 0.0, seed: int = 0) -> Backoff:
    policy = ReconnectSettings(initial_delay_ms=initial_ms, max_delay_ms=max_ms, jitter=jitter)
    return Backoff(policy, random.Random(seed))


def test_I10_delays_double_from_the_initial_delay_up_to_the_ceiling() -> None:
    backoff = _backoff()
    assert [backoff.delay_sec(n) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]


def test_I10_a_ceiling_that_is_not_a_doubling_step_caps_exactly() -> None:
    backoff = _backoff(initial_ms=300, max_ms=1000)
    assert [backoff.delay_sec(n) for n in range(1, 5)] == [0.3, 0.6, 1.0, 1.0]


def test_I10_absurd_failure_counts_stay_at_the_ceiling_without_overflow() -> None:
    backoff = _backoff()
    assert backoff.delay_sec(10_000) == 4.0


def test_I10_a_zero_initial_delay_retries_immediately() -> None:
    backoff = _backoff(initial_ms=0, max_ms=0)
    assert [backoff.delay_sec(n) for n in (1, 2, 10)] == [0.0, 0.0, 0.0]


def test_I10_jittered_delays_stay_within_the_jitter_fraction_of_the_base_delay() -> None:
    backoff = _backoff(jitter=0.2, seed=1234)
    bases = [0.5, 1.0, 2.0, 4.0, 4.0]
    for _ in range(200):
        delays = [backoff.delay_sec(n) for n in range(1, 6)]
        for base, delay in zip(bases, delays, strict=True):
            assert base * 0.8 <= delay <= base * 1.2
    # The jitter is really applied, in both directions.
    samples = [backoff.delay_sec(4) for _ in range(200)]
    assert min(samples) < 4.0 < max(samples)
    assert max(samples) <= 4.0 * 1.2


def test_I10_jitter_is_reproducible_with_a_seeded_rng() -> None:
    first = _backoff(jitter=0.5, seed=7)
    second = _backoff(jitter=0.5, seed=7)
    assert [first.delay_sec(n) for n in range(1, 10)] == [second.delay_sec(n) for n in range(1, 10)]


def test_I10_the_stability_window_is_the_delay_ceiling() -> None:
    assert _backoff(max_ms=4000).stability_window_sec == 4.0
