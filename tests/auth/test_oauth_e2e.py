"""Remote servers behind OAuth, end to end with real parts (issue 12).

A real authorization server and protected MCP server (``tests/fixtures/oauth_server.py``,
built from the SDK's ``mcp.server.auth``) run as a subprocess on a loopback port
the OS picks. ``mcp-supervisor login`` runs as the CLI does, with ``$BROWSER`` a
script that plays the user's browser: it follows the authorization redirect
(the fixture consents at once) back to the login's loopback listener. Then
``mcp-supervisor run`` serves a host over stdio, with the admin endpoint on.

Every token the fixture issues starts with ``CANARY``, and so does every client
secret in these tests: each test greps everything the sidecar and the CLI wrote
(at debug level), ``check``, ``/status`` and ``/metrics`` for it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
import trio
from mcp import MCPError

from tests.sidecar import (
    REPO_ROOT,
    CliResult,
    Host,
    ProcessLog,
    open_host,
    read_log,
    run_cli,
    scaled,
    sidecar_env,
    text_of,
    write_settings,
)

pytestmark = pytest.mark.e2e

BOUND_SEC: Final = scaled(45)
CANARY: Final = "CANARY"
CC_SECRET: Final = "CANARYSECRET-client-credentials"
ECHO: Final = "mcp__remote__echo"


@dataclass
class AuthServer:
    """The fixture: ``url`` is the protected MCP endpoint; ``base`` the authorization server."""

    url: str
    log_path: Path
    process: trio.Process

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")

    def grants(self) -> list[str]:
        return [str(e["grant"]) for e in read_log(self.log_path) if e["event"] == "token"]

    def tool_listings(self) -> int:
        """How many ``tools/list`` requests reached the protected MCP server."""
        return sum(1 for e in read_log(self.log_path) if e["event"] == "request" and e.get("method") == "tools/list")

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in read_log(self.log_path) if e["event"] == name]


@asynccontextmanager
async def open_auth_server(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> AsyncIterator[AuthServer]:
    log_path = tmp_path / "auth_server.jsonl"
    argv = [sys.executable, "-m", "tests.fixtures.oauth_server", "--log", str(log_path), *args]
    process = await trio.lowlevel.open_process(argv, stderr=subprocess.PIPE, cwd=str(REPO_ROOT), env=sidecar_env(env))
    log = ProcessLog()
    try:
        async with trio.open_nursery() as nursery:
            assert process.stderr is not None
            nursery.start_soon(log.pump, process.stderr)
            yield AuthServer(await log.wait_listening("oauth_server"), log_path, process)
            nursery.cancel_scope.cancel()
    finally:
        with suppress(ProcessLookupError):
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


def browser_script(tmp_path: Path) -> Path:
    """An executable that plays the user's browser: GET the URL, follow the redirect to the login listener."""
    script = tmp_path / "browser.py"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys, urllib.request\n"
        "with urllib.request.urlopen(sys.argv[1], timeout=30) as response:\n"
        "    sys.exit(0 if response.status == 200 else 1)\n"
    )
    script.chmod(0o755)
    return script


@dataclass
class Outputs:
    """Everything a test saw the sidecar and the CLI write, for the canary grep."""

    texts: list[str] = field(default_factory=list)

    def add(self, *texts: str) -> None:
        self.texts.extend(texts)

    def add_cli(self, result: CliResult) -> CliResult:
        self.add(result.stdout, result.stderr)
        return result

    def assert_no_canary(self, capfd: pytest.CaptureFixture[str]) -> str:
        """Grep for the canary; return the sidecar's log (its stderr) for further checks."""
        captured = capfd.readouterr()  # the sidecar's stderr, relayed to ours by the e2e helpers
        everything = [*self.texts, captured.out, captured.err]
        assert sum(text.count(CANARY) for text in everything) == 0, [t for t in everything if CANARY in t][:1]
        assert "DEBUG" in captured.err  # the grep covered the debug log
        return captured.err


def remote_settings(tmp_path: Path, url: str, **oauth: Any) -> Path:
    return write_settings(
        tmp_path,
        {"remote": {"url": url, "oauth": oauth}},
        supervisor={"token_store": str(tmp_path / "store"), "admin": {"enabled": True, "port": 0}},
    )


async def login(config: Path, tmp_path: Path, outputs: Outputs, env: dict[str, str] | None = None) -> CliResult:
    browser = {"BROWSER": str(browser_script(tmp_path))}
    result = outputs.add_cli(await run_cli("login", "remote", "--config", str(config), env={**browser, **(env or {})}))
    assert result.code == 0, result.stderr
    assert "logged in to 'remote'" in result.stdout
    return result


async def admin_json(http: httpx2.AsyncClient, host: Host, path: str, outputs: Outputs) -> Any:
    response = await http.get(f"{await host.log.wait_listening('admin')}{path}")
    outputs.add(response.text)
    return response.json() if path == "/status" else response.text


