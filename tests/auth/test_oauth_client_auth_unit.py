"""How a client secret reaches the token endpoint, without a process (issue 30, items 2 and 3).

The decision (``compat.oauth_methods.token_auth_method``) is pinned by its table; the
providers are driven through the SDK's real flow against an in-process
authorization server (``httpx2.MockTransport``) whose metadata offers a given
set of methods, and the token request shows which method was used. End to end,
against the real fixture server: ``tests/auth/test_oauth_client_auth_e2e.py``.
"""

from __future__ import annotations

import base64
import inspect
import json
from pathlib import Path
from typing import Final
from urllib.parse import parse_qs

import httpx2
import pytest
import trio
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import AuthorizationCodeResult, OAuthToken

from supervisor.auth.oauth import build_run_auth, client_metadata, fixed_client, machine_provider
from supervisor.auth.token_store import FileTokenStorage, MemoryTokenStorage, token_file
from supervisor.compat.oauth import SupervisorOAuthProvider
from supervisor.compat.oauth_methods import (
    ClientOrigin,
    NoUsableMethodOffered,
    SecretMethod,
    needs_metadata,
    token_auth_method,
)
from supervisor.config.loader import load_settings
from supervisor.config.servers import OAuthSettings, ServerSettings
from supervisor.errors import ConfigError

URL: Final = "https://remote.example/mcp"
AS_URL: Final = "https://as.remote.example/"
SECRET: Final = "CANARYSECRET-app"
BOUND_SEC: Final = 5.0
BASIC: Final = "client_secret_basic"
POST: Final = "client_secret_post"


NONE: Final = "none"


@pytest.mark.parametrize(
    ("origin", "registered", "has_secret", "setting", "offered", "method"),
    [
        # A registered client: the registration response's word first.
        ("registered", POST, True, "auto", [BASIC], POST),
        ("registered", NONE, True, "auto", [BASIC, POST], NONE),  # a public client handed a secret anyway
        ("registered", BASIC, True, POST, None, BASIC),  # the setting is the configured client's, not this one's
        ("registered", None, False, "auto", [BASIC], NONE),
        ("registered", None, True, "auto", None, NONE),  # nothing said: what it asked for
        ("registered", None, True, "auto", [NONE], NONE),  # the regression of issue 46
        ("registered", None, True, "auto", [BASIC, NONE], NONE),
        ("registered", None, True, "auto", [POST, BASIC], BASIC),
        ("registered", None, True, "auto", [POST], POST),
        # A configured client: the setting, then the metadata, then RFC 8414's default.
        ("configured", None, False, "auto", [BASIC, POST], NONE),
        ("configured", None, False, POST, [BASIC], NONE),
        ("configured", None, True, POST, [BASIC], POST),
        ("configured", None, True, BASIC, [POST], BASIC),
        ("configured", None, True, "auto", None, BASIC),
        ("configured", None, True, "auto", [], BASIC),
        ("configured", None, True, "auto", [POST, BASIC], BASIC),
        ("configured", None, True, "auto", [BASIC], BASIC),
        ("configured", None, True, "auto", [POST, NONE], POST),
        ("configured", None, True, "auto", ["private_key_jwt", NONE], NONE),
        ("configured", POST, True, "auto", [BASIC], BASIC),  # a configured record's own method is not the word
    ],
)
def test_the_token_endpoint_method_follows_its_table(
    *,
    origin: ClientOrigin,
    registered: str | None,
    has_secret: bool,
    setting: SecretMethod,
    offered: list[str] | None,
    method: str,
) -> None:
    assert (
        token_auth_method(origin, registered=registered, setting=setting, has_secret=has_secret, offered=offered)
        == method
    )


@pytest.mark.parametrize("origin", ["registered", "configured"])
def test_a_server_that_offers_only_methods_the_client_lacks_is_refused_by_name_with_the_setting_to_change(
    origin: ClientOrigin,
) -> None:
    with pytest.raises(NoUsableMethodOffered, match=r"offers private_key_jwt\); set oauth.token_endpoint_auth"):
        token_auth_method(origin, registered=None, setting="auto", has_secret=True, offered=["private_key_jwt"])


@pytest.mark.parametrize(
    ("origin", "registered", "has_secret", "setting", "waits"),
    [
        ("registered", POST, True, "auto", False),
        ("registered", None, True, "auto", True),
        ("registered", None, False, "auto", False),
        ("configured", None, True, "auto", True),
        ("configured", None, True, POST, False),
        ("configured", None, False, "auto", False),
    ],
)
def test_a_token_request_waits_for_the_metadata_exactly_when_the_table_would_read_it(
    origin: ClientOrigin, registered: str | None, has_secret: bool, setting: SecretMethod, waits: bool
) -> None:
    assert needs_metadata(origin, registered=registered, setting=setting, has_secret=has_secret) is waits


