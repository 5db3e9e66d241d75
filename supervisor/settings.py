"""Typed configuration: ``settings.toml`` plus ``MCP_SUPERVISOR_*`` overrides (DESIGN §3.2).

Loading is synchronous and runs once, in the CLI, before ``trio.run``; nothing
here awaits or holds shared state. The loader builds one raw mapping in layers:

1. the TOML file (read with :mod:`tomllib` so syntax errors carry line/column);
2. environment overrides through a pydantic-settings ``EnvSettingsSource``
   (prefix ``MCP_SUPERVISOR_``, nesting ``__``), which win over the file;
3. ``${VAR}`` interpolation of the value keys that allow it;
4. ``[defaults]`` deep-merged under every ``[mcp_servers.<name>]`` table.

Only then is the mapping validated, in strict mode, against the models below.
Every failure leaves as one :class:`~supervisor.errors.ConfigError` naming the
file, the dotted key path and the fix; pydantic's errors never escape.
"""

from __future__ import annotations

import fnmatch
import hashlib
import ipaddress
import json
import os
import shlex
import sys
import tomllib
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal, Self
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from supervisor._interpolate import InterpolationError, expand
from supervisor.errors import ConfigError
from supervisor.naming import server_name_problem

ENV_PREFIX = "MCP_SUPERVISOR_"
CONFIG_ENV_VAR = "MCP_SUPERVISOR_CONFIG"
MASK = "***"
_MAX_TTL_MS = 86_400_000
_STDIO_ONLY = ("args", "env", "cwd")
_HTTP_ONLY = ("bearer_token_env_var", "http_headers")
# Keys whose string values get ${VAR} expansion: (key, how its value nests).
_SERVER_INTERPOLATED = {"command": "str", "args": "list", "env": "dict", "url": "str", "http_headers": "dict"}
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)
DEFAULT_LIST_CHANGED_DEBOUNCE_MS = 50
"""Quiet window after a server's last ``list_changed`` before its re-sync starts."""
DEFAULT_LIST_CHANGED_MAX_WAIT_MS = 500
"""A continuous storm of notices still gets a re-sync this soon after its first notice."""


class ReconnectSettings(BaseModel):
    """Backoff and catalog-reuse policy for one server's reconnect loop."""

    model_config = _STRICT

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

    model_config = _STRICT

    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(default=8931, ge=0, le=65535)
    token: SecretStr | None = None
    max_request_body_bytes: int = Field(default=1_048_576, ge=1024, le=1_073_741_824)

    @model_validator(mode="after")
    def _http_needs_a_token(self) -> Self:
        if self.transport == "http" and (self.token is None or not self.token.get_secret_value()):
            raise ValueError(
                'supervisor.front.token is required with transport = "http" (hosts must present it as a bearer '
                'token); set token = "${MCP_SUPERVISOR_TOKEN}" in [supervisor.front] and export MCP_SUPERVISOR_TOKEN'
            )
        return self


class AdminSettings(BaseModel):
    """The ``[supervisor.admin]`` table: health, readiness, status and metrics over HTTP."""

    model_config = _STRICT

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(default=8932, ge=0, le=65535)
    token: SecretStr | None = None
    """Unset: the front's token applies (see ``SupervisorSection.admin_token``)."""


