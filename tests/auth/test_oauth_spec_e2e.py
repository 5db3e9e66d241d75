"""The rest of the MCP authorization spec, end to end with real parts (issue 13).

Each test runs the real loopback authorization server (``tests/fixtures/oauth_server.py``)
with one issue-13 switch: a CIMD-only server, a tool that needs a scope step-up,
a ``private_key_jwt`` token endpoint, a wrong RFC 9207 ``iss`` (and a wrong RFC
8414 metadata issuer), and a protected resource whose metadata switches to
another authorization server mid-run. ``login`` runs as the CLI does with
``$BROWSER`` a script playing the browser; ``run`` serves a host over stdio.

The canary grep of ``tests/auth/test_oauth_e2e.py`` applies to every test: no
``CANARY`` (every token and secret the fixture issues) in anything the sidecar
or the CLI wrote, at debug level; the ``private_key_jwt`` test adds the key's
PEM body and every signed assertion the fixture received to the grep.
"""

from __future__ import annotations

import json
import os
from contextlib import suppress
from pathlib import Path
from typing import Final

import httpx2
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import MCPError

from tests.auth.test_oauth_e2e import (
    BOUND_SEC,
    ECHO,
    Outputs,
    admin_json,
    browser_script,
    login,
    open_auth_server,
    remote_settings,
    wait_state,
)
from tests.sidecar import open_host, run_cli, text_of, write_settings

pytestmark = pytest.mark.e2e

ADD: Final = "mcp__remote__add"
CIMD_URL: Final = "https://client.example/mcp-supervisor.json"
CC_SECRET: Final = "CANARYSECRET-client-credentials"


def token_document(tmp_path: Path) -> dict[str, object]:
    document: dict[str, object] = json.loads((tmp_path / "store" / "tokens" / "local" / "remote.json").read_text())
    return document


