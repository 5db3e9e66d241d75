"""Reading ``settings.toml`` into :class:`~supervisor.config.models.Settings`, and explaining failures.

Loading is synchronous and runs once, in the CLI (or on reload), outside any
await: nothing here holds shared state. The loader builds one raw mapping in
layers:

1. the TOML file (read with :mod:`tomllib` so syntax errors carry line/column;
   a leading UTF-8 BOM is dropped);
2. environment overrides through a pydantic-settings ``EnvSettingsSource``
   (prefix ``MCP_SUPERVISOR_``, nesting ``__``), which win over the file
   (:mod:`supervisor.config.env`, imported only when such a variable is
   set: pydantic-settings takes longer to import than ``check`` takes to run);
3. ``${VAR}`` interpolation of the value keys that allow it;
4. ``[defaults]`` deep-merged under every ``[mcp_servers.<name>]`` table.

Only then is the mapping validated, in strict mode, against the models.
Every failure leaves as one :class:`~supervisor.errors.ConfigError` naming the
file, the dotted key path and the fix; pydantic's errors never escape, and no
echoed input is longer than :data:`~supervisor.config.values.CLIP_CHARS`.
"""

from __future__ import annotations

import os
import reprlib
import sys
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, SecretStr, ValidationError

from supervisor.config.interpolate import InterpolationError, expand
from supervisor.config.models import CONFIG_ENV_VAR, ENV_PREFIX, Settings
from supervisor.config.servers import DefaultsSection, ServerSettings
from supervisor.config.values import CLIP_CHARS, clip, server_name_problem
from supervisor.errors import ConfigError

# Keys whose string values get ${VAR} expansion: (key, how its value nests).
_SERVER_INTERPOLATED: Final = {"command": "str", "args": "list", "env": "dict", "url": "str", "http_headers": "dict"}
_SECRET_KEYS: Final = frozenset({"env", "http_headers", "token", "url"})


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
        return _load(path, env)
    except RecursionError as exc:
        # tomllib, the merge and the explainer all recurse per level of nesting.
        raise ConfigError(
            f"{path}: the settings are nested too deeply (tables or arrays inside each other, "
            "hundreds of levels down); no setting needs more than a few levels, so flatten them"
        ) from exc


def _load(path: Path, env: Mapping[str, str]) -> Settings:
    try:
        # utf-8-sig: a leading BOM (some Windows editors write one) carries no meaning.
        raw = tomllib.loads(path.read_bytes().decode("utf-8-sig"))
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the settings file ({exc.strerror or exc}); create it, or pass --config PATH "
            f"or set {CONFIG_ENV_VAR}"
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: the settings file is not UTF-8 text ({exc.reason}); save it as UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}; fix the syntax there") from exc
    except ValueError as exc:
        # tomllib lets int() refuse an integer of more than sys.get_int_max_str_digits() digits.
        raise ConfigError(f"{path}: invalid TOML: {clip(str(exc))}; no setting needs such a number") from exc
    data = _deep_merge(raw, _unwrap_secrets(_overrides(env, path)))
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


def _overrides(env: Mapping[str, str], path: Path) -> dict[str, Any]:
    """The ``MCP_SUPERVISOR_<SECTION>__<KEY>`` variables as a nested mapping, unvalidated."""
    names = sorted(k for k in env if _is_override(k))
    if not names:
        return {}
    from supervisor.config.env import read_overrides  # noqa: PLC0415 - see the module docstring

    try:
        return read_overrides(env)
    except ValueError as exc:  # pydantic-settings' SettingsError is a ValueError
        raise ConfigError(
            f"{path}: bad {ENV_PREFIX}* environment override ({', '.join(clip(k) for k in names)}): {exc}; "
            "fix or unset that variable"
        ) from exc


def _is_override(variable: str) -> bool:
    """``MCP_SUPERVISOR_SUPERVISOR__LOG_LEVEL`` is; ``MCP_SUPERVISOR_CONFIG`` and ``..._TOKEN`` are not."""
    if not variable.upper().startswith(ENV_PREFIX):
        return False
    section = variable[len(ENV_PREFIX) :].split("__", 1)[0].lower()
    return section in Settings.model_fields and section != "source_path"


