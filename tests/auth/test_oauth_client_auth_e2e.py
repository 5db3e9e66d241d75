"""Issue 30, the sidecar as a client of a real authorization server (items 1, 2 and 3).

The real loopback authorization server (``tests/fixtures/oauth_server.py``)
takes a client secret only the ways ``--token-auth-methods`` names and says so
in its metadata, as real servers do; every token request with a secret is
logged (``client_auth``: the method used, whether it was taken). Item 1 runs
the one-shot ``call`` against a tool that needs a scope step-up.

The canary grep of ``tests/auth/test_oauth_e2e.py`` applies: the pre-registered
client's secret starts with ``CANARY`` too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest
import trio

from tests.auth.test_oauth_e2e import (
    BOUND_SEC,
    CC_SECRET,
    ECHO,
    Outputs,
    login,
    open_auth_server,
    remote_settings,
)
from tests.sidecar import open_host, run_cli, text_of

pytestmark = pytest.mark.e2e

APP_SECRET: Final = "CANARYSECRET-pre-registered"
BASIC: Final = "client_secret_basic"
POST: Final = "client_secret_post"
SECRET_ENV: Final = {"APP_SECRET": APP_SECRET}
FIXTURE_SECRETS: Final = {"OAUTH_FIXTURE_CLIENT_SECRET": APP_SECRET, "OAUTH_FIXTURE_CC_SECRET": CC_SECRET}


def _pre_registered(tmp_path: Path, url: str, **oauth: str) -> Path:
    return remote_settings(tmp_path, url, client_id="app", client_secret_env_var="APP_SECRET", **oauth)


async def test_a_pre_registered_client_logs_in_at_a_server_that_takes_only_client_secret_basic(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(
            tmp_path, "--client-id", "app", "--token-auth-methods", BASIC, env=FIXTURE_SECRETS
        ) as auth:
            config = _pre_registered(tmp_path, auth.url)
            await login(config, tmp_path, outputs, env=SECRET_ENV)
            assert auth.events("register") == []  # pre-registered: no dynamic registration
            assert [(e["method"], e["taken"]) for e in auth.events("client_auth")] == [(BASIC, True)]
            async with open_host(config, env=SECRET_ENV) as host:
                await host.wait_tools(lambda names: ECHO in names)
                assert text_of(await host.call(ECHO, {"text": "basic"})) == "basic"
    outputs.assert_no_canary(capfd)


async def test_a_pre_registered_client_at_a_server_that_takes_only_client_secret_post_logs_in_and_refreshes_in_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(
            tmp_path, "--client-id", "app", "--token-auth-methods", POST, "--access-ttl-sec", "2", env=FIXTURE_SECRETS
        ) as auth:
            config = _pre_registered(tmp_path, auth.url)
            await login(config, tmp_path, outputs, env=SECRET_ENV)
            async with open_host(config, env=SECRET_ENV) as host:
                await host.wait_tools(lambda names: ECHO in names)
                # `run` never discovered the metadata before its first refresh: every call must still succeed.
                calls = 0
                while auth.grants().count("refresh_token") < 2:
                    result = await host.call(ECHO, {"text": f"call {calls}"})
                    assert not result.is_error and text_of(result) == f"call {calls}"
                    calls += 1
                    await trio.sleep(0.1)  # pacing, not ordering: spread the calls over the tokens' lifetimes
            used = [(e["grant"], e["method"], e["taken"]) for e in auth.events("client_auth")]
            assert used == [("authorization_code", POST, True), *[("refresh_token", POST, True)] * 2]
    outputs.assert_no_canary(capfd)


async def test_a_forced_client_secret_post_is_used_where_the_server_would_also_take_basic(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(tmp_path, "--client-id", "app", env=FIXTURE_SECRETS) as auth:
            config = _pre_registered(tmp_path, auth.url, token_endpoint_auth_method=POST)
            check = outputs.add_cli(await run_cli("check", "--config", str(config), env=SECRET_ENV))
            assert check.code == 0, check.stderr
            await login(config, tmp_path, outputs, env=SECRET_ENV)
            assert [e["method"] for e in auth.events("client_auth")] == [POST]
        # The same server under `auto`: basic, the spec's default, where both are offered.
        auto = tmp_path / "auto"
        auto.mkdir()
        async with open_auth_server(auto, "--client-id", "app", env=FIXTURE_SECRETS) as auth:
            await login(_pre_registered(auto, auth.url), auto, outputs, env=SECRET_ENV)
            assert [e["method"] for e in auth.events("client_auth")] == [BASIC]
    captured = capfd.readouterr()  # no sidecar ran here: grep the CLI's outputs and ours
    assert sum(text.count("CANARY") for text in [*outputs.texts, captured.out, captured.err]) == 0


@pytest.mark.parametrize("method", [BASIC, POST])
async def test_client_credentials_with_a_secret_connect_at_a_server_that_takes_only_one_method(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], method: str
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(
            tmp_path, "--cc-client-id", "machine", "--token-auth-methods", method, env=FIXTURE_SECRETS
        ) as auth:
            config = remote_settings(
                tmp_path,
                auth.url,
                grant="client_credentials",
                client_id="machine",
                client_secret_env_var="REMOTE_SECRET",
                issuer=auth.base,
            )
            async with open_host(config, env={"REMOTE_SECRET": CC_SECRET}) as host:
                await host.wait_tools(lambda names: ECHO in names)
                assert text_of(await host.call(ECHO, {"text": "m2m"})) == "m2m"
            assert [(e["method"], e["taken"]) for e in auth.events("client_auth")] == [(method, True)]
            assert auth.grants() == ["client_credentials"]
    outputs.assert_no_canary(capfd)


async def test_a_one_shot_call_that_needs_a_scope_step_up_says_which_scope_and_what_to_run_without_a_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outputs = Outputs()
    with trio.fail_after(BOUND_SEC):
        async with open_auth_server(tmp_path, "--step-up-tool", "add") as auth:
            config = remote_settings(tmp_path, auth.url)
            await login(config, tmp_path, outputs)
            called = outputs.add_cli(
                await run_cli("call", "mcp__remote__add", '{"a": 1, "b": 2}', "--config", str(config))
            )
            assert called.code == 1 and called.stdout == ""
            assert "Traceback" not in called.stderr and "Error" not in called.stderr, called.stderr
            last = called.stderr.strip().splitlines()[-1]
            assert last.startswith("mcp-supervisor: mcp__remote__add: server 'remote' needs login (")
            assert "the server requires scope 'mcp:admin'" in last and last.endswith(
                "run `mcp-supervisor login remote`"
            )
            assert len(auth.events("insufficient_scope")) == 1
            # The step-up is recorded: the next login asks for the union, and then the call works.
            await login(config, tmp_path, outputs)
            assert auth.events("authorize")[-1]["scopes"] == ["mcp", "mcp:admin"]
            again = outputs.add_cli(
                await run_cli("call", "mcp__remote__add", '{"a": 1, "b": 2}', "--config", str(config))
            )
            assert again.code == 0, again.stderr
            assert '"text": "3"' in again.stdout
    captured = capfd.readouterr()
    assert sum(text.count("CANARY") for text in [*outputs.texts, captured.out, captured.err]) == 0