def test_a_forced_method_without_a_secret_is_refused_naming_the_keys(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(
        f'[mcp_servers.r]\nurl = "{URL}"\n[mcp_servers.r.oauth]\ntoken_endpoint_auth_method = "client_secret_post"\n'
    )
    with pytest.raises(
        ConfigError, match=r"token_endpoint_auth_method = \"client_secret_post\".*client_secret_env_var"
    ):
        load_settings(path, environ={})


def test_dynamic_registration_asks_for_a_public_client_and_a_pre_registered_record_leaves_the_method_to_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert client_metadata(OAuthSettings(), None).token_endpoint_auth_method == "none"
    monkeypatch.setenv("APP_SECRET", SECRET)
    forced = OAuthSettings(client_id="app", client_secret_env_var="APP_SECRET", token_endpoint_auth_method=POST)
    assert client_metadata(forced, None).token_endpoint_auth_method == "none"
    auto = OAuthSettings(client_id="app", client_secret_env_var="APP_SECRET")
    record = fixed_client(ServerSettings(name="r", url=URL, oauth=auto), None)
    assert record is not None and record.token_endpoint_auth_method is None  # the table decides, at each request


# -- through the SDK's flow ---------------------------------------------------------------------


class AuthorizationServer:
    """A protected resource and its authorization server, in process: which way did the secret come?"""

    def __init__(self, offered: list[str] | None, registers: dict[str, str] | None = None) -> None:
        self.offered = offered
        self.registers = registers
        """What ``/register`` answers besides the client id (dynamic registration; None: no endpoint)."""
        self.paths: list[str] = []
        self.methods: list[str] = []
        self.access = "CANARYACCESS-fresh"

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        self.paths.append(path)
        if path == "/.well-known/oauth-protected-resource/mcp":
            return httpx2.Response(200, json={"resource": URL, "authorization_servers": [AS_URL]})
        if path == "/.well-known/oauth-authorization-server":
            metadata = {
                "issuer": AS_URL,
                "authorization_endpoint": f"{AS_URL}authorize",
                "token_endpoint": f"{AS_URL}token",
                "response_types_supported": ["code"],
            }
            if self.offered is not None:
                metadata["token_endpoint_auth_methods_supported"] = self.offered
            if self.registers is not None:
                metadata["registration_endpoint"] = f"{AS_URL}register"
            return httpx2.Response(200, json=metadata)
        if path == "/register" and self.registers is not None:
            return httpx2.Response(201, json={**json.loads(request.content), "client_id": "app", **self.registers})
        if path == "/token":
            return self._token(request)
        if request.headers.get("authorization") == f"Bearer {self.access}":
            return httpx2.Response(200, json={"ok": True})
        challenge = 'Bearer resource_metadata="https://remote.example/.well-known/oauth-protected-resource/mcp"'
        return httpx2.Response(401, headers={"WWW-Authenticate": challenge})

    def _token(self, request: httpx2.Request) -> httpx2.Response:
        form = parse_qs(request.content.decode())
        authorization = request.headers.get("authorization", "")
        if authorization.startswith("Basic "):
            user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            self.methods.append(BASIC if (user, password) == ("app", SECRET) else "wrong basic")
        elif form.get("client_secret") == [SECRET]:
            self.methods.append(POST)
        else:
            self.methods.append("none")
        return httpx2.Response(200, json={"access_token": self.access, "token_type": "Bearer", "expires_in": 3600})


def _person_server(tmp_path: Path, method: SecretMethod = "auto") -> ServerSettings:
    oauth = OAuthSettings(
        client_id="app",
        client_secret_env_var="APP_SECRET",
        token_store=str(tmp_path),
        token_endpoint_auth_method=method,
    )
    return ServerSettings(name="r", url=URL, oauth=oauth)


async def _expired_tokens(server: ServerSettings) -> None:
    assert server.oauth is not None
    storage = FileTokenStorage(token_file(server.oauth, "r"), "r", URL)
    await storage.set_tokens(
        OAuthToken(access_token="CANARYACCESS-old", refresh_token="CANARYREFRESH", expires_in=-10, scope="mcp")
    )


async def _get_through(auth: httpx2.Auth, server: AuthorizationServer) -> httpx2.Response:
    with trio.fail_after(BOUND_SEC):
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(server), auth=auth) as client:
            return await client.get(URL)


class _Browser:
    """The person: takes the authorization URL, hands back a code with its state (no redirect listener)."""

    def __init__(self) -> None:
        self.state: str | None = None

    async def open(self, url: str) -> None:
        self.state = parse_qs(url.partition("?")[2])["state"][0]
        await trio.lowlevel.checkpoint()

    async def redirected(self) -> AuthorizationCodeResult:
        await trio.lowlevel.checkpoint()
        return AuthorizationCodeResult(code="CANARYCODE", state=self.state)


