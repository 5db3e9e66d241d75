"""The fleet store's settings, URL masking, event format and cold-start mode (no process, no Redis)."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.catalog.cache import CatalogCache
from supervisor.config.loader import load_settings
from supervisor.config.models import CatalogStoreSettings
from supervisor.config.redis_url import mask_redis_url, redis_url_problem
from supervisor.errors import ConfigError
from supervisor.fleet.scripts import event_prefix, parse_event, target_id


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@cache:6379/0", "redis://:***@cache:6379/0"),
        ("rediss://user:s3cret@cache/1", "rediss://user:***@cache/1"),
        ("redis://s3cret@cache", "redis://***@cache"),
        ("unix://:s3cret@/run/redis.sock", "unix://:***@/run/redis.sock"),
        ("unix:///run/redis.sock?password=s3cret&db=2", "unix:///run/redis.sock?password=***&db=2"),
        ("redis://cache:6379/0", "redis://cache:6379/0"),
    ],
)
def test_a_store_url_is_shown_with_its_password_masked(url: str, shown: str) -> None:
    assert redis_url_problem(url) is None
    assert mask_redis_url(url) == shown


@pytest.mark.parametrize(
    "url", ["http://:s3cret@cache/0", "redis://:s3cret@cache:port/0", "redis://:s3cret@/0", "unix://relative.sock"]
)
def test_a_bad_store_url_is_refused_without_quoting_it(url: str) -> None:
    problem = redis_url_problem(url)
    assert problem is not None
    assert "s3cret" not in problem


def test_a_bad_store_url_in_the_file_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[supervisor.catalog_store]\nbackend = "redis"\nurl = "redis://:s3cret@h:nope/0"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert "supervisor.catalog_store.url" in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_the_store_url_expands_variables(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[supervisor.catalog_store]\nbackend = "redis"\nurl = "redis://:${PW}@h:6379/0"\n')
    store = load_settings(path, environ={"PW": "s3cret"}).supervisor.catalog_store
    assert store.url.get_secret_value() == "redis://:s3cret@h:6379/0"
    assert store.masked_url == "redis://:***@h:6379/0"
    assert "s3cret" not in repr(store)


def test_a_cold_start_uses_the_store_only_with_the_redis_backend() -> None:
    """memory keeps the seed behaviour (first sync = refresh); redis may serve it from the fleet (use)."""
    assert CatalogCache(principal="p").first_sync_mode == "refresh"
    redis = CatalogStoreSettings(backend="redis")
    assert CatalogCache(principal="p", store=redis).first_sync_mode == "use"


def test_events_round_trip_and_anything_else_is_ignored() -> None:
    tid = target_id("http://x/mcp#headers=abc")
    event = parse_event(event_prefix("evict", tid, "tools/list", "origin1") + "7")
    assert event is not None
    assert (event.kind, event.tid, event.method, event.origin, event.generation) == (
        "evict",
        tid,
        "tools/list",
        "origin1",
        7,
    )
    assert parse_event("garbage") is None
    assert parse_event("evict|t|m|o|notanumber") is None
