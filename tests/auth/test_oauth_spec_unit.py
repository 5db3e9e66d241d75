"""The rest of the MCP authorization spec, the parts that need no process (issue 13).

Settings (CIMD URL, ``private_key_jwt``, ``issuer`` for machine grants), the
key file's mode rule, the step-up caps (per provider for a machine grant, per
recorded step-up across logins for a person), and the private SDK names the
compat module relies on. End to end: ``tests/auth/test_oauth_spec_e2e.py``.
"""

from __future__ import annotations

import inspect
from functools import partial
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
import trio
import trio.testing
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp.client.auth import OAuthClientProvider, utils
from mcp.client.auth.extensions import client_credentials
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider, PrivateKeyJWTOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from supervisor.auth.oauth import build_run_auth, client_metadata, machine_provider, record_step_up
from supervisor.auth.token_store import FileTokenStorage, file_signature, forget, token_file
from supervisor.commands.login import LoginFailed, _count_step_up_login
from supervisor.compat.oauth import (
    ISSUER_ERRORS,
    MAX_AUTHORIZATIONS_PER_STEP_UP,
    AuthorizationServerMoved,
    CappedClientCredentialsProvider,
    CappedPrivateKeyJWTProvider,
    IssuerMismatch,
    StepUpNeeded,
    StepUpRefused,
    SupervisorOAuthProvider,
)
from supervisor.config.check import describe_settings
from supervisor.config.loader import load_settings
from supervisor.config.servers import OAuthSettings, ServerSettings
from supervisor.errors import ConfigError, UpstreamUnavailable

URL: Final = "https://remote.example/mcp"
ISSUER: Final = "https://auth.remote.example"


def _load(tmp_path: Path, oauth: str) -> Any:
    path = tmp_path / "settings.toml"
    path.write_text(f'[mcp_servers.r]\nurl = "{URL}"\n[mcp_servers.r.oauth]\n{oauth}\n', encoding="utf-8")
    return load_settings(path, environ={})


def _key_file(tmp_path: Path, mode: int) -> tuple[Path, str]:
    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    path = tmp_path / "key.pem"
    path.write_text(pem)
    path.chmod(mode)
    return path, pem.splitlines()[1]


# -- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://client.example/doc.json", "https://client.example/", "https://client.example"])
def test_a_client_metadata_url_must_be_https_with_a_path(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError, match=r"client_metadata_url must be an https:// URL with a path"):
        _load(tmp_path, f'client_metadata_url = "{url}"')


def test_client_credentials_without_an_issuer_are_refused_since_the_sdk_requires_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"server 'r'.*client_credentials\" needs oauth.issuer"):
        _load(tmp_path, 'grant = "client_credentials"\nclient_id = "c"\nclient_secret_env_var = "S"')


@pytest.mark.parametrize(
    ("oauth", "message"),
    [
        ('grant = "client_credentials"\nclient_id = "c"\nclient_secret_env_var = "S"', "keep one"),
        ('client_id = "c"', 'applies to grant = "client_credentials" only'),
    ],
)
def test_a_private_key_file_with_a_client_secret_or_an_interactive_grant_is_refused(
    tmp_path: Path, oauth: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, f'{oauth}\nprivate_key_file = "k.pem"\nissuer = "{ISSUER}"')


def test_check_shows_the_key_path_and_algorithm_but_never_the_key(tmp_path: Path) -> None:
    key, pem_line = _key_file(tmp_path, 0o600)
    settings = _load(
        tmp_path,
        f'grant = "client_credentials"\nclient_id = "c"\nprivate_key_file = "{key}"\nsigning_algorithm = "ES256"\n'
        f'issuer = "{ISSUER}"',
    )
    text = describe_settings(settings)
    assert f"private_key_file {key} (ES256)" in text and pem_line not in text


def test_the_catalog_identity_changes_with_the_cimd_url() -> None:
    dcr = ServerSettings(name="r", url=URL, oauth=OAuthSettings())
    cimd = ServerSettings(name="r", url=URL, oauth=OAuthSettings(client_metadata_url="https://c.example/doc.json"))
    assert dcr.target != cimd.target


# -- private_key_jwt and issuer= ------------------------------------------------------------------


def _machine(tmp_path: Path, key: Path) -> ServerSettings:
    oauth = OAuthSettings(
        grant="client_credentials", client_id="c", private_key_file=str(key), signing_algorithm="ES256", issuer=ISSUER
    )
    return ServerSettings(name="r", url=URL, oauth=oauth)


def test_a_private_key_file_readable_by_others_is_refused_with_the_fix_and_no_key_bytes(tmp_path: Path) -> None:
    key, pem_line = _key_file(tmp_path, 0o640)
    with pytest.raises(UpstreamUnavailable) as refused:
        machine_provider(_machine(tmp_path, key))
    message = str(refused.value)
    assert "mode 0640, wider than 0600" in message and f"chmod 600 {key}" in message
    assert pem_line not in message and refused.value.__cause__ is None


