"""The admin endpoint (/healthz, /readyz, /status, /metrics) and the ``status`` command, against a real sidecar.

The sidecar serves its host over stdio here (``open_host``): the admin endpoint
does not depend on the front's transport. Its token comes from
``[supervisor.admin] token``. It listens on port 0; the test reads the real
address from the sidecar's ``admin listening on URL`` line.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
import trio
from mcp import MCPError
from prometheus_client.parser import text_string_to_metric_families

from tests.sidecar import fixture_server, open_host, run_cli, scaled, scaled_ms, text_of, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC: Final = scaled(60)
STATUS_TIMEOUT: Final = ("--timeout", str(scaled(5)))
"""The ``status`` command's own wait, scaled like every other e2e deadline."""
"""Per test: a sidecar and its fixtures start slowly on a loaded 2-core machine (10 s each was seen)."""
TOKEN: Final = "admin-token"
AUTH: Final = {"Authorization": f"Bearer {TOKEN}"}


ADMIN_TABLE: Final = {"admin": {"enabled": True, "port": 0, "token": "${ADMIN_TOKEN}"}}


async def get_json(http: httpx2.AsyncClient, url: str) -> tuple[int, Any]:
    response = await http.get(url, headers=AUTH)
    return response.status_code, response.json()


async def test_readyz_is_503_naming_pending_servers_until_every_first_attempt_ends(tmp_path: Path) -> None:
    servers = {"quick": fixture_server(), "slow": fixture_server("--list-delay-sec", str(scaled(2)))}
    config = write_settings(tmp_path, servers, supervisor=ADMIN_TABLE)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, env={"ADMIN_TOKEN": TOKEN}) as host, httpx2.AsyncClient() as http:
            base = await host.log.wait_listening("admin")
            assert (await http.get(f"{base}/healthz", headers=AUTH)).status_code == 200
            code, body = await get_json(http, f"{base}/readyz")
            assert code == 503
            assert "slow" in body["pending"]
            while code == 503:
                await trio.sleep(0.1)
                code, body = await get_json(http, f"{base}/readyz")
            assert (code, body) == (200, {"ready": True, "pending": []})


async def test_admin_requests_need_the_token_and_a_local_host_name(tmp_path: Path) -> None:
    config = write_settings(tmp_path, {"fx": fixture_server()}, supervisor=ADMIN_TABLE)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, env={"ADMIN_TOKEN": TOKEN}) as host, httpx2.AsyncClient() as http:
            base = await host.log.wait_listening("admin")
            for path in ("/healthz", "/readyz", "/status", "/metrics"):
                assert (await http.get(base + path)).status_code == 401
                assert (await http.get(base + path, headers={"Authorization": "Bearer nope"})).status_code == 401
            evil = await http.get(f"{base}/status", headers={**AUTH, "Host": "evil.example"})
            assert 400 <= evil.status_code < 500
            assert "fx" not in evil.text


