"""The fleet tests' fixtures: real Redis-protocol servers (``redis_server.RedisServer``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fleet.redis_server import RedisServer


def _running_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def shared_redis() -> Iterator[RedisServer]:
    """One real Redis server for the session (unix socket, no disk); tests separate by key prefix."""
    yield from _running_redis()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A real Redis server of this test's own, for tests that kill, pause or flush it."""
    yield from _running_redis()
