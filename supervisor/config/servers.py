"""The models of one server's table: ``[defaults]`` and ``[mcp_servers.<name>]`` (DESIGN §3.2, §3.2b).

A server table inherits ``[defaults]`` (``_Inheritable`` holds the keys both
share) and has its ``reconnect`` and ``oauth`` sub-tables; ``ServerSettings``
checks what only a whole table can tell (stdio or HTTP keys, the transport's
target, its identity for catalog reuse). Frozen, validated once by
:mod:`supervisor.config.loader`; nothing here awaits.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Final, Literal, Self
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, Field, field_validator, model_validator

from supervisor.config.base import STRICT
from supervisor.config.transforms import ToolTransformSettings
from supervisor.config.values import (
    MASK,
    env_name_problem,
    exec_problem,
    header_problem,
    url_problem,
    url_query_values,
)
from supervisor.errors import ConfigError

_MAX_TTL_MS = 86_400_000
DEFAULT_MAX_TOOLS: Final = 2000
_STDIO_ONLY = ("args", "env", "cwd")
_HTTP_ONLY = ("bearer_token_env_var", "http_headers", "oauth", "http_transport")
_KEY_NAMES: Final = {"http_transport": "transport"}
"""Fields whose settings key differs from their Python name."""
DEFAULT_LIST_CHANGED_DEBOUNCE_MS = 50
"""Quiet window after a server's last ``list_changed`` before its re-sync starts."""
DEFAULT_LIST_CHANGED_MAX_WAIT_MS = 500
"""A continuous storm of notices still gets a re-sync this soon after its first notice."""


def _executable(value: str) -> str:
    problem = exec_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _env_name(value: str) -> str:
    problem = env_name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


_ExecStr = Annotated[str, AfterValidator(_executable)]
"""A string that reaches a child process (command, argument, cwd, environment value)."""
_EnvName = Annotated[str, AfterValidator(_env_name)]


class ReconnectSettings(BaseModel):
    """Backoff and catalog-reuse policy for one server's reconnect loop."""

    model_config = STRICT

    max_attempts: int = Field(default=10, ge=1)
    initial_delay_ms: int = Field(default=500, ge=0)
    max_delay_ms: int = Field(default=30000, ge=0)
    jitter: float = Field(default=0.2, ge=0, le=1)
    catalog_reuse_ttl_ms: int = Field(default=300000, ge=0, le=_MAX_TTL_MS)

    @model_validator(mode="after")
    def _delay_within_ceiling(self) -> Self:
        if self.initial_delay_ms > self.max_delay_ms:
            raise ValueError(
                f"initial_delay_ms ({self.initial_delay_ms}) is above max_delay_ms ({self.max_delay_ms}); "
                "lower initial_delay_ms or raise max_delay_ms"
            )
        return self


SigningAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
"""JWS algorithms for ``private_key_jwt`` assertions (PyJWT with ``cryptography``)."""


def _is_metadata_document_url(url: str) -> bool:
    """The SDK's rule for a CIMD client id: https with a non-root path."""
    parts = urlsplit(url)
    return parts.scheme == "https" and parts.path not in ("", "/")