def _prepare(data: dict[str, Any], environ: Mapping[str, str], path: Path) -> None:
    """Check names, expand ``${VAR}`` and merge ``[defaults]`` in place, before validation."""
    if "source_path" in data:
        raise ConfigError(f"{path}: {_unknown_key_message((), 'source_path')}")
    supervisor = data.get("supervisor")
    for table_name in ("front", "admin"):
        table = supervisor.get(table_name) if isinstance(supervisor, dict) else None
        if isinstance(table, dict) and isinstance(table.get("token"), str):
            table["token"] = _expand(table["token"], environ, path, f"supervisor.{table_name}.token")
    store = supervisor.get("catalog_store") if isinstance(supervisor, dict) else None
    if isinstance(store, dict) and isinstance(store.get("url"), str):
        store["url"] = _expand(store["url"], environ, path, "supervisor.catalog_store.url")
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
                f"{path}: [mcp_servers.{clip(name)}]: invalid server name {clip(repr(name))}: {problem}; "
                "rename the table"
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
                    k: _expand(v, environ, path, f"{where}.{clip(k)}") if isinstance(v, str) else v
                    for k, v in value.items()
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


# -- the explainer ---------------------------------------------------------------------

_ECHO = reprlib.Repr()
_ECHO.maxstring = CLIP_CHARS
_ECHO.maxother = CLIP_CHARS
_ECHO.maxlevel = 3


def _explain(exc: ValidationError, path: Path, prefix: tuple[str, ...] = ()) -> str:
    """One message, one line per pydantic error, each naming the key path and the fix."""
    lines: list[str] = []
    for error in exc.errors(include_url=False):
        loc = prefix + tuple(error["loc"])
        if error["type"] == "extra_forbidden":
            lines.append(_unknown_key_message(loc[:-1], str(loc[-1])))
            continue
        # pydantic marks a bad mapping key (an env variable name) with a trailing "[key]".
        where = f"{_dotted(loc[:-1])} (the name)" if loc[-1:] == ("[key]",) else _dotted(loc) or "(top level)"
        ctx = error.get("ctx") or {}
        message = str(ctx["error"]) if error["type"] == "value_error" and "error" in ctx else error["msg"]
        shown = "" if _is_secret(loc) or isinstance(error["input"], dict) else f" (got {_echo(error['input'])})"
        lines.append(f"{where}: {message}{shown}")
    if len(lines) == 1:
        return f"{path}: {lines[0]}"
    return f"{path}: {len(lines)} problems:\n" + "\n".join(f"  {line}" for line in lines)


def _echo(value: object) -> str:
    """A short repr of user input: long strings and deep lists are cut, never echoed whole."""
    try:
        return clip(_ECHO.repr(value))
    except ValueError:  # an int beyond sys.get_int_max_str_digits() has no repr
        return "a number too long to show"


def _unknown_key_message(section: tuple[Any, ...], key: str) -> str:
    model = _model_at(section)
    hidden = {"name"} if model is ServerSettings else {"source_path"} if model is Settings else set()
    allowed = ", ".join(k for k in _keys_in_order(model) if k not in hidden)
    name = f"[{_dotted(section)}]" if section else "the top level"
    return f"unknown key {clip(repr(key))} in {name}; remove it or use one of: {allowed}"


def _keys_in_order(model: type[BaseModel] | None) -> list[str]:
    """A model's own keys first, then the inherited ones (a server's command before its timeouts)."""
    if model is None:
        return []
    own = [k for k in vars(model).get("__annotations__", {}) if k in model.model_fields]
    return own + [k for k in model.model_fields if k not in own]


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
        text += f"[{part}]" if isinstance(part, int) else f".{clip(str(part))}" if text else clip(str(part))
    return text


def _is_secret(loc: tuple[Any, ...]) -> bool:
    return any(part in _SECRET_KEYS for part in loc)
