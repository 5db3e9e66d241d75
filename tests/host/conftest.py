"""Fixtures of the host side's splice tests: a stdio upstream's splice the test plays (``_Upstream``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.host.test_http_splice import _Upstream


@pytest.fixture
def make_upstream() -> Iterator[Callable[..., _Upstream]]:
    """Makes ``_Upstream``s, and closes their stdin queues at the end of the test."""
    made: list[_Upstream] = []

    def make(timeout_sec: float = 60.0, *, modern: bool = True) -> _Upstream:
        made.append(_Upstream(timeout_sec, modern=modern))
        return made[-1]

    yield make
    for upstream in made:
        upstream.stdin.close()
        upstream.reads.close()