class OAuthSettings(BaseModel):
    """The ``[mcp_servers.<name>.oauth]`` table: OAuth 2.1 for an HTTP server (issue 12).

    ``token_store`` and ``principal`` are inherited from ``[supervisor]`` (a
    ``token_store`` here overrides it for this server); the loader fills them
    in. Tokens and secrets are never settings: tokens live in the token store,
    the client secret in the variable ``client_secret_env_var`` names.
    """

    model_config = STRICT

    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    scopes: list[str] = []
    client_id: str | None = None
    """A pre-registered client; unset: dynamic client registration (authorization_code only)."""
    client_secret_env_var: _EnvName | None = None
    redirect_port: int = Field(default=0, ge=0, le=65535)
    """The loopback port of ``login``'s redirect listener; 0 = any free port."""
    issuer: str | None = None
    """The authorization server's issuer URL (client_credentials: its tokens are only requested there)."""
    token_store: str | None = None
    principal: str = "local"
    # Issue 13: the rest of the MCP authorization spec.
    client_metadata_url: str | None = None
    """A Client ID Metadata Document (https, with a path): the client id where the server supports CIMD."""
    private_key_file: str | None = None
    """client_credentials with ``private_key_jwt``: the PEM key that signs the assertion (mode 0600)."""
    signing_algorithm: SigningAlgorithm = "RS256"
    # Issue 30: how a client secret reaches the token endpoint.
    token_endpoint_auth_method: Literal["auto", "client_secret_basic", "client_secret_post"] = "auto"
    """``auto``: from the authorization server's metadata (basic when it offers basic, post if only post)."""

    @model_validator(mode="after")
    def _forced_method_needs_a_secret(self) -> Self:
        if self.token_endpoint_auth_method != "auto" and self.client_secret_env_var is None:
            raise ValueError(
                f'oauth.token_endpoint_auth_method = "{self.token_endpoint_auth_method}" says how a client secret '
                "is sent, but there is none: set oauth.client_id and oauth.client_secret_env_var, or remove the key"
            )
        return self

    @field_validator("client_metadata_url")
    @classmethod
    def _metadata_document_url(cls, url: str | None) -> str | None:
        if url is not None and (url_problem(url) is not None or not _is_metadata_document_url(url)):
            raise ValueError(
                "oauth.client_metadata_url must be an https:// URL with a path to the client's metadata document, "
                'e.g. "https://example.com/mcp-supervisor.json" (it becomes the client id)'
            )
        return url

    @field_validator("issuer")
    @classmethod
    def _issuer_url(cls, url: str | None) -> str | None:
        problem = None if url is None else url_problem(url)
        if problem is not None:
            raise ValueError(problem)
        return url

    @property
    def interactive(self) -> bool:
        """Whether a person must log in (``authorization_code``) rather than the machine (``client_credentials``)."""
        return self.grant == "authorization_code"

    def client_secret(self, server: str) -> str | None:
        """Read the client secret from the environment now (never stored in settings).

        Raises:
            ConfigError: ``client_secret_env_var`` is configured but unset.
        """
        if self.client_secret_env_var is None:
            return None
        value = os.environ.get(self.client_secret_env_var)
        if value is None:
            raise ConfigError(
                f"server {server!r}: oauth.client_secret_env_var names {self.client_secret_env_var}, which is not "
                f"set; export {self.client_secret_env_var} before starting the supervisor"
            )
        return value


class _Inheritable(BaseModel):
    """The per-server keys that ``[defaults]`` may set for every server."""

    model_config = STRICT

    startup_timeout_sec: float = Field(default=30.0, gt=0)
    tool_timeout_sec: float = Field(default=60.0, gt=0)
    list_changed_debounce_ms: int = Field(default=DEFAULT_LIST_CHANGED_DEBOUNCE_MS, ge=0, le=60_000)
    list_changed_max_wait_ms: int = Field(default=DEFAULT_LIST_CHANGED_MAX_WAIT_MS, ge=0, le=600_000)
    namespace: bool = True
    """``false``: the server's tools and prompts keep their raw names (still sanitized)."""
    max_tools: int = Field(default=DEFAULT_MAX_TOOLS, ge=1, le=100_000)
    """A listing with more tools than this is a failed sync (DESIGN I15)."""
    reconnect: ReconnectSettings = ReconnectSettings()
    pin: Literal["off", "warn", "block"] = "warn"
    """Pinned definitions (issue 27): what a tool or prompt whose definition changed since it was pinned gets."""
    pin_new_tools: Literal["allow", "block"] = "allow"
    """What a tool or prompt new to an already-pinned server gets: served and pinned, or withheld until approved."""

    @model_validator(mode="after")
    def _debounce_within_max_wait(self) -> Self:
        if self.list_changed_debounce_ms > self.list_changed_max_wait_ms:
            raise ValueError(
                f"list_changed_debounce_ms ({self.list_changed_debounce_ms}) exceeds list_changed_max_wait_ms "
                f"({self.list_changed_max_wait_ms}); lower the first or raise the second"
            )
        return self


class DefaultsSection(_Inheritable):
    """The ``[defaults]`` table, inherited by every server table."""


