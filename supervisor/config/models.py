"""Typed configuration: the models of ``settings.toml`` above the server tables (DESIGN §3.2, §3.2b).

Pure data, nothing here awaits or holds shared state: the models are frozen
and validated once, in the CLI (or on reload), outside any await. The work is
split by concern:

* this module: ``Settings`` and the ``[supervisor]`` tables (front, admin,
  catalog store), and what they check about a table;
* :mod:`supervisor.config.servers`: ``[defaults]`` and ``[mcp_servers.<name>]``;
* :mod:`supervisor.config.values`: checks on single values (URL, NUL, env names),
  shared with the importer;
* :mod:`supervisor.config.loader`: reads the file, layers environment
  overrides (:mod:`supervisor.config.env`), expands ``${VAR}``, merges
  ``[defaults]`` and turns every validation failure into one
  :class:`~supervisor.errors.ConfigError`;
* :mod:`supervisor.config.check`: the ``check`` command's rendering.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Final, Literal, Self

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from supervisor.config import code
from supervisor.config.code import CodeLimits
from supervisor.config.names import NamesSettings
from supervisor.config.redis_url import mask_redis_url, redis_url_problem
from supervisor.config.servers import STRICT, DefaultsSection, ServerSettings
from supervisor.config.telemetry import TelemetrySettings
from supervisor.config.values import clip
from supervisor.config.views import VIEW_NAME, FrontToken, SearchSettings, ViewSettings

ENV_PREFIX = "MCP_SUPERVISOR_"
CONFIG_ENV_VAR = "MCP_SUPERVISOR_CONFIG"
MAX_SHUTDOWN_GRACE_SEC: Final = 300.0
"""A stop must stay bounded: a host waits for us to exit."""


LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})
"""Bind addresses that only this machine can reach: no token needed for the admin endpoint there."""


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` exposes a socket to this machine only."""
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class FrontSettings(BaseModel):
    """How the host reaches the supervisor."""

    model_config = STRICT

    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(default=8931, ge=0, le=65535)
    token: SecretStr | None = None
    max_request_body_bytes: int = Field(default=1_048_576, ge=1024, le=1_073_741_824)
    allow_unauthenticated_loopback: bool = False
    """With ``true``, an HTTP front bound to a loopback address may run without a token."""
    tokens: list[FrontToken] = []
    """Tokens bound to views (``[[supervisor.front.tokens]]``); ``token`` opens every view."""

    @property
    def has_token(self) -> bool:
        """Whether hosts must present a token (the all-views one, or any view-bound one)."""
        return bool(self.tokens) or (self.token is not None and bool(self.token.get_secret_value()))

    @model_validator(mode="after")
    def _http_needs_a_token(self) -> Self:
        if self.transport != "http" or self.has_token:
            return self
        if not self.allow_unauthenticated_loopback:
            raise ValueError(
                'supervisor.front.token is required with transport = "http" (hosts must present it as a bearer '
                'token); set token = "${MCP_SUPERVISOR_TOKEN}" in [supervisor.front] and export MCP_SUPERVISOR_TOKEN'
                " (or, for a loopback host only, allow_unauthenticated_loopback = true)"
            )
        if not is_loopback(self.host):
            raise ValueError(
                f"supervisor.front.allow_unauthenticated_loopback only applies to a loopback host, but "
                f"supervisor.front.host = {clip(repr(self.host))} is reachable from other machines; set "
                'token = "${MCP_SUPERVISOR_TOKEN}" in [supervisor.front], or bind host = "127.0.0.1"'
            )
        return self


class AdminSettings(BaseModel):
    """The ``[supervisor.admin]`` table: health, readiness, status and metrics over HTTP."""

    model_config = STRICT

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(default=8932, ge=0, le=65535)
    token: SecretStr | None = None
    """Unset: the front's token applies (see ``SupervisorSection.admin_token``)."""


