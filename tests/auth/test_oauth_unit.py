"""Remote servers, the parts that need no process (issue 12): settings, token store, redirect listener, needs_login.

The end-to-end behaviour (a real authorization server, ``login``, ``run``) is in
``tests/auth/test_oauth_e2e.py``; the legacy SSE transport in ``tests/upstream/test_sse.py``.
"""

from __future__ import annotations

import json
import os
import random
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
import trio.testing
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import OAuthToken

from supervisor.auth.oauth import TOKEN_POLL_SEC, client_metadata, needs_login_message
from supervisor.auth.token_store import FileTokenStorage, TokenFileRefused, file_signature, token_file
from supervisor.catalog.registry import Kind, Registry
from supervisor.commands.login import RedirectListener, open_redirect_listener
from supervisor.compat.oauth import SupervisorOAuthProvider
from supervisor.compat.oauth_context import refresh_margin_sec
from supervisor.config.check import describe_settings
from supervisor.config.loader import load_settings
from supervisor.config.servers import OAuthSettings, ReconnectSettings, ServerSettings
from supervisor.errors import ConfigError, UpstreamNeedsLogin
from supervisor.ops.status import ServerStatus
from supervisor.server_actor import ServerActor
from tests.fakes import FakeServer, FakeSession, tool

URL = "https://remote.example/mcp"


def _load(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "settings.toml"
    path.write_text(text, encoding="utf-8")
    return load_settings(path, environ={})


# -- settings ---------------------------------------------------------------------------------


def test_an_oauth_table_on_a_stdio_server_is_refused_naming_the_server_and_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"server 'files': 'oauth' only applies to http \(url\) servers"):
        _load(tmp_path, '[mcp_servers.files]\ncommand = "x"\n[mcp_servers.files.oauth]\n')


def test_transport_sse_on_a_stdio_server_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"server 'files': 'transport' only applies to http"):
        _load(tmp_path, '[mcp_servers.files]\ncommand = "x"\ntransport = "sse"\n')


def test_client_credentials_without_a_secret_is_refused_naming_the_keys(tmp_path: Path) -> None:
    text = f'[mcp_servers.m2m]\nurl = "{URL}"\n[mcp_servers.m2m.oauth]\ngrant = "client_credentials"\nclient_id = "c"\n'
    with pytest.raises(ConfigError, match=r"server 'm2m'.*client_credentials.*client_secret_env_var"):
        _load(tmp_path, text)


def test_a_bearer_variable_and_an_oauth_table_together_are_refused(tmp_path: Path) -> None:
    text = f'[mcp_servers.r]\nurl = "{URL}"\nbearer_token_env_var = "T"\n[mcp_servers.r.oauth]\n'
    with pytest.raises(ConfigError, match=r"server 'r'.*bearer_token_env_var.*oauth.*keep one"):
        _load(tmp_path, text)


def test_oauth_tables_inherit_the_principal_and_token_store_and_check_shows_no_secret(tmp_path: Path) -> None:
    os.environ["H12_TEST_SECRET"] = "CANARY-check-secret"
    try:
        settings = _load(
            tmp_path,
            f'[supervisor]\nprincipal = "alice"\ntoken_store = "{tmp_path}/store"\n'
            f'[mcp_servers.r]\nurl = "{URL}"\n[mcp_servers.r.oauth]\nclient_id = "cid"\n'
            'client_secret_env_var = "H12_TEST_SECRET"\nscopes = ["read"]\n',
        )
        oauth = settings.mcp_servers["r"].oauth
        assert oauth.principal == "alice"
        assert oauth.token_store == f"{tmp_path}/store"
        text = describe_settings(settings)
        assert "client_secret_env_var H12_TEST_SECRET" in text
        assert f"token file {tmp_path}/store/tokens/alice/r.json" in text
        assert "CANARY" not in text
    finally:
        del os.environ["H12_TEST_SECRET"]


def test_the_catalog_identity_names_the_oauth_client_but_never_a_token(tmp_path: Path) -> None:
    plain = ServerSettings(name="r", url=URL)
    with_oauth = ServerSettings(name="r", url=URL, oauth=OAuthSettings(scopes=["read"]))
    other_scopes = ServerSettings(name="r", url=URL, oauth=OAuthSettings(scopes=["read", "write"]))
    sse = ServerSettings.model_validate({"name": "r", "url": URL, "transport": "sse"})
    assert len({plain.target, with_oauth.target, other_scopes.target, sse.target}) == 4
    assert plain.target == f"{URL}#headers={plain.target.split('#headers=')[1]}"  # unchanged for existing servers


# -- the token store ----------------------------------------------------------------------------


def _storage(tmp_path: Path, principal: str = "local", server: str = "r") -> FileTokenStorage:
    oauth = OAuthSettings(token_store=str(tmp_path / "store"), principal=principal)
    return FileTokenStorage(token_file(oauth, server), server, URL)