class ServerSettings(_Inheritable):
    """One ``[mcp_servers.<name>]`` table with ``[defaults]`` already merged in."""

    name: str
    command: _ExecStr | None = None
    args: list[_ExecStr] = []
    env: dict[_EnvName, _ExecStr] = {}
    cwd: _ExecStr | None = None
    url: str | None = None
    bearer_token_env_var: str | None = None
    http_headers: dict[str, str] = {}
    enabled: bool = True
    enabled_tools: list[str] | None = None
    disabled_tools: list[str] = []
    protocol: Literal["auto", "legacy", "2026-07-28"] = "auto"
    """Pins the protocol era (the SDK's ``Client(mode=...)``); ``auto`` negotiates."""
    http_transport: Literal["streamable_http", "sse"] = Field(default="streamable_http", alias="transport")
    """The ``transport`` key: ``"sse"`` for a legacy HTTP+SSE server (``url`` is its SSE endpoint)."""
    oauth: OAuthSettings | None = None
    tags: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")]] = []
    """Labels a view's ``servers`` may name instead of server names (issue 26)."""
    tools: dict[str, ToolTransformSettings] = {}
    """Transforms, by raw tool name: public name, texts, hints, ``_meta`` and arguments (``config.transforms``)."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        problem = None if url is None else url_problem(url)
        if problem is not None:
            raise ValueError(problem)
        return url

    @field_validator("http_headers")
    @classmethod
    def _sendable_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            problem = header_problem(name, value)
            if problem is not None:
                raise ValueError(problem)
        return headers

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        where = f"server {self.name!r}"
        if self.command is None and self.url is None:
            raise ValueError(f"{where} has neither 'command' (stdio) nor 'url' (http); set exactly one")
        if self.command is not None and self.url is not None:
            raise ValueError(f"{where} sets both 'command' and 'url'; keep 'command' for stdio or 'url' for http")
        wrong = _HTTP_ONLY if self.command is not None else _STDIO_ONLY
        for key in (k for k in wrong if k in self.model_fields_set):
            kind = "http (url)" if key in _HTTP_ONLY else "stdio (command)"
            raise ValueError(f"{where}: '{_KEY_NAMES.get(key, key)}' only applies to {kind} servers; remove it")
        self._check_oauth(where)
        self._check_tool_names(where)
        return self

    def _check_tool_names(self, where: str) -> None:
        """No two override names the same (their length is checked with ``[supervisor.names]``, in ``Settings``)."""
        taken: dict[str, str] = {}
        for raw, transform in self.tools.items():
            if transform.name is None:
                continue
            public = transform.name
            if public in taken:
                raise ValueError(
                    f"{where}: tools.{raw}.name and tools.{taken[public]}.name are both {transform.name!r}"
                )
            taken[public] = raw

    def _check_oauth(self, where: str) -> None:
        oauth = self.oauth
        if oauth is None:
            return
        if self.bearer_token_env_var is not None:
            raise ValueError(
                f"{where}: 'bearer_token_env_var' and an [mcp_servers.{self.name}.oauth] table both set the "
                "Authorization header; keep one"
            )
        if oauth.grant == "client_credentials" and (
            oauth.client_id is None or (oauth.client_secret_env_var is None and oauth.private_key_file is None)
        ):
            raise ValueError(
                f'{where}: oauth.grant = "client_credentials" needs oauth.client_id and oauth.client_secret_env_var '
                "(the variable that holds the client secret) or oauth.private_key_file (private_key_jwt); "
                'set them, or use grant = "authorization_code"'
            )
        self._check_oauth_issue_13(where, oauth)
        if oauth.client_secret_env_var is not None and oauth.client_id is None:
            raise ValueError(
                f"{where}: oauth.client_secret_env_var needs oauth.client_id (a secret belongs to a pre-registered "
                "client); set client_id, or remove client_secret_env_var to register dynamically"
            )

    def _check_oauth_issue_13(self, where: str, oauth: OAuthSettings) -> None:
        """CIMD, private_key_jwt and the issuer a machine client's credentials belong to (issue 13)."""
        if oauth.private_key_file is not None and oauth.client_secret_env_var is not None:
            raise ValueError(
                f"{where}: oauth.private_key_file and oauth.client_secret_env_var are two ways to authenticate "
                "the client; keep one"
            )
        if oauth.private_key_file is not None and oauth.interactive:
            raise ValueError(
                f'{where}: oauth.private_key_file (private_key_jwt) applies to grant = "client_credentials" only'
            )
        if oauth.client_metadata_url is not None and not oauth.interactive:
            raise ValueError(
                f'{where}: oauth.client_metadata_url (a CIMD client id) applies to grant = "authorization_code" '
                "only; a client_credentials client is pre-registered (client_id)"
            )
        if not oauth.interactive and oauth.issuer is None:
            raise ValueError(
                f'{where}: oauth.grant = "client_credentials" needs oauth.issuer, the authorization server that '
                "issued the client's credentials (they are only ever sent there); "
                'set it, e.g. issuer = "https://auth.example.com"'
            )

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``"stdio"`` when the server is spawned, ``"http"`` when it is reached by URL."""
        return "stdio" if self.command is not None else "http"

    @property
    def target(self) -> str:
        """A stable, secret-free identity of the configured transport target.

        stdio: sha256 hex of canonical JSON ``[command, args, cwd, sorted env]``.
        http: the URL without its query (it never holds userinfo: validation
        refuses it), then ``#headers=`` and a hash of the query, the headers and
        the bearer variable name, so a key in the query (``?key=${API_KEY}``)
        never becomes part of a cache key or a fleet store's key names. Equal
        targets mean "same upstream"; any change to command, args, cwd, env,
        url or headers changes it.
        """
        if self.command is not None:
            return _digest([self.command, self.args, self.cwd, sorted(self.env.items())])
        assert self.url is not None  # the model validator guarantees one of the two
        base, _, query = self.url.partition("?")
        headers = _digest([sorted(self.http_headers.items()), self.bearer_token_env_var, query])[:16]
        target = f"{base}#headers={headers}"
        if self.http_transport != "streamable_http":
            target += f"#transport={self.http_transport}"
        if self.oauth is not None:
            # Who the client is and what it asks for may change what it sees; the
            # token never enters the target: a refresh is not a new identity (I6).
            oauth = self.oauth
            client: list[Any] = [oauth.grant, oauth.client_id, sorted(oauth.scopes)]
            if oauth.client_metadata_url is not None:
                client.append(oauth.client_metadata_url)  # a CIMD client id is who the client is
            target += f"#oauth={_digest(client)[:16]}"
        return target

    def secret_values(self) -> list[str]:
        """Configured values that must never be shown: header values and URL query values."""
        return [*self.http_headers.values(), *(url_query_values(self.url) if self.url is not None else ())]

    def tool_allowed(self, raw_name: str) -> bool:
        """Whether ``raw_name`` passes the allow-list (if any) and no deny glob."""
        if self.enabled_tools is not None and not any(fnmatch.fnmatchcase(raw_name, g) for g in self.enabled_tools):
            return False
        return not any(fnmatch.fnmatchcase(raw_name, g) for g in self.disabled_tools)

    def bearer_token(self) -> str | None:
        """Read the bearer token from the environment now (never stored in settings).

        Raises:
            ConfigError: ``bearer_token_env_var`` is configured but unset.
        """
        if self.bearer_token_env_var is None:
            return None
        value = os.environ.get(self.bearer_token_env_var)
        if value is None:
            raise ConfigError(
                f"server {self.name!r}: bearer_token_env_var names {self.bearer_token_env_var}, which is not set; "
                f"export {self.bearer_token_env_var} before starting the supervisor"
            )
        return value

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        masked: dict[str, object] = {"env": mask_values(self.env), "http_headers": mask_values(self.http_headers)}
        for key, value in super().__repr_args__():
            yield key, masked.get(key or "", value)


def mask_values(values: Mapping[str, str]) -> dict[str, str]:
    """The same keys, every value replaced by ``***``."""
    return dict.fromkeys(values, MASK)


def _digest(value: object) -> str:
    canonical = json.dumps(value, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


__all__ = [
    "DEFAULT_LIST_CHANGED_DEBOUNCE_MS",
    "DEFAULT_LIST_CHANGED_MAX_WAIT_MS",
    "DEFAULT_MAX_TOOLS",
    "STRICT",
    "DefaultsSection",
    "OAuthSettings",
    "ReconnectSettings",
    "ServerSettings",
    "mask_values",
]