class CatalogStoreSettings(BaseModel):
    """The ``[supervisor.catalog_store]`` table: where catalogs are cached (DESIGN I14).

    ``file`` (the default) keeps each server's catalog in memory and on disk
    under the state directory, so a fresh sidecar starts from it (issue 57);
    ``memory`` keeps the per-process store only; ``redis`` shares catalogs across
    every sidecar that points at the same Redis. The URL may hold a password: it
    is never shown unmasked (``masked_url``).
    """

    model_config = STRICT

    backend: Literal["file", "memory", "redis"] = "file"
    url: SecretStr = SecretStr("redis://127.0.0.1:6379/0")
    """``redis://``, ``rediss://`` or ``unix://``; ``${VAR}`` is expanded by the loader."""
    key_prefix: str = Field(default="mcp-supervisor", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    operation_timeout_ms: int = Field(default=50, ge=1, le=10_000)
    """Past this a store call counts as a miss (and opens the circuit breaker)."""

    @field_validator("url")
    @classmethod
    def _redis_url(cls, url: SecretStr) -> SecretStr:
        problem = redis_url_problem(url.get_secret_value())
        if problem is not None:
            raise ValueError(f"the Redis URL {problem}")
        return url

    @property
    def masked_url(self) -> str:
        """The URL with its password replaced by ``***`` (for check, status, logs and errors)."""
        return mask_redis_url(self.url.get_secret_value())


LogLevel = Literal["debug", "info", "warning", "error"]
QUIET_STDIO_LOG_LEVEL: Final[LogLevel] = "warning"
"""The stdio front's level when ``log_level`` is unset: Claude Code logs every stderr line of a server as an error."""


class SupervisorSection(BaseModel):
    """The ``[supervisor]`` table."""

    model_config = STRICT

    principal: str = "local"
    log_level: LogLevel | None = None
    """Unset: ``warning`` for ``run`` on the stdio front (a host reads its server's stderr as errors), ``info``
    otherwise (``log_level_for``); ``run --log-level`` overrides either."""
    log_format: Literal["text", "json"] = "text"
    shutdown_grace_sec: float = Field(default=5.0, gt=0, le=MAX_SHUTDOWN_GRACE_SEC)
    spawn_concurrency: int = Field(default=0, ge=0, le=10_000)
    """How many servers may be starting (connect + first sync) at once; 0 = no limit."""
    token_store: str | None = None
    """Where OAuth tokens live; unset: ``$XDG_STATE_HOME/mcp-supervisor``, else ``~/.local/state/mcp-supervisor``."""
    front: FrontSettings = FrontSettings()
    admin: AdminSettings = AdminSettings()
    catalog_store: CatalogStoreSettings = CatalogStoreSettings()
    search: SearchSettings = SearchSettings()
    """The search views' semantic index (``catalog.semantic_engine``)."""
    names: NamesSettings = NamesSettings()
    """The public names' form and length (``config.names``)."""
    code: CodeLimits = CodeLimits()
    """The limits of a program a code view runs (``config.code``)."""
    telemetry: TelemetrySettings = TelemetrySettings()
    """OpenTelemetry (``supervisor.telemetry``); the ``OTEL_*`` environment variables configure the exporters."""

    def log_level_for(self, command: str) -> LogLevel:
        """The level the CLI logs at for ``command``: the setting, else quiet on the stdio front's ``run``."""
        if self.log_level is not None:
            return self.log_level
        return QUIET_STDIO_LOG_LEVEL if command == "run" and self.front.transport == "stdio" else "info"

    @model_validator(mode="after")
    def _exposed_admin_needs_a_token(self) -> Self:
        if self.admin.enabled and self.admin_token is None and not is_loopback(self.admin.host):
            raise ValueError(
                f"supervisor.admin.token is required: supervisor.admin.host = {clip(repr(self.admin.host))} is "
                "reachable from other machines, so the admin endpoint needs a token; set supervisor.admin.token "
                '(or supervisor.front.token) = "${MCP_SUPERVISOR_TOKEN}", '
                'or bind host = "127.0.0.1"'
            )
        return self

    @property
    def admin_token(self) -> SecretStr | None:
        """The admin endpoint's bearer token: its own, else the front's, else None (loopback only)."""
        for token in (self.admin.token, self.front.token):
            if token is not None and token.get_secret_value():
                return token
        return None


class Settings(BaseModel):
    """The whole validated configuration; build it with :func:`load_settings`.

    A plain model, not a pydantic-settings ``BaseSettings``: the loader layers
    file and environment itself (it needs the file name, key paths and an
    injectable environ for its errors), so a bare ``Settings()`` is exactly the
    documented defaults, and ``check`` need not import pydantic-settings.
    """

    model_config = STRICT

    supervisor: SupervisorSection = SupervisorSection()
    defaults: DefaultsSection = DefaultsSection()
    mcp_servers: dict[str, ServerSettings] = {}
    views: dict[str, ViewSettings] = {}
    """Named subsets of the catalog (``config.views``), served at ``/mcp/<name>`` or by ``run --view NAME``."""
    source_path: Path | None = Field(default=None, exclude=True)

    def code_limits(self, view: str) -> code.CodeLimits:
        """A program's limits in ``view``: its ``[views.<name>.code]`` over ``[supervisor.code]``."""
        own = self.views.get(view)
        return own.code.over(self.supervisor.code) if own is not None else self.supervisor.code

    @model_validator(mode="after")
    def _views_name_what_exists(self) -> Self:
        """A view names servers or tags that exist; a token names views that exist."""
        tags = {tag for server in self.mcp_servers.values() for tag in server.tags}
        for name, view in self.views.items():
            if not VIEW_NAME.fullmatch(name):
                raise ValueError(
                    f"views.{clip(name)}: a view name becomes the path /mcp/<name>; "
                    "use 1 to 32 characters from A-Z, a-z, 0-9, '_' and '-'"
                )
            for selector in view.servers:
                if selector not in self.mcp_servers and selector not in tags:
                    raise ValueError(
                        f"views.{name}.servers names {clip(repr(selector))}, which is neither a server "
                        f"([mcp_servers.<name>]) nor a tag any server carries (tags = [...])"
                    )
            if view.always_visible and view.catalog == "all":
                raise ValueError(
                    f'views.{name}.always_visible applies to catalog = "search" or "code" only (a view with '
                    'catalog = "all" lists every tool it has); remove it or set catalog = "search"'
                )
            if view.catalog != "code" and view.code.model_dump(exclude_none=True):
                raise ValueError(f'views.{name}.code applies to catalog = "code" only; remove it')
            if view.catalog == "code" and (problem := code.code_engine_problem()) is not None:
                raise ValueError(f'views.{name}: catalog = "code" runs programs, and {problem}')
        self._override_names_fit()
        for index, token in enumerate(self.supervisor.front.tokens):
            for opened in token.views:
                if opened not in self.views:
                    raise ValueError(
                        f"supervisor.front.tokens[{index}].views names {clip(repr(opened))}, which is not a view; "
                        f"define [views.{clip(opened)}] or remove it"
                    )
        return self

    def _override_names_fit(self) -> None:
        """A transform's ``name`` makes a public name within ``[supervisor.names]``'s length (never cut)."""
        names = self.supervisor.names
        for server in self.mcp_servers.values():
            for raw, transform in server.tools.items():
                if transform.name is None:
                    continue
                public = f"{names.prefix}{server.name}__{transform.name}" if server.namespace else transform.name
                if len(public) > names.limit:
                    raise ValueError(
                        f"mcp_servers.{server.name}.tools.{raw}.name makes the public name {public!r}, "
                        f"{len(public)} characters; with [supervisor.names] public names have at most {names.limit}: "
                        "shorten it (or set supervisor.names.host_prefix to what your host really puts first)"
                    )

    @model_validator(mode="before")
    @classmethod
    def _oauth_inherits_store_and_principal(cls, data: Any) -> Any:
        """Each ``oauth`` table gets ``[supervisor]``'s principal and token store (its own store wins)."""
        if not isinstance(data, dict) or not isinstance(data.get("mcp_servers"), dict):
            return data
        supervisor = data.get("supervisor")
        supervisor = supervisor if isinstance(supervisor, dict) else {}
        inherited = {"principal": supervisor.get("principal", "local")}
        if supervisor.get("token_store") is not None:
            inherited["token_store"] = supervisor["token_store"]
        servers = dict(data["mcp_servers"])
        for name, table in servers.items():
            if isinstance(table, dict) and isinstance(table.get("oauth"), dict):
                servers[name] = {**table, "oauth": {**inherited, **table["oauth"], "principal": inherited["principal"]}}
        return {**data, "mcp_servers": servers}


__all__ = [
    "CONFIG_ENV_VAR",
    "ENV_PREFIX",
    "LOOPBACK_HOSTS",
    "MAX_SHUTDOWN_GRACE_SEC",
    "AdminSettings",
    "FrontSettings",
    "Settings",
    "SupervisorSection",
    "is_loopback",
]