class SupervisorSection(BaseModel):
    """The ``[supervisor]`` table."""

    model_config = _STRICT

    principal: str = "local"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"
    shutdown_grace_sec: float = Field(default=5.0, gt=0)
    spawn_concurrency: int = Field(default=0, ge=0, le=10_000)
    """How many servers may be starting (connect + first sync) at once; 0 = no limit."""
    front: FrontSettings = FrontSettings()
    admin: AdminSettings = AdminSettings()

    @model_validator(mode="after")
    def _exposed_admin_needs_a_token(self) -> Self:
        if self.admin.enabled and self.admin_token is None and not is_loopback(self.admin.host):
            raise ValueError(
                f"supervisor.admin.token is required: supervisor.admin.host = {self.admin.host!r} is reachable "
                "from other machines, so the admin endpoint needs a token; set supervisor.admin.token "
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


class DefaultsSection(BaseModel):
    """The ``[defaults]`` table, inherited by every server table."""

    model_config = _STRICT

    startup_timeout_sec: float = Field(default=30.0, gt=0)
    tool_timeout_sec: float = Field(default=60.0, gt=0)
    list_changed_debounce_ms: int = Field(default=DEFAULT_LIST_CHANGED_DEBOUNCE_MS, ge=0, le=60_000)
    list_changed_max_wait_ms: int = Field(default=DEFAULT_LIST_CHANGED_MAX_WAIT_MS, ge=0, le=600_000)
    reconnect: ReconnectSettings = ReconnectSettings()


class ServerSettings(BaseModel):
    """One ``[mcp_servers.<name>]`` table with ``[defaults]`` already merged in."""

    model_config = _STRICT

    name: str
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = None
    bearer_token_env_var: str | None = None
    http_headers: dict[str, str] = {}
    enabled: bool = True
    enabled_tools: list[str] | None = None
    disabled_tools: list[str] = []
    startup_timeout_sec: float = Field(default=30.0, gt=0)
    tool_timeout_sec: float = Field(default=60.0, gt=0)
    list_changed_debounce_ms: int = Field(default=DEFAULT_LIST_CHANGED_DEBOUNCE_MS, ge=0, le=60_000)
    list_changed_max_wait_ms: int = Field(default=DEFAULT_LIST_CHANGED_MAX_WAIT_MS, ge=0, le=600_000)
    reconnect: ReconnectSettings = ReconnectSettings()

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        where = f"server {self.name!r}"
        if self.list_changed_debounce_ms > self.list_changed_max_wait_ms:
            raise ValueError(
                f"{where}: list_changed_debounce_ms ({self.list_changed_debounce_ms}) exceeds "
                f"list_changed_max_wait_ms ({self.list_changed_max_wait_ms}); lower the first or raise the second"
            )
        if self.command is None and self.url is None:
            raise ValueError(f"{where} has neither 'command' (stdio) nor 'url' (http); set exactly one")
        if self.command is not None and self.url is not None:
            raise ValueError(f"{where} sets both 'command' and 'url'; keep 'command' for stdio or 'url' for http")
        wrong = _HTTP_ONLY if self.command is not None else _STDIO_ONLY
        for key in (k for k in wrong if k in self.model_fields_set):
            kind = "http (url)" if key in _HTTP_ONLY else "stdio (command)"
            raise ValueError(f"{where}: '{key}' only applies to {kind} servers; remove it")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``"stdio"`` when the server is spawned, ``"http"`` when it is reached by URL."""
        return "stdio" if self.command is not None else "http"

    @property
    def target(self) -> str:
        """A stable, secret-free identity of the configured transport target.

        stdio: sha256 hex of canonical JSON ``[command, args, cwd, sorted env]``.
        http: the URL without userinfo, ``#headers=`` and a hash of the headers
        and bearer variable name. Equal targets mean "same upstream"; any
        change to command, args, cwd, env, url or headers changes it.
        """
        if self.command is not None:
            return _digest([self.command, self.args, self.cwd, sorted(self.env.items())])
        assert self.url is not None  # the model validator guarantees one of the two
        headers = _digest([sorted(self.http_headers.items()), self.bearer_token_env_var])[:16]
        return f"{_strip_userinfo(self.url)}#headers={headers}"

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
        masked: dict[str, object] = {"env": _mask_values(self.env), "http_headers": _mask_values(self.http_headers)}
        if self.url is not None:
            masked["url"] = _mask_userinfo(self.url)
        for key, value in super().__repr_args__():
            yield key, masked.get(key or "", value)


class Settings(BaseSettings):
    """The whole validated configuration; build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", strict=True, frozen=True
    )

    supervisor: SupervisorSection = SupervisorSection()
    defaults: DefaultsSection = DefaultsSection()
    mcp_servers: dict[str, ServerSettings] = {}
    source_path: Path | None = Field(default=None, exclude=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load_settings layers file and environment itself (it needs the file
        # name, key paths and an injectable environ for its errors), so a bare
        # Settings() is exactly the documented defaults.
        return (init_settings,)


class _EnvSource(EnvSettingsSource):
    """pydantic-settings' env source reading an injected mapping instead of os.environ."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(Settings)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {(k if self.case_sensitive else k.lower()): v for k, v in self._environ.items()}


def interpolation_environ() -> dict[str, str]:
    """The process environment plus ``SUPERVISOR_PYTHON``: this interpreter, unless set.

    The bundled settings start the demo servers with ``${SUPERVISOR_PYTHON}``, so
    they run in the sidecar's own environment, wherever it is installed.
    """
    environ = dict(os.environ)
    environ.setdefault("SUPERVISOR_PYTHON", sys.executable)
    return environ


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$MCP_SUPERVISOR_CONFIG`` if set, else ``./settings.toml``."""
    env = os.environ if environ is None else environ
    return Path(env.get(CONFIG_ENV_VAR) or "settings.toml")


def load_settings(path: Path | None = None, *, environ: Mapping[str, str] | None = None) -> Settings:
    """Read, override, interpolate, merge and validate the settings file.

    Args:
        path: The TOML file; defaults to :func:`default_config_path`.
        environ: Environment for overrides and ``${VAR}``; defaults to os.environ.

    Raises:
        ConfigError: For any problem; the message names the file, key and fix.
    """
    env = os.environ if environ is None else environ
    path = default_config_path(env) if path is None else path
    try:
        raw = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the settings file ({exc.strerror or exc}); create it, or pass --config PATH "
            f"or set {CONFIG_ENV_VAR}"
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: the settings file is not UTF-8 text ({exc.reason}); save it as UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}; fix the syntax there") from exc
    try:
        overrides = _EnvSource(env)()
    except (SettingsError, ValueError) as exc:
        names = ", ".join(sorted(k for k in env if k.upper().startswith(ENV_PREFIX))) or "none set"
        raise ConfigError(
            f"{path}: bad {ENV_PREFIX}* environment override ({names}): {exc}; fix or unset that variable"
        ) from exc
    data = _deep_merge(raw, _unwrap_secrets(overrides))
    _prepare(data, env, path)
    try:
        # Checked alone first, so a bad inherited value is reported once, at
        # defaults.*, instead of once per server that inherits it.
        DefaultsSection.model_validate(data.get("defaults", {}))
    except ValidationError as exc:
        raise ConfigError(_explain(exc, path, ("defaults",))) from exc
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, path)) from exc
    return settings.model_copy(update={"source_path": path})