async def test_status_follows_a_crash_through_reconnecting_back_to_ready(tmp_path: Path) -> None:
    # A declared catalog lifetime, so the reconnect reuses the cached tools/list (one entry, one hit).
    reconnect = {"initial_delay_ms": scaled_ms(800), "max_delay_ms": scaled_ms(2000)}
    servers = {"fx": fixture_server("--ttl-ms", "600000", reconnect=reconnect)}
    config = write_settings(tmp_path, servers, supervisor=ADMIN_TABLE)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, env={"ADMIN_TOKEN": TOKEN}) as host, httpx2.AsyncClient() as http:
            base = await host.log.wait_listening("admin")
            url = f"{base}/status"
            await host.wait_tools(lambda names: "mcp__fx__echo" in names)
            _, doc = await get_json(http, url)
            (fx,) = doc["servers"]
            assert (fx["state"], fx["generation"], fx["era"], fx["identity"]) == ("ready", 1, "2026", "fixture@1.0.0")
            assert fx["tools"] == 11
            assert fx["last_sync_reason"] == "initial"
            assert fx["last_error"] is None
            assert fx["catalog_cache"] == {"entries": 1, "hits": 0, "misses": 0}
            assert doc["search"].startswith("lexical only: "), doc["search"]  # no search view: no model loaded
            await host.call("mcp__fx__crash")
            # (state, generation) as polled; generation 1 may still read "ready" while its
            # dead child is being reaped, before the actor records the outage.
            seen: list[tuple[str, int]] = []
            while not seen or seen[-1] != ("ready", 2):
                _, doc = await get_json(http, url)
                fx = doc["servers"][0]
                if not seen or seen[-1] != (fx["state"], fx["generation"]):
                    seen.append((fx["state"], fx["generation"]))
                # Polling another process's state: there is nothing to wait on.
                await trio.sleep(0.05)
            states = [state for state, generation in seen if (state, generation) != ("ready", 1)]
            assert [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s] == ["reconnecting", "ready"], seen
            assert fx["last_sync_reason"] == "reconnect"
            assert (fx["last_error"] or "").startswith("connection lost"), fx["last_error"]
            assert fx["catalog_cache"] == {"entries": 1, "hits": 1, "misses": 0}
            # The CLI's table, from the same endpoint, with the token from the environment.
            result = await run_cli("status", "--admin-url", base, *STATUS_TIMEOUT, env={"MCP_SUPERVISOR_TOKEN": TOKEN})
            assert result.code == 0, result.stderr
            assert "SERVER" in result.stdout
            assert "fx" in result.stdout
            assert "ready" in result.stdout
            assert "\nsearch: lexical only: " in result.stdout
            refused = await run_cli("status", "--admin-url", base, *STATUS_TIMEOUT, env={"MCP_SUPERVISOR_TOKEN": "x"})
            assert refused.code == 1
            assert "401" in refused.stderr


async def test_status_command_exits_1_when_no_sidecar_answers() -> None:
    # A port we hold bound but never listen on: connections to it are refused for as long as we hold it.
    with socket.socket() as unused, trio.fail_after(BOUND_SEC):
        unused.bind(("127.0.0.1", 0))
        result = await run_cli("status", "--admin-url", f"http://127.0.0.1:{unused.getsockname()[1]}", *STATUS_TIMEOUT)
    assert result.code == 1
    assert "cannot reach" in result.stderr


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_parse_and_move_with_real_calls(tmp_path: Path) -> None:
    config = write_settings(tmp_path, {"fx": fixture_server()}, supervisor=ADMIN_TABLE)
    ok = ("mcp_supervisor_tool_calls_total", frozenset({("server", "fx"), ("outcome", "ok")}))
    rpc = ("mcp_supervisor_tool_calls_total", frozenset({("server", "fx"), ("outcome", "rpc_error")}))
    latency = ("mcp_supervisor_tool_call_duration_seconds_count", frozenset({("server", "fx")}))
    syncs = ("mcp_supervisor_syncs_total", frozenset({("server", "fx"), ("reason", "initial"), ("outcome", "ok")}))
    listed = ("mcp_supervisor_upstream_tools_list_total", frozenset({("server", "fx")}))
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, env={"ADMIN_TOKEN": TOKEN}) as host, httpx2.AsyncClient() as http:
            url = f"{await host.log.wait_listening('admin')}/metrics"
            await host.wait_tools(lambda names: "mcp__fx__echo" in names)
            before = _samples((await http.get(url, headers=AUTH)).text)
            assert before[("mcp_supervisor_catalog_tools", frozenset())] == 11
            assert before[("mcp_supervisor_child_processes", frozenset())] == 1
            assert before[syncs] == 1
            assert before[listed] == 1
            for i in range(3):
                assert text_of(await host.call("mcp__fx__echo", {"text": str(i)})) == str(i)
            with pytest.raises(MCPError):  # the upstream's -32602 reaches the host unchanged (I8)
                await host.call("mcp__fx__invalid_params")
            after = _samples((await http.get(url, headers=AUTH)).text)
    assert after[ok] - before.get(ok, 0) == 3
    assert after[rpc] - before.get(rpc, 0) == 1
    assert after[latency] - before.get(latency, 0) == 4


async def test_status_without_an_admin_url_refuses_port_0_and_says_where_the_url_is(tmp_path: Path) -> None:
    config = write_settings(tmp_path, {}, supervisor={"admin": {"enabled": True, "port": 0}})
    with trio.fail_after(BOUND_SEC):
        result = await run_cli("status", "--config", str(config), *STATUS_TIMEOUT)
    assert result.code == 2, result.stderr
    assert "port = 0" in result.stderr
    assert "--admin-url" in result.stderr
    assert "admin listening on" in result.stderr