def test_machine_providers_pass_the_issuer_so_the_sdk_raises_no_deprecation_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, _ = _key_file(tmp_path, 0o600)
    signed = machine_provider(_machine(tmp_path, key))  # filterwarnings=error: a warning would fail here
    assert isinstance(signed, PrivateKeyJWTOAuthProvider) and signed._issuer == ISSUER
    monkeypatch.setenv("R_SECRET", "CANARYSECRET")
    oauth = OAuthSettings(grant="client_credentials", client_id="c", client_secret_env_var="R_SECRET", issuer=ISSUER)
    secret = machine_provider(ServerSettings(name="r", url=URL, oauth=oauth))
    assert isinstance(secret, ClientCredentialsOAuthProvider) and secret._issuer == ISSUER


# -- step-up caps ---------------------------------------------------------------------------------


def test_a_machine_step_up_costs_at_most_three_authorizations_per_scope(tmp_path: Path) -> None:
    key, _ = _key_file(tmp_path, 0o600)
    provider = machine_provider(_machine(tmp_path, key))
    assert isinstance(provider, CappedPrivateKeyJWTProvider)
    provider.step_up_scope = "mcp:admin"
    provider.context.client_metadata.scope = "mcp mcp:admin"
    for _ in range(MAX_AUTHORIZATIONS_PER_STEP_UP):
        provider._count_step_up()
    with pytest.raises(StepUpRefused, match=r"requires scope 'mcp mcp:admin'.*did not grant in 3 authorizations"):
        provider._count_step_up()
    assert provider.login_required is not None
    provider.context.client_metadata.scope = "mcp mcp:write"  # another step-up: its own count
    provider._count_step_up()
    assert issubclass(CappedClientCredentialsProvider, ClientCredentialsOAuthProvider)


def _storage(tmp_path: Path) -> FileTokenStorage:
    return FileTokenStorage(token_file(OAuthSettings(token_store=str(tmp_path)), "r"), "r", URL)


def test_a_recorded_step_up_counts_logins_and_the_fourth_login_is_refused_until_logout(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    for attempt in range(MAX_AUTHORIZATIONS_PER_STEP_UP):
        reason = record_step_up(storage, "r", "mcp mcp:admin", "mcp:admin")
        assert reason == "the server requires scope 'mcp:admin' for this request (insufficient_scope)", attempt
        assert _count_step_up_login(storage, "r") == "mcp mcp:admin"
    reason = record_step_up(storage, "r", "mcp:admin", "mcp:admin")  # no more than recorded: the same step-up
    assert "3 logins did not get it" in reason and "mcp-supervisor logout r" in reason
    with pytest.raises(LoginFailed, match=r"3 logins asked for scope 'mcp mcp:admin'.*logout r"):
        _count_step_up_login(storage, "r")
    record_step_up(storage, "r", "mcp mcp:write", "mcp:write")  # asks for more: a new step-up, the union
    assert storage.step_up() == ("mcp mcp:admin mcp:write", 0)
    forget(storage.path)
    assert storage.step_up() is None


def test_a_step_up_record_is_kept_beside_the_token_file_so_it_never_wakes_a_parked_server(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    storage.clear_tokens(keep_client=False)  # a token file exists
    before = file_signature(storage.path)
    record_step_up(storage, "r", "mcp:admin", "mcp:admin")
    assert file_signature(storage.path) == before  # what wait_for_new_tokens watches did not change
    assert oct(storage.path.with_name("r.step-up.json").stat().st_mode & 0o777) == "0o600"


# -- the SDK's private names the compat module relies on ------------------------------------------


def test_the_private_sdk_names_issue_13_relies_on_still_exist() -> None:
    for hook in ("_auth_flow", "_expected_issuer", "_perform_authorization", "_initialize"):
        assert callable(getattr(OAuthClientProvider, hook)), hook
    for cls in (ClientCredentialsOAuthProvider, PrivateKeyJWTOAuthProvider):
        assert "_perform_authorization" in vars(cls) and "_issuer" in inspect.getsource(cls)
    assert inspect.isasyncgenfunction(OAuthClientProvider._auth_flow)
    sdk_text = inspect.getsource(utils) + inspect.getsource(client_credentials)
    for message in ISSUER_ERRORS:
        assert message in sdk_text, message
    assert "insufficient_scope" in inspect.getsource(OAuthClientProvider._auth_flow)


# -- an issuer mismatch in `run` parks, by name ----------------------------------------------------

AS_URL: Final = "https://as.remote.example/"


def _authorization_server(request: httpx2.Request) -> httpx2.Response:
    """A protected resource whose metadata names ``AS_URL``, and that server's metadata (no token endpoint use)."""
    path = request.url.path
    if path == "/.well-known/oauth-protected-resource/mcp":
        return httpx2.Response(200, json={"resource": URL, "authorization_servers": [AS_URL]})
    if path == "/.well-known/oauth-authorization-server":
        return httpx2.Response(
            200,
            json={
                "issuer": AS_URL,
                "authorization_endpoint": f"{AS_URL}authorize",
                "token_endpoint": f"{AS_URL}token",
                "response_types_supported": ["code"],
            },
        )
    if path == "/token":
        return httpx2.Response(200, json={"access_token": "CANARYACCESS", "token_type": "Bearer"})
    challenge = 'Bearer resource_metadata="https://remote.example/.well-known/oauth-protected-resource/mcp"'
    return httpx2.Response(401, headers={"WWW-Authenticate": challenge})


async def test_a_machine_grant_led_to_another_issuer_stops_with_a_named_reason_and_parks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("R_SECRET", "CANARYSECRET")
    oauth = OAuthSettings(
        grant="client_credentials", client_id="c", client_secret_env_var="R_SECRET", issuer="https://other.example"
    )
    server = ServerSettings(name="r", url=URL, oauth=oauth)
    run_auth = build_run_auth(server)
    requests: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        requests.append(request.url.path)
        return _authorization_server(request)

    with trio.fail_after(5):
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler), auth=run_auth.auth) as client:
            with pytest.raises(IssuerMismatch, match=r"identity did not check out \(Authorization server metadata"):
                await client.get(URL)
    assert "/token" not in requests  # the credentials never went to the other server
    error = run_auth.needs_login()
    assert error is not None and error.token_file is None  # parks until the settings change: no retry loop
    assert str(error).startswith("server 'r': the authorization server's identity did not check out")
    assert "CANARY" not in str(error)