async def test_a_cimd_only_server_gets_the_metadata_document_url_as_client_id_and_login_copes_with_a_step_up(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        # This server also wants mcp:admin once the session is up (the handshake's `notifications/initialized`):
        # one login run, two authorizations through one redirect listener.
        step_up = ("--step-up-tool", "notifications/initialized")
        async with open_auth_server(tmp_path, "--cimd-url", CIMD_URL, *step_up) as auth:
            config = write_settings(
                tmp_path,
                {"remote": {"url": auth.url, "protocol": "legacy", "oauth": {"client_metadata_url": CIMD_URL}}},
                supervisor={"token_store": str(tmp_path / "store")},
            )
            await login(config, tmp_path, outputs)
            assert auth.events("register") == []  # no dynamic registration: there is no endpoint for it
            authorizations = auth.events("authorize")
            assert [e["client_id"] for e in authorizations] == [CIMD_URL, CIMD_URL]
            assert [e["scopes"] for e in authorizations] == [["mcp"], ["mcp", "mcp:admin"]]
            async with open_host(config) as host:
                await host.wait_tools(lambda names: ECHO in names)
                assert text_of(await host.call(ECHO, {"text": "cimd"})) == "cimd"
    outputs.assert_no_canary(capfd)


async def test_an_insufficient_scope_403_parks_in_needs_login_naming_the_scope_and_the_next_login_asks_for_the_union(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(tmp_path, "--step-up-tool", "add") as auth:
            config = remote_settings(tmp_path, auth.url)
            await login(config, tmp_path, outputs)
            async with open_host(config) as host, httpx2.AsyncClient() as http:
                await host.wait_tools(lambda names: ADD in names)
                assert text_of(await host.call(ECHO, {"text": "before"})) == "before"
                # This call finds out: the server wants mcp:admin. Its host is told so, and what to run.
                refused = await host.call(ADD, {"a": 1, "b": 2})
                assert refused.is_error
                assert "requires scope 'mcp:admin'" in text_of(refused), text_of(refused)
                assert "run `mcp-supervisor login remote`" in text_of(refused)
                server = await wait_state(http, host, "needs_login", outputs)
                assert "requires scope 'mcp:admin'" in server["last_error"]
                assert "run `mcp-supervisor login remote`" in server["last_error"]
                status = outputs.add_cli(await run_cli("status", "--admin-url", await host.log.wait_listening("admin")))
                assert "mcp:admin" in status.stdout and "mcp-supervisor login remote" in status.stdout
                # Parked, not a reconnect loop: the one 403 is all the server saw.
                assert len(auth.events("insufficient_scope")) == 1

                await login(config, tmp_path, outputs)
                assert auth.events("authorize")[-1]["scopes"] == ["mcp", "mcp:admin"]  # the union
                await host.wait_tools(lambda names: ADD in names)
                assert text_of(await host.call(ADD, {"a": 1, "b": 2})) == "3"
    assert not (tmp_path / "store" / "tokens" / "local" / "remote.step-up.json").exists()  # granted: over
    log = outputs.assert_no_canary(capfd)
    assert "requires scope 'mcp:admin' for this request (insufficient_scope)); run `mcp-supervisor login remote`" in log


async def test_client_credentials_re_authorize_by_themselves_on_a_step_up_at_most_three_times_then_park(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    secret_env = {"REMOTE_SECRET": CC_SECRET}
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(
            tmp_path,
            *("--cc-client-id", "machine", "--step-up-tool", "add", "--never-grant"),
            env={"OAUTH_FIXTURE_CC_SECRET": CC_SECRET},
        ) as auth:
            config = remote_settings(
                tmp_path,
                auth.url,
                grant="client_credentials",
                client_id="machine",
                client_secret_env_var="REMOTE_SECRET",
                issuer=auth.base,
            )
            async with open_host(config, env=secret_env) as host, httpx2.AsyncClient() as http:
                await host.wait_tools(lambda names: ADD in names)
                for _ in range(4):  # each call costs one re-authorization, until the cap
                    with suppress(MCPError):
                        result = await host.call(ADD, {"a": 1, "b": 2})
                        assert result.is_error
                server = await wait_state(http, host, "needs_login", outputs)
                assert "requires scope 'mcp:admin'" in server["last_error"]
                assert "did not grant in 3 authorizations" in server["last_error"]
                # One grant to connect, then exactly three for the step-up, each asking for the union.
                grants = auth.events("token")
                assert [g["grant"] for g in grants] == ["client_credentials"] * 4
                assert all(g["scopes"] == ["mcp"] for g in grants)  # the server never grants mcp:admin
                await admin_json(http, host, "/metrics", outputs)
    outputs.assert_no_canary(capfd)


async def test_private_key_jwt_client_credentials_connect_and_step_up_and_the_key_and_assertions_never_show(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    key_file = tmp_path / "client-key.pem"
    key_file.write_text(pem)
    key_file.chmod(0o600)
    public_file = tmp_path / "client-key.pub"
    public_file.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    pem_body = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(
            tmp_path,
            *("--jwt-client-id", "signer", "--jwt-public-key", str(public_file), "--step-up-tool", "add"),
        ) as auth:
            config = remote_settings(
                tmp_path,
                auth.url,
                grant="client_credentials",
                client_id="signer",
                private_key_file=str(key_file),
                signing_algorithm="ES256",
                issuer=auth.base,
            )
            check = outputs.add_cli(await run_cli("check", "--config", str(config)))
            assert f"private_key_file {key_file} (ES256)" in check.stdout
            async with open_host(config) as host, httpx2.AsyncClient() as http:
                await host.wait_tools(lambda names: ADD in names)
                assert text_of(await host.call(ECHO, {"text": "signed"})) == "signed"
                assert text_of(await host.call(ADD, {"a": 2, "b": 2})) == "4"  # re-authorized once, by itself
                await admin_json(http, host, "/status", outputs)
                await admin_json(http, host, "/metrics", outputs)
            assert auth.events("refused_assertion") == []
            assert [g["scopes"] for g in auth.events("token")] == [["mcp"], ["mcp", "mcp:admin"]]
            assertions = [str(e["value"]) for e in auth.events("assertion")]
    assert len(assertions) == 2 and len(set(assertions)) == 2  # a fresh assertion per token request
    log = outputs.assert_no_canary(capfd)
    everything = [log, *outputs.texts]
    for secret in [*pem_body, *assertions, *(a.split(".")[2] for a in assertions)]:
        assert sum(text.count(secret) for text in everything) == 0


async def test_issuer_checks_accept_a_matching_iss_and_refuse_a_wrong_iss_or_metadata_issuer_by_name(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    browser = {"BROWSER": str(browser_script(tmp_path))}
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(tmp_path, "--iss", "correct") as auth:
            config = remote_settings(tmp_path, auth.url)
            await login(config, tmp_path, outputs)  # RFC 9207: advertised, sent, and matching
        cases = [("--iss", "wrong"), ("--metadata-issuer", "http://127.0.0.1:1/")]
        expectations = ["Authorization response iss mismatch", "metadata issuer mismatch"]
        for switch, expected in zip(cases, expectations, strict=True):
            case_dir = tmp_path / switch[0].strip("-")
            case_dir.mkdir()
            async with open_auth_server(case_dir, *switch) as auth:
                config = remote_settings(case_dir, auth.url)
                refused = outputs.add_cli(await run_cli("login", "remote", "--config", str(config), env=browser))
                assert refused.code == 1, refused.stderr
                assert "login refused, issuer mismatch" in refused.stderr and expected in refused.stderr
                assert auth.grants() == []  # never a retry, never a token exchange
                document = json.loads((case_dir / "store" / "tokens" / "local" / "remote.json").read_text())
                assert "tokens" not in document
    # No sidecar ran here (so no debug log to require): grep the CLI's outputs and ours.
    captured = capfd.readouterr()
    assert sum(text.count("CANARY") for text in [*outputs.texts, captured.out, captured.err]) == 0


async def test_a_moved_authorization_server_parks_in_needs_login_and_login_registers_with_the_new_one_without_restart(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(tmp_path, "--second-as") as auth:
            config = remote_settings(tmp_path, auth.url)
            await login(config, tmp_path, outputs)
            assert [e["authorization_server"] for e in auth.events("register")] == ["as1"]
            async with open_host(config) as host, httpx2.AsyncClient() as http:
                await host.wait_tools(lambda names: ECHO in names)
                switched = (await http.post(f"{auth.base}/test/switch-as")).json()["authorization_server"]
                with suppress(MCPError):  # this call finds out: 401, and the metadata names another server
                    await host.call(ECHO, {"text": "after the move"})
                server = await wait_state(http, host, "needs_login", outputs)
                assert "its authorization server moved from" in server["last_error"]
                assert switched.removesuffix("/") in server["last_error"]
                assert [e["authorization_server"] for e in auth.events("register")] == ["as1"]  # run registers nowhere

                await login(config, tmp_path, outputs)
                assert [e["authorization_server"] for e in auth.events("register")] == ["as1", "as2"]
                assert auth.events("authorize")[-1]["authorization_server"] == "as2"
                await host.wait_tools(lambda names: ECHO in names)
                assert text_of(await host.call(ECHO, {"text": "moved"})) == "moved"
                assert host.process is not None and host.process.returncode is None  # the same sidecar
    outputs.assert_no_canary(capfd)
    assert os.stat(tmp_path / "store" / "tokens" / "local" / "remote.json").st_mode & 0o077 == 0