@pytest.mark.parametrize(
    ("offered", "registers", "method"),
    [
        ([NONE], {"client_secret": SECRET}, NONE),  # issue 46: a secret the public client did not ask for
        ([BASIC, POST, NONE], {"client_secret": SECRET}, NONE),
        ([BASIC], {"client_secret": SECRET, "token_endpoint_auth_method": BASIC}, BASIC),
        ([POST], {"client_secret": SECRET, "token_endpoint_auth_method": POST}, POST),
        ([BASIC, NONE], {"client_secret": SECRET, "token_endpoint_auth_method": NONE}, NONE),
        ([NONE], {}, NONE),
    ],
)
async def test_a_dynamically_registered_client_logs_in_the_way_its_registration_says(
    offered: list[str], registers: dict[str, str], method: str
) -> None:
    browser = _Browser()
    provider = SupervisorOAuthProvider(
        URL,
        client_metadata(OAuthSettings(), "http://127.0.0.1:9/callback"),
        MemoryTokenStorage(),
        headless=False,
        redirect_handler=browser.open,
        callback_handler=browser.redirected,
    )
    authorization_server = AuthorizationServer(offered, registers)
    response = await _get_through(provider, authorization_server)
    assert response.status_code == 200
    assert "/register" in authorization_server.paths
    assert authorization_server.methods == [method]


@pytest.mark.parametrize(
    ("offered", "method"),
    [([POST, BASIC], BASIC), ([BASIC], BASIC), ([POST], POST), (None, BASIC)],
)
async def test_a_pre_registered_client_refreshes_with_the_method_the_metadata_offers_and_never_before_it_is_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offered: list[str] | None, method: str
) -> None:
    monkeypatch.setenv("APP_SECRET", SECRET)
    server = _person_server(tmp_path)
    await _expired_tokens(server)
    authorization_server = AuthorizationServer(offered)
    response = await _get_through(build_run_auth(server).auth, authorization_server)
    assert response.status_code == 200
    assert authorization_server.methods == [method]
    paths = authorization_server.paths
    # The expired token is not refreshed at a guessed endpoint: the 401 first makes the SDK discover the metadata.
    assert paths.index("/.well-known/oauth-authorization-server") < paths.index("/token")


async def test_a_forced_method_is_used_whatever_the_metadata_offers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_SECRET", SECRET)
    server = _person_server(tmp_path, POST)
    await _expired_tokens(server)
    authorization_server = AuthorizationServer([BASIC])
    assert (await _get_through(build_run_auth(server).auth, authorization_server)).status_code == 200
    assert authorization_server.methods == [POST]


@pytest.mark.parametrize(("offered", "setting", "method"), [([POST], "auto", POST), ([BASIC], "auto", BASIC),
                                                            ([BASIC, POST], POST, POST)])  # fmt: skip
async def test_client_credentials_send_their_secret_the_way_the_metadata_offers_or_the_setting_forces(
    monkeypatch: pytest.MonkeyPatch, offered: list[str], setting: SecretMethod, method: str
) -> None:
    monkeypatch.setenv("APP_SECRET", SECRET)
    oauth = OAuthSettings(
        grant="client_credentials",
        client_id="app",
        client_secret_env_var="APP_SECRET",
        issuer=AS_URL,
        token_endpoint_auth_method=setting,
    )
    authorization_server = AuthorizationServer(offered)
    response = await _get_through(
        machine_provider(ServerSettings(name="r", url=URL, oauth=oauth)), authorization_server
    )
    assert response.status_code == 200
    assert authorization_server.methods == [method]


async def test_client_credentials_at_a_server_that_takes_no_secret_park_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APP_SECRET", SECRET)
    oauth = OAuthSettings(
        grant="client_credentials", client_id="app", client_secret_env_var="APP_SECRET", issuer=AS_URL
    )
    run_auth = build_run_auth(ServerSettings(name="r", url=URL, oauth=oauth))
    authorization_server = AuthorizationServer(["private_key_jwt"])
    with pytest.raises(NoUsableMethodOffered):
        await _get_through(run_auth.auth, authorization_server)
    assert "/token" not in authorization_server.paths
    error = run_auth.needs_login()
    assert error is not None and "oauth.token_endpoint_auth_method" in str(error) and "CANARY" not in str(error)


def test_the_sdk_names_issue_30_relies_on_still_exist() -> None:
    # The context's two public hooks, and that the SDK's flow and token requests go through them.
    for hook in ("prepare_token_auth", "can_refresh_token"):
        assert callable(getattr(OAuthContext, hook)), hook
    assert "token_endpoint_auth_method" in inspect.getsource(OAuthContext.prepare_token_auth)
    flow = inspect.getsource(OAuthClientProvider._auth_flow)
    assert "self.context.can_refresh_token()" in flow and "token_endpoint_auth_methods_supported" not in flow
    assert "prepare_token_auth" in inspect.getsource(ClientCredentialsOAuthProvider._exchange_token_client_credentials)
    # The client-credentials provider's record is set in `_initialize`, which our subclass amends.
    assert "self.context.client_info = self._fixed_client_info" in inspect.getsource(
        ClientCredentialsOAuthProvider._initialize
    )
