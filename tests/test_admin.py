"""The admin endpoint (/healthz, /readyz, /status, /metrics) and the ``status`` command, against a real sidecar.

The sidecar serves its host over stdio here (``open_host``): the admin endpoint
does not depend on the front's transport. Its token comes from
``[supervisor.admin] token``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
import trio
from mcp import MCPError
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e import fixture_server, free_port, open_host, run_cli, text_of, wait_port, write_settings

pytestmark = pytest.mark.e2e

TOKEN: Final = "admin-token"
AUTH: Final = {"Authorization": f"Bearer {TOKEN}"}


def admin_table(port: int) -> dict[str, Any]:
    return {"admin": {"enabled": True, "port": port, "token": "${ADMIN_TOKEN}"}}


async def get_json(http: httpx2.AsyncClient, url: str) -> tuple[int, Any]:
    response = await http.get(url, headers=AUTH)
    return response.status_code, response.json()


async def test_readyz_is_503_naming_pending_servers_until_every_first_attempt_ends(tmp_path: Path) -> None:
    port = free_port()
    servers = {"quick": fixture_server(), "slow": fixture_server("--list-delay-sec", "2")}
    config = write_settings(tmp_path, servers, supervisor=admin_table(port))
    base = f"http://127.0.0.1:{port}"
    with trio.fail_after(20):
        async with open_host(config, env={"ADMIN_TOKEN": TOKEN}), httpx2.AsyncClient() as http:
            await wait_port(port)
            assert (await http.get(f"{base}/healthz", headers=AUTH)).status_code == 200
            code, body = await get_json(http, f"{base}/readyz")
            assert code == 503
            assert "slow" in body["pending"]
            while code == 503:
                await trio.sleep(0.1)
                code, body = await get_json(http, f"{base}/readyz")
            assert (code, body) == (200, {"ready": True, "pending": []})


async def test_admin_requests_need_the_token_and_a_local_host_name(tmp_path: Path) -> None:
    port = free_port()
    config = write_settings(tmp_path, {"fx": fixture_server()}, supervisor=admin_table(port))
    base = f"http://127.0.0.1:{port}"
    with trio.fail_after(20):
        async with open_host(config, env={"ADMIN_TOKEN": TOKEN}), httpx2.AsyncClient() as http:
            await wait_port(port)
            for path in ("/healthz", "/readyz", "/status", "/metrics"):
                assert (await http.get(base + path)).status_code == 401
                assert (await http.get(base + path, headers={"Authorization": "Bearer nope"})).status_code == 401
            evil = await http.get(f"{base}/status", headers={**AUTH, "Host": "evil.example"})
            assert 400 <= evil.status_code < 500
            assert "fx" not in evil.text


async def test_status_follows_a_crash_through_reconnecting_back_to_ready(tmp_path: Path) -> None:
    port = free_port()
    servers = {"fx": fixture_server(reconnect={"initial_delay_ms": 800, "max_delay_ms": 2000})}
    config = write_settings(tmp_path, servers, supervisor=admin_table(port))
    url = f"http://127.0.0.1:{port}/status"
    with trio.fail_after(30):
        async with open_host(config, env={"ADMIN_TOKEN": TOKEN}) as host, httpx2.AsyncClient() as http:
            await wait_port(port)
            await host.wait_tools(lambda names: "mcp__fx__echo" in names)
            _, doc = await get_json(http, url)
            (fx,) = doc["servers"]
            assert (fx["state"], fx["generation"], fx["era"], fx["identity"]) == ("ready", 1, "2026", "fixture@1.0.0")
            assert fx["tools"] == 11
            assert fx["last_sync_reason"] == "initial"
            assert fx["catalog_cache"]["entries"] >= 0
            await host.call("mcp__fx__crash")
            states: list[str] = []
            while not (states and states[-1] == "ready" and "reconnecting" in states):
                _, doc = await get_json(http, url)
                fx = doc["servers"][0]
                if not states or states[-1] != fx["state"]:
                    states.append(fx["state"])
                await trio.sleep(0.05)
            assert states[0] == "reconnecting", states  # polled from right after the crash
            assert fx["generation"] == 2
            assert fx["last_sync_reason"] == "reconnect"
            assert "connection lost" in fx["last_error"] or fx["last_error"] is None
            # The CLI's table, from the same endpoint, with the token from the environment.
            result = await run_cli(
                "status", "--admin-url", f"http://127.0.0.1:{port}", env={"MCP_SUPERVISOR_TOKEN": TOKEN}
            )
            assert result.code == 0, result.stderr
            assert "SERVER" in result.stdout
            assert "fx" in result.stdout
            assert "ready" in result.stdout
            refused = await run_cli(
                "status", "--admin-url", f"http://127.0.0.1:{port}", env={"MCP_SUPERVISOR_TOKEN": "x"}
            )
            assert refused.code == 1
            assert "401" in refused.stderr


async def test_status_command_exits_1_when_no_sidecar_answers() -> None:
    with trio.fail_after(20):
        result = await run_cli("status", "--admin-url", f"http://127.0.0.1:{free_port()}")
    assert result.code == 1
    assert "cannot reach" in result.stderr


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_parse_and_move_with_real_calls(tmp_path: Path) -> None:
    port = free_port()
    config = write_settings(tmp_path, {"fx": fixture_server()}, supervisor=admin_table(port))
    url = f"http://127.0.0.1:{port}/metrics"
    ok = ("mcp_supervisor_tool_calls_total", frozenset({("server", "fx"), ("outcome", "ok")}))
    rpc = ("mcp_supervisor_tool_calls_total", frozenset({("server", "fx"), ("outcome", "rpc_error")}))
    latency = ("mcp_supervisor_tool_call_duration_seconds_count", frozenset({("server", "fx")}))
    syncs = ("mcp_supervisor_syncs_total", frozenset({("server", "fx"), ("reason", "initial"), ("outcome", "ok")}))
    listed = ("mcp_supervisor_upstream_tools_list_total", frozenset({("server", "fx")}))
    with trio.fail_after(20):
        async with open_host(config, env={"ADMIN_TOKEN": TOKEN}) as host, httpx2.AsyncClient() as http:
            await wait_port(port)
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