async def wait_state(http: httpx2.AsyncClient, host: Host, state: str, outputs: Outputs) -> dict[str, Any]:
    """Poll ``/status`` until server ``remote`` is in ``state`` (the caller bounds this)."""
    while True:
        document = await admin_json(http, host, "/status", outputs)
        server: dict[str, Any] = next(s for s in document["servers"] if s["name"] == "remote")
        if server["state"] == state:
            return server
        await trio.sleep(0.05)  # polling another process: no event to wait on


def stored_refresh_token(tmp_path: Path) -> str:
    document = json.loads((tmp_path / "store" / "tokens" / "local" / "remote.json").read_text())
    return str(document["tokens"]["refresh_token"])


async def test_login_then_run_serves_the_protected_tools_and_refreshes_an_expiring_token_with_no_failed_call(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(tmp_path, "--access-ttl-sec", "2") as auth:
            config = remote_settings(tmp_path, auth.url)
            await login(config, tmp_path, outputs)
            # Dynamic registration, then the authorization-code grant with PKCE.
            assert len(auth.events("register")) == 1 and len(auth.events("authorize")) == 1
            assert auth.grants() == ["authorization_code"]
            first_refresh_token = stored_refresh_token(tmp_path)
            outputs.add_cli(await run_cli("check", "--config", str(config)))
            async with open_host(config) as host, httpx2.AsyncClient() as http:
                await host.wait_tools(lambda names: ECHO in names)
                # Call until the 2 s access token has been refreshed twice: every call must succeed.
                calls = 0
                while auth.grants().count("refresh_token") < 2:
                    result = await host.call(ECHO, {"text": f"call {calls}"})
                    assert not result.is_error and text_of(result) == f"call {calls}"
                    calls += 1
                    await trio.sleep(0.1)  # pacing, not ordering: spread the calls over the tokens' lifetimes
                assert stored_refresh_token(tmp_path) != first_refresh_token  # rotated, and stored
                await admin_json(http, host, "/metrics", outputs)
                await admin_json(http, host, "/status", outputs)
    outputs.assert_no_canary(capfd)


async def test_a_revoked_refresh_token_leads_to_needs_login_and_a_new_login_brings_the_server_back_without_restart(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(tmp_path, "--access-ttl-sec", "2", "--ttl-ms", "600000") as auth:
            config = remote_settings(tmp_path, auth.url)
            await login(config, tmp_path, outputs)
            async with open_host(config) as host, httpx2.AsyncClient() as http:
                await host.wait_tools(lambda names: ECHO in names)
                listings = auth.tool_listings()
                assert (await http.post(f"{auth.base}/test/revoke-all")).status_code == 200
                with suppress(MCPError):  # this call finds out: the refresh is refused
                    await host.call(ECHO, {"text": "after revoke"})
                server = await wait_state(http, host, "needs_login", outputs)
                assert "run `mcp-supervisor login remote`" in server["last_error"]
                await host.wait_tools(lambda names: ECHO not in names)  # withdrawn
                with pytest.raises(MCPError) as parked:  # a call says why, not just "unknown tool"
                    await host.call(ECHO, {"text": "while parked"})
                assert "run `mcp-supervisor login remote`" in parked.value.error.message
                metrics = await admin_json(http, host, "/metrics", outputs)
                assert 'mcp_supervisor_servers{state="needs_login"} 1.0' in metrics
                status = outputs.add_cli(await run_cli("status", "--admin-url", await host.log.wait_listening("admin")))
                assert "needs_login" in status.stdout and "mcp-supervisor login remote" in status.stdout

                await login(config, tmp_path, outputs)
                await host.wait_tools(lambda names: ECHO in names)
                # New tokens are not a new identity: the reconnect reused the catalog (I4, I6), no tools/list.
                assert auth.tool_listings() == listings
                assert text_of(await host.call(ECHO, {"text": "back"})) == "back"
                assert host.process is not None and host.process.returncode is None  # the same sidecar
    log = outputs.assert_no_canary(capfd)
    assert (
        "needs login (the authorization server refused the token refresh (HTTP 400)); run `mcp-supervisor login remote`"
        in log
    )


async def test_client_credentials_against_the_same_authorization_server_need_no_login(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(
            tmp_path, "--cc-client-id", "machine", env={"OAUTH_FIXTURE_CC_SECRET": CC_SECRET}
        ) as auth:
            config = remote_settings(
                tmp_path,
                auth.url,
                grant="client_credentials",
                client_id="machine",
                client_secret_env_var="REMOTE_SECRET",
                issuer=auth.base,
            )
            secret_env = {"REMOTE_SECRET": CC_SECRET}
            outputs.add_cli(await run_cli("check", "--config", str(config), env=secret_env))
            refused = outputs.add_cli(await run_cli("login", "remote", "--config", str(config), env=secret_env))
            assert refused.code == 2 and "no login needed" in refused.stderr
            async with open_host(config, env=secret_env) as host, httpx2.AsyncClient() as http:
                await host.wait_tools(lambda names: ECHO in names)
                assert text_of(await host.call(ECHO, {"text": "m2m"})) == "m2m"
                assert auth.grants() == ["client_credentials"]
                await admin_json(http, host, "/status", outputs)
                await admin_json(http, host, "/metrics", outputs)
    outputs.assert_no_canary(capfd)
