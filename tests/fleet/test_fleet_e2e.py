"""Two (and more) sidecar processes sharing one real Redis (DESIGN I14), end to end.

Each sidecar is ``python -m supervisor run`` with a real host (``open_host``),
all pointed at one HTTP fixture server whose ``--log`` counts the upstream
``tools/list`` requests, and at one Redis server (``tests/fleet/redis_server.py``,
a unix socket in a temporary directory). The fixture serves the handshake era
only (``--legacy-only``), so its change notices reach just the session whose
call caused them: sidecar B can learn of A's ``list_changed`` only through the
fleet store. Every bound comes from ``scaled``; waits are on conditions.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
import trio

from tests.fleet.redis_server import RedisServer
from tests.sidecar import open_host, open_http_fixture, read_log, run_cli, scaled, wait_until, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC: Final = scaled(60)
ADMIN: Final = {"enabled": True, "port": 0, "token": "${ADMIN_TOKEN}"}
ADMIN_ENV: Final = {"ADMIN_TOKEN": "admin-token"}


def fleet_config(
    tmp_path: Path, name: str, upstream: str, redis_url: str, prefix: str, *, principal: str = "team-a"
) -> Path:
    store = {"backend": "redis", "url": redis_url, "key_prefix": prefix, "operation_timeout_ms": round(scaled(500))}
    supervisor: dict[str, Any] = {"principal": principal, "catalog_store": store, "admin": ADMIN}
    return write_settings(tmp_path, {"up": {"url": upstream}}, supervisor=supervisor, name=f"{name}.toml")


def upstream_lists(log: Path) -> int:
    return sum(1 for e in read_log(log) if e["event"] == "request" and e.get("method") == "tools/list")


def fleet_entries(server: RedisServer, prefix: str) -> int:
    """How many tools/list entries the fleet store holds under ``prefix`` (KEYS: a test-sized keyspace)."""
    reply = server.command("KEYS", f"{prefix}:*:e:tools/list:*")
    return int(reply.split(b"\r\n", 1)[0][1:])


def has_tool(name: str) -> Any:
    return lambda names: f"mcp__up__{name}" in names


async def store_status(http: httpx2.AsyncClient, base: str) -> dict[str, Any]:
    response = await http.get(f"{base}/status", headers={"Authorization": "Bearer admin-token"})
    document: dict[str, Any] = response.json()["catalog_store"]
    return document


async def test_a_cold_sidecar_reuses_the_fleet_catalog_and_follows_another_sidecars_list_changed(
    tmp_path: Path, shared_redis: RedisServer
) -> None:
    """Cold start with 0 upstream tools/list; A's list_changed reaches B within 1 s; ≤ 2 lists for the pair."""
    log = tmp_path / "upstream.log"
    prefix = f"e2e-{uuid.uuid4().hex[:8]}"
    with trio.fail_after(BOUND_SEC):
        async with open_http_fixture("--legacy-only", log=log) as upstream:
            a_config = fleet_config(tmp_path, "a", upstream.url, shared_redis.url, prefix)
            b_config = fleet_config(tmp_path, "b", upstream.url, shared_redis.url, prefix)
            async with open_host(a_config, env=ADMIN_ENV) as a:
                await a.wait_tools(has_tool("echo"))
                assert upstream_lists(log) == 1
                await wait_until(lambda: fleet_entries(shared_redis, prefix) == 1, what="A's entry in the fleet store")
                async with open_host(b_config, env=ADMIN_ENV) as b, httpx2.AsyncClient() as http:
                    await b.wait_tools(has_tool("echo"))
                    assert upstream_lists(log) == 1, "the cold sidecar listed the upstream itself"
                    b_status = await store_status(http, await b.log.wait_listening("admin"))
                    assert (b_status["state"], b_status["fleet_hits"]) == ("up", 1), b_status

                    await a.call("mcp__up__add_tool", {"name": "fresh"})  # the notice reaches A's session only
                    with trio.fail_after(scaled(1.0)):
                        await b.wait_tools(has_tool("fresh"), poll_sec=0.05)
                    await a.wait_tools(has_tool("fresh"))
                    assert upstream_lists(log) <= 2, f"{upstream_lists(log)} upstream tools/list for the pair"