def _token(access: str = "CANARYACCESS1", refresh: str | None = "CANARYREFRESH1", expires_in: int = 3600) -> OAuthToken:
    return OAuthToken(access_token=access, refresh_token=refresh, expires_in=expires_in, scope="mcp")


async def test_tokens_are_written_atomically_with_mode_0600_and_read_back(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    await storage.set_tokens(_token())
    assert stat.S_IMODE(storage.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(storage.path.parent.stat().st_mode) == 0o700
    assert [p.name for p in storage.path.parent.iterdir()] == ["r.json"]  # no temporary file left behind
    loaded = await storage.get_tokens()
    assert loaded is not None and loaded.access_token == "CANARYACCESS1" and loaded.refresh_token == "CANARYREFRESH1"
    assert loaded.expires_in is not None and 3590 <= loaded.expires_in <= 3600  # the time left, not the original


async def test_a_token_file_readable_by_others_is_refused_with_the_fix_in_the_message(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    await storage.set_tokens(_token())
    storage.path.chmod(0o644)
    with pytest.raises(TokenFileRefused, match=r"mode 0644, wider than 0600.*mcp-supervisor login r"):
        await storage.get_tokens()


async def test_principals_never_share_a_token_file(tmp_path: Path) -> None:
    alice, bob = _storage(tmp_path, "alice"), _storage(tmp_path, "bob")
    await alice.set_tokens(_token())
    assert alice.path != bob.path
    assert await bob.get_tokens() is None


async def test_tokens_stored_for_another_url_are_not_used(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    await storage.set_tokens(_token())
    moved = FileTokenStorage(storage.path, "r", "https://elsewhere.example/mcp")
    assert await moved.get_tokens() is None


async def test_a_stored_expiry_survives_a_restart_and_the_provider_refreshes_early(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    await storage.set_tokens(_token(expires_in=100))
    provider = SupervisorOAuthProvider(URL, client_metadata(OAuthSettings(), None), storage, headless=True)
    await provider._initialize()
    expiry = provider.context.token_expiry_time
    assert expiry is not None
    # 100 s lifetime, refreshed a quarter early: about 75 s from now.
    import time  # noqa: PLC0415 - the SDK's expiry is wall-clock time

    assert 70 <= expiry - time.time() <= 76
    assert refresh_margin_sec(2) == 0.5
    assert refresh_margin_sec(86_400) == 60.0


def test_the_private_sdk_hooks_the_provider_overrides_still_exist() -> None:
    for hook in ("_initialize", "_perform_authorization", "_handle_token_response", "_handle_refresh_response"):
        assert callable(getattr(OAuthClientProvider, hook)), hook
    assert callable(OAuthContext.update_token_expiry)
    assert callable(OAuthClientProvider._add_auth_header) and callable(OAuthContext.is_token_valid)


async def test_requests_with_a_valid_token_run_at_once_and_a_refused_token_runs_the_whole_flow(tmp_path: Path) -> None:
    """The SDK's flow held its lock until each answer's head: five slow POSTs took five times one."""
    storage = _storage(tmp_path)
    await storage.set_tokens(_token())
    provider = SupervisorOAuthProvider(URL, client_metadata(OAuthSettings(), None), storage, headless=True)
    in_flight = peak = 0
    seen: list[str | None] = []
    refuse = False

    async def handler(request: httpx2.Request) -> httpx2.Response:
        nonlocal in_flight, peak
        seen.append(request.headers.get("authorization"))
        if refuse:
            return httpx2.Response(401, request=request)
        in_flight += 1
        peak = max(peak, in_flight)
        await trio.testing.wait_all_tasks_blocked()  # every other request has had its chance to arrive
        in_flight -= 1
        return httpx2.Response(200, json={}, request=request)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler), auth=provider) as client:
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(client.post, URL)
        assert peak == 5 and seen == ["Bearer CANARYACCESS1"] * 5
        seen.clear()
        refuse = True  # a refused token: the SDK's flow (discovery and all, refused here too)
        with pytest.raises(OAuthFlowError):
            await client.post(URL)
    # The refusal is the SDK flow's first answer: the request is not sent twice; then the flow's own requests.
    assert seen[0] == "Bearer CANARYACCESS1" and seen.count("Bearer CANARYACCESS1") == 1 and len(seen) > 1


async def test_a_headless_provider_with_no_refresh_token_stops_with_login_required(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    await storage.set_tokens(_token(refresh=None))
    provider = SupervisorOAuthProvider(URL, client_metadata(OAuthSettings(), None), storage, headless=True)
    await provider._initialize()
    with pytest.raises(Exception, match="no refresh token"):
        await provider._perform_authorization()
    assert provider.login_required is not None and "CANARY" not in provider.login_required


# -- the redirect listener ---------------------------------------------------------------------


async def _get(listener: RedirectListener, query: str) -> httpx2.Response:
    async with httpx2.AsyncClient() as client:
        return await client.get(f"{listener.redirect_uri}?{query}")


async def test_the_redirect_listener_refuses_an_unknown_state_and_delivers_the_expected_one_once() -> None:
    with trio.fail_after(10):
        async with open_redirect_listener(0) as listener:
            assert listener.redirect_uri.startswith("http://127.0.0.1:")
            listener.expect("good-state")
            assert (await _get(listener, "code=stolen&state=bad-state")).status_code == 400
            assert (await _get(listener, "code=c1&state=good-state")).status_code == 200
            result = await listener.wait("good-state")
            assert (result.code, result.state) == ("c1", "good-state")
            assert (await _get(listener, "code=c1&state=good-state")).status_code == 400  # used: never twice


async def test_the_redirect_listener_serves_two_authorizations_in_one_run() -> None:
    with trio.fail_after(10):
        async with open_redirect_listener(0) as listener:
            for n in range(2):
                listener.expect(f"s{n}")
                assert (await _get(listener, f"code=c{n}&state=s{n}")).status_code == 200
                assert (await listener.wait(f"s{n}")).code == f"c{n}"


def _listening_addresses(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) of the IPv4 sockets listening on ``port``."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, port_hex = fields[1].split(":")
        if int(port_hex, 16) == port and fields[3] == "0A":  # 0A: LISTEN
            found.append(address)
    return found


async def test_the_redirect_listener_binds_loopback_only() -> None:
    with trio.fail_after(10):
        async with open_redirect_listener(0) as listener:
            assert _listening_addresses(listener.port) == ["0100007F"]  # 127.0.0.1, never 0.0.0.0


# -- needs_login in the actor (virtual clock) -------------------------------------------------------


def _oauth_server_settings(tmp_path: Path) -> ServerSettings:
    return ServerSettings(
        name="srv",
        url=URL,
        startup_timeout_sec=5.0,
        tool_timeout_sec=5.0,
        oauth=OAuthSettings(token_store=str(tmp_path / "store")),
        reconnect=ReconnectSettings(max_attempts=2, initial_delay_ms=500, max_delay_ms=4000, jitter=0.0),
    )


class _LoginGate:
    """A connector that needs a login until the token file exists, then connects the fake."""

    def __init__(self, fake: FakeServer, path: Path) -> None:
        self.fake = fake
        self.path = path
        self.attempts = 0

    @asynccontextmanager
    async def connect(
        self, settings: ServerSettings, *, on_list_changed: Callable[[Kind], None]
    ) -> AsyncIterator[FakeSession]:
        self.attempts += 1
        if not self.path.exists():
            await trio.lowlevel.checkpoint()
            raise UpstreamNeedsLogin(
                settings.name,
                needs_login_message(settings.name, "no tokens"),
                str(self.path),
                file_signature(self.path),
            )
        async with self.fake.connect(settings, on_list_changed=on_list_changed) as session:
            yield session


async def test_a_server_without_tokens_parks_in_needs_login_without_retrying_and_connects_once_tokens_appear(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = _oauth_server_settings(tmp_path)
    assert settings.oauth is not None
    path = token_file(settings.oauth, "srv")
    gate = _LoginGate(FakeServer([tool("echo")]), path)
    registry = Registry()
    states: list[str] = []
    ready = trio.Event()

    def on_status(status: ServerStatus) -> None:
        states.append(status.state)
        if status.state == "ready":
            ready.set()

    actor = ServerActor(settings, registry, connector=gate.connect, rng=random.Random(0), on_status=on_status)
    with trio.fail_after(7200):  # virtual seconds
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await actor.wait_first_attempt()
            assert actor.status.state == "needs_login"
            assert "run `mcp-supervisor login srv`" in actor.status.describe()
            assert registry.owned_by("srv") == []
            await trio.sleep(3600)  # an hour later: still parked, and no reconnect loop (one attempt in all)
            assert gate.attempts == 1
            assert actor.status.state == "needs_login"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps({"server_url": URL}))
            written_at = trio.current_time()
            await ready.wait()
            assert trio.current_time() - written_at <= TOKEN_POLL_SEC  # picked up at the next look, no restart
            assert gate.attempts == 2
            assert [t.public_name for t in registry.owned_by("srv")] == ["mcp__srv__echo"]
            nursery.cancel_scope.cancel()
    assert "reconnecting" not in states and "failed" not in states


def test_needs_login_is_described_with_the_command_to_run() -> None:
    status = ServerStatus("linear")
    status.mark_needs_login(error=needs_login_message("linear", "no tokens"))
    assert status.describe() == (
        "needs login; last error: server 'linear' needs login (no tokens); run `mcp-supervisor login linear`"
    )
