"""The semantic index's vectors in the fleet store: one sidecar embeds, the others reuse (issue 48).

Two "sidecars" are two ``FleetStore`` + ``SemanticEngine`` pairs in this process, with no local
vector file (``cache_dir=None``), against the session's real Redis server; the model is the one the
``search`` extra ships, loaded once.
"""

from __future__ import annotations

import pytest
import trio

from supervisor.catalog.semantic import load_embedder
from supervisor.catalog.semantic_engine import SemanticConfig, SemanticEngine
from supervisor.catalog.views import CatalogView, ViewRules
from supervisor.fleet.store import FleetStore
from supervisor.fleet.vectors import FleetVectors
from tests.catalog.test_semantic import saved_registry
from tests.fleet.redis_server import RedisServer
from tests.fleet.test_fleet_store import store_settings
from tests.sidecar import scaled

pytestmark = pytest.mark.e2e  # a real Redis server process


async def test_a_second_sidecar_of_the_fleet_reuses_every_vector_the_first_embedded(shared_redis: RedisServer) -> None:
    settings = store_settings(shared_redis.url)
    model = load_embedder()
    registry = saved_registry(["git", "fs", "time"])
    count = len(registry.tool_entries())

    async def one_sidecar(origin: str) -> SemanticEngine:
        store = FleetStore(settings, origin=origin)
        engine = SemanticEngine(SemanticConfig(), None, loader=lambda _model, _path: model)
        engine.shared = FleetVectors(store)
        view = CatalogView(registry, ViewRules("find", search=True))
        view.semantic = engine
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run)
            await nursery.start(engine.run)
            await engine.wait_settled()
            assert view.semantic_index() is None
            await engine.wait_settled()
            assert view.semantic_index() is not None
            nursery.cancel_scope.cancel()
        return engine

    with trio.fail_after(scaled(30)):
        first = await one_sidecar("a")
        assert (first.embedded, first.reused) == (count, 0)
        second = await one_sidecar("b")
        assert (second.embedded, second.reused) == (0, count), "the fleet's vectors, not the model"