async def test_a_sidecar_under_another_principal_does_not_reuse_the_fleet_catalog(
    tmp_path: Path, shared_redis: RedisServer
) -> None:
    log = tmp_path / "upstream.log"
    prefix = f"e2e-{uuid.uuid4().hex[:8]}"
    with trio.fail_after(BOUND_SEC):
        async with open_http_fixture("--legacy-only", log=log) as upstream:
            a_config = fleet_config(tmp_path, "a", upstream.url, shared_redis.url, prefix)
            other = fleet_config(tmp_path, "c", upstream.url, shared_redis.url, prefix, principal="team-b")
            async with open_host(a_config, env=ADMIN_ENV) as a:
                await a.wait_tools(has_tool("echo"))
                await wait_until(lambda: fleet_entries(shared_redis, prefix) == 1, what="A's entry in the fleet store")
                async with open_host(other, env=ADMIN_ENV) as c:
                    await c.wait_tools(has_tool("echo"))
                    assert upstream_lists(log) == 2, "a sidecar under another principal reused team-a's catalog"


async def test_calls_and_syncs_go_on_while_redis_is_dead_or_paused_and_reuse_returns_with_it(
    tmp_path: Path, own_redis: RedisServer
) -> None:
    """Redis killed, then paused: A's calls and a list_changed re-sync still complete; after Redis returns,
    the outbox drains and a cold sidecar reuses again."""
    log = tmp_path / "upstream.log"
    prefix = f"e2e-{uuid.uuid4().hex[:8]}"
    latencies: list[float] = []

    async def timed_calls(host: Any, count: int) -> None:
        for i in range(count):
            started = trio.current_time()
            await host.call("mcp__up__echo", {"text": f"call {i}"})
            latencies.append(trio.current_time() - started)

    with trio.fail_after(BOUND_SEC):
        async with open_http_fixture("--legacy-only", log=log) as upstream:
            configs = [fleet_config(tmp_path, n, upstream.url, own_redis.url, prefix) for n in ("a", "c", "d")]
            async with open_host(configs[0], env=ADMIN_ENV) as a, httpx2.AsyncClient() as http:
                admin = await a.log.wait_listening("admin")
                await a.wait_tools(has_tool("echo"))
                await timed_calls(a, 5)
                own_redis.stop()  # killed mid-run
                await timed_calls(a, 10)
                await a.call("mcp__up__add_tool", {"name": "while_dead"})
                await a.wait_tools(has_tool("while_dead"))
                assert (await store_status(http, admin))["state"] == "down"

                own_redis.start()  # same socket, empty: the epoch is new
                # Polling another process's state: it has no event for us.
                while (status := await store_status(http, admin))["state"] != "up" or status["outbox_depth"]:  # noqa: ASYNC110
                    await trio.sleep(0.05)

                pause_sec = scaled(4)
                own_redis.command("CLIENT", "PAUSE", str(round(pause_sec * 1000)), "ALL")
                await timed_calls(a, 10)
                await a.call("mcp__up__add_tool", {"name": "while_paused"})
                await a.wait_tools(has_tool("while_paused"))
                # Everything above ran while Redis held every command; a PING answers once the pause is over
                # (UNPAUSE cannot be sent: it would be held too).
                assert own_redis.command("PING", bound_sec=pause_sec + scaled(5)).startswith(b"+PONG")

            lists_before = upstream_lists(log)
            async with open_host(configs[1], env=ADMIN_ENV) as c:
                await c.wait_tools(has_tool("while_paused"))
            assert upstream_lists(log) == lists_before + 1
            await wait_until(lambda: fleet_entries(own_redis, prefix) >= 1, what="C's entry in the fleet store")
            async with open_host(configs[2], env=ADMIN_ENV) as d:
                await d.wait_tools(has_tool("while_paused"))
            assert upstream_lists(log) == lists_before + 1, "a cold sidecar did not reuse after Redis returned"
    print(f"call latency through A across the outage: max {max(latencies) * 1000:.1f} ms over {len(latencies)} calls")


async def test_a_bad_store_url_is_a_config_error_naming_the_key_and_never_showing_the_password(
    tmp_path: Path,
) -> None:
    for url in ("http://:hunter2-secret@127.0.0.1:6379/0", "redis://:hunter2-secret@127.0.0.1:notaport/0"):
        store = {"backend": "redis", "url": url}
        config = write_settings(tmp_path, {}, supervisor={"catalog_store": store})
        for command in ("check", "run"):
            result = await run_cli(command, "--config", str(config))
            assert result.code == 2, (command, result)
            assert "supervisor.catalog_store.url" in result.stderr
            assert "hunter2-secret" not in result.stdout + result.stderr
    good = {"backend": "redis", "url": "redis://user:${STORE_PASSWORD}@127.0.0.1:6379/0"}
    config = write_settings(tmp_path, {}, supervisor={"catalog_store": good})
    result = await run_cli("check", "--config", str(config), env={"STORE_PASSWORD": "hunter2-secret"})
    assert result.code == 0, result
    assert "redis://user:***@127.0.0.1:6379/0" in result.stdout
    assert "hunter2-secret" not in result.stdout + result.stderr