async def test_a_concurrent_request_cannot_make_a_step_up_in_progress_look_like_a_plain_401(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    await storage.set_tokens(OAuthToken(access_token="CANARYACCESS", refresh_token="CANARYREFRESH", scope="mcp"))
    await storage.set_client_info(
        OAuthClientInformationFull(client_id="c", redirect_uris=["http://127.0.0.1/callback"], issuer=AS_URL)  # type: ignore[list-item]
    )
    provider = SupervisorOAuthProvider(
        URL,
        client_metadata(OAuthSettings(), None),
        storage,
        headless=True,
        on_step_up=partial(record_step_up, storage, "r"),
    )
    discovering, release = trio.Event(), trio.Event()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/.well-known/oauth-protected-resource/mcp":
            discovering.set()
            await release.wait()
        if request.url.path == "/mcp" and request.headers.get("x-request") == "b":
            return httpx2.Response(200)
        if request.url.path == "/mcp":
            challenge = 'Bearer error="insufficient_scope", scope="mcp mcp:admin"'
            return httpx2.Response(403, headers={"WWW-Authenticate": challenge})
        return _authorization_server(request)

    async def step_up() -> None:
        with pytest.raises(StepUpNeeded, match=r"requires scope 'mcp:admin'"):
            await client.get(URL, headers={"x-request": "a"})

    async def plain() -> None:
        assert (await client.get(URL, headers={"x-request": "b"})).status_code == 200

    with trio.fail_after(5):
        async with (
            httpx2.AsyncClient(transport=httpx2.MockTransport(handler), auth=provider) as client,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(step_up)
            await discovering.wait()  # the step-up holds the flow's lock, mid-discovery
            nursery.start_soon(plain)
            await trio.testing.wait_all_tasks_blocked()  # the plain request's flow waits for that lock
            release.set()
    assert storage.step_up() == ("mcp mcp:admin", 0)


@pytest.mark.parametrize("client_id", ["c", "https://me.example/mcp-supervisor.json"])
async def test_a_headless_provider_whose_authorization_server_moved_stops_before_registering_anywhere(
    tmp_path: Path, client_id: str
) -> None:
    storage = _storage(tmp_path)
    await storage.set_tokens(OAuthToken(access_token="CANARYACCESS", refresh_token="CANARYREFRESH", scope="mcp"))
    old = "https://old-as.remote.example/"
    await storage.set_client_info(
        OAuthClientInformationFull(client_id=client_id, redirect_uris=["http://127.0.0.1/callback"], issuer=old)  # type: ignore[list-item]
    )
    provider = SupervisorOAuthProvider(
        URL,
        client_metadata(OAuthSettings(), None),
        storage,
        headless=True,
        client_metadata_url="https://me.example/mcp-supervisor.json",
    )
    requests: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        requests.append(request.url.path)
        return _authorization_server(request)  # 401, and the metadata names AS_URL

    with trio.fail_after(5):
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler), auth=provider) as client:
            with pytest.raises(AuthorizationServerMoved):
                await client.get(URL)
    assert provider.login_required == f"its authorization server moved from {old} to {AS_URL}"
    assert not {"/register", "/token", "/.well-known/oauth-authorization-server"} & set(requests)