def _prepare(data: dict[str, Any], environ: Mapping[str, str], path: Path) -> None:
    """Check names, expand ``${VAR}`` and merge ``[defaults]`` in place, before validation."""
    if "source_path" in data:
        raise ConfigError(f"{path}: {_unknown_key_message((), 'source_path')}")
    supervisor = data.get("supervisor")
    for table_name in ("front", "admin"):
        table = supervisor.get(table_name) if isinstance(supervisor, dict) else None
        if isinstance(table, dict) and isinstance(table.get("token"), str):
            table["token"] = _expand(table["token"], environ, path, f"supervisor.{table_name}.token")
    defaults = data.get("defaults", {})
    inherited = (
        {k: v for k, v in defaults.items() if k in DefaultsSection.model_fields} if isinstance(defaults, dict) else {}
    )
    servers = data.get("mcp_servers", {})
    if not isinstance(servers, dict):
        return  # validation reports the wrong type with its key path
    for name, table in servers.items():
        problem = server_name_problem(name)
        if problem is not None:
            raise ConfigError(
                f"{path}: [mcp_servers.{name}]: invalid server name {name!r}: {problem}; rename the table"
            )
        if not isinstance(table, dict):
            continue
        if "name" in table:
            raise ConfigError(
                f"{path}: {_unknown_key_message(('mcp_servers', name), 'name')} (the table key is the name)"
            )
        for key, shape in _SERVER_INTERPOLATED.items():
            value, where = table.get(key), f"mcp_servers.{name}.{key}"
            if shape == "str" and isinstance(value, str):
                table[key] = _expand(value, environ, path, where)
            elif shape == "list" and isinstance(value, list):
                table[key] = [
                    _expand(v, environ, path, f"{where}[{i}]") if isinstance(v, str) else v for i, v in enumerate(value)
                ]
            elif shape == "dict" and isinstance(value, dict):
                table[key] = {
                    k: _expand(v, environ, path, f"{where}.{k}") if isinstance(v, str) else v for k, v in value.items()
                }
        servers[name] = {"name": name, **_deep_merge(inherited, table)}


def _expand(value: str, environ: Mapping[str, str], path: Path, where: str) -> str:
    try:
        return expand(value, environ)
    except InterpolationError as exc:
        raise ConfigError(f"{path}: {where}: {exc}") from exc


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` wins key by key; tables merge recursively; env keys match file keys case-insensitively."""
    merged = dict(base)
    for key, value in over.items():
        target = next((k for k in merged if k.lower() == key.lower()), key)
        current = merged.get(target)
        merged[target] = _deep_merge(current, value) if isinstance(current, dict) and isinstance(value, dict) else value
    return merged


def _unwrap_secrets(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {k: _unwrap_secrets(v) for k, v in value.items()}
    return value


def _explain(exc: ValidationError, path: Path, prefix: tuple[str, ...] = ()) -> str:
    """One message, one line per pydantic error, each naming the key path and the fix."""
    lines: list[str] = []
    for error in exc.errors(include_url=False):
        loc = prefix + tuple(error["loc"])
        if error["type"] == "extra_forbidden":
            lines.append(_unknown_key_message(loc[:-1], str(loc[-1])))
            continue
        where = _dotted(loc) or "(top level)"
        ctx = error.get("ctx") or {}
        message = str(ctx["error"]) if error["type"] == "value_error" and "error" in ctx else error["msg"]
        shown = "" if _is_secret(loc) or isinstance(error["input"], dict) else f" (got {error['input']!r})"
        lines.append(f"{where}: {message}{shown}")
    if len(lines) == 1:
        return f"{path}: {lines[0]}"
    return f"{path}: {len(lines)} problems:\n" + "\n".join(f"  {line}" for line in lines)


def _unknown_key_message(section: tuple[Any, ...], key: str) -> str:
    model = _model_at(section)
    hidden = {"name"} if model is ServerSettings else {"source_path"} if model is Settings else set()
    allowed = ", ".join(k for k in (model.model_fields if model else {}) if k not in hidden)
    name = f"[{_dotted(section)}]" if section else "the top level"
    return f"unknown key {key!r} in {name}; remove it or use one of: {allowed}"


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """Walk the model annotations along a validation location."""
    current: Any = Settings
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            current = field.annotation if field else None
        elif typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
        else:
            return None
        if isinstance(current, types.UnionType):
            current = next(a for a in typing.get_args(current) if a is not type(None))
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _dotted(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _is_secret(loc: tuple[Any, ...]) -> bool:
    return any(part in ("env", "http_headers", "token", "url") for part in loc)


def _digest(value: object) -> str:
    canonical = json.dumps(value, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _strip_userinfo(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _mask_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=f"{MASK}@{parts.netloc.rpartition('@')[2]}"))


def _mask_values(values: Mapping[str, str]) -> dict[str, str]:
    return dict.fromkeys(values, MASK)


def describe_settings(settings: Settings) -> str:
    """Human-readable resolved settings for ``check``; every secret shows as ``***``."""
    sup = settings.supervisor
    front = sup.front
    lines = [
        f"source: {settings.source_path if settings.source_path is not None else '(defaults, no file)'}",
        "[supervisor]",
        f"  principal = {sup.principal}",
        f"  log_level = {sup.log_level}",
        f"  log_format = {sup.log_format}",
        f"  shutdown_grace_sec = {sup.shutdown_grace_sec:g}",
        f"  spawn_concurrency = {sup.spawn_concurrency or '(no limit)'}",
        f"  front = {front.transport} (host {front.host}, port {front.port}, "
        f"token {'(unset)' if front.token is None else MASK}, max_request_body_bytes {front.max_request_body_bytes})",
        f"  admin = {'enabled' if sup.admin.enabled else 'disabled'} (host {sup.admin.host}, port {sup.admin.port}, "
        f"token {_describe_admin_token(sup)})",
    ]
    if not settings.mcp_servers:
        lines.append("(no servers configured)")
    for name, server in settings.mcp_servers.items():
        lines += [f"[mcp_servers.{name}]", f"  enabled = {str(server.enabled).lower()}"]
        lines.append(f"  transport = {server.transport}")
        if server.command is not None:
            lines.append(f"  command = {shlex.join([server.command, *server.args])}")
            lines.append(f"  cwd = {server.cwd if server.cwd is not None else '(inherited)'}")
            lines.append(f"  env = {_masked_pairs(server.env)}")
        else:
            assert server.url is not None  # the model validator guarantees one of the two
            lines.append(f"  url = {_mask_userinfo(server.url)}")
            bearer = server.bearer_token_env_var
            lines.append(f"  bearer_token_env_var = {bearer if bearer is not None else '(none)'}")
            lines.append(f"  http_headers = {_masked_pairs(server.http_headers)}")
        r = server.reconnect
        lines += [
            f"  startup_timeout_sec = {server.startup_timeout_sec:g}",
            f"  tool_timeout_sec = {server.tool_timeout_sec:g}",
            f"  list_changed_debounce_ms = {server.list_changed_debounce_ms}",
            f"  list_changed_max_wait_ms = {server.list_changed_max_wait_ms}",
            f"  reconnect = max_attempts {r.max_attempts}, initial_delay_ms {r.initial_delay_ms}, "
            f"max_delay_ms {r.max_delay_ms}, jitter {r.jitter:g}, catalog_reuse_ttl_ms {r.catalog_reuse_ttl_ms}",
            "  enabled_tools = "
            + ("(all)" if server.enabled_tools is None else ", ".join(server.enabled_tools) or "(none)"),
            f"  disabled_tools = {', '.join(server.disabled_tools) or '(none)'}",
        ]
    return "\n".join(lines)


def _masked_pairs(values: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={MASK}" for k in sorted(values)) or "(none)"


def _describe_admin_token(sup: SupervisorSection) -> str:
    if sup.admin.token is not None:
        return MASK
    return f"{MASK} (the front's)" if sup.admin_token is not None else "(unset)"
