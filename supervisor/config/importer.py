"""The ``import FILE`` command: other hosts' MCP server JSON to ``settings.toml`` text.

Pure text-to-text conversion, no I/O (the CLI reads the file and prints the
result). Accepted shapes, all mapping a server name to one entry:

* Claude Desktop, Claude Code ``.mcp.json``, Cursor: ``{"mcpServers": {...}}``
* VS Code: ``{"servers": {...}}`` (``.vscode/mcp.json``) or ``{"mcp": {"servers": {...}}}``

The TOML is written by hand with JSON-style basic strings (a JSON string
escape is a TOML basic-string escape, except DEL, which is handled). Nothing is
dropped silently: invalid names are rewritten with a comment naming the
original, and keys without an equivalent are kept as comments. A value that
``check`` would refuse (a URL with credentials or another scheme, a NUL in what
reaches the child) is refused here, with the same reason, naming the entry.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from supervisor.config.values import clip, env_name_problem, exec_problem, server_name_problem, url_problem
from supervisor.errors import ConfigError

_HTTP_TYPES: Final = frozenset({"http", "sse", "streamable-http", "streamableHttp", "streamable_http"})
_KNOWN_KEYS: Final = frozenset({"type", "command", "args", "env", "cwd", "url", "serverUrl", "headers", "disabled"})
_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")
_REFERENCE: Final = re.compile(r"\$(\$|\{[^}]*\}|\{)")
_OUR_REFERENCE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?::-.*)?", re.DOTALL)
_VSCODE_ENV: Final = re.compile(r"env:([A-Za-z_][A-Za-z0-9_]*)")
_MAX_NAME: Final = 32
_EXPECTED: Final = 'expected {"mcpServers": {name: {...}}} (Claude, Cursor) or {"servers": {...}} (VS Code)'


def convert_mcp_servers_json(text: str, *, source: str) -> str:
    """Convert an ``mcpServers``/``servers`` JSON document to ``[mcp_servers.<name>]`` TOML.

    Args:
        text: The JSON document.
        source: Where it came from (a path), named in the header and in errors.

    Returns:
        TOML text that :func:`supervisor.config.loader.load_settings` accepts.

    Raises:
        ConfigError: The text is not JSON, holds no server map, or an entry is unusable.
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); {_EXPECTED}; "
            "comments and trailing commas are not supported, remove them"
        ) from exc
    servers, where = _server_map(document, source)
    names = _assign_names(list(servers))
    out = [
        f"# Imported by `mcp-supervisor import` from {_basic(source)}.",
        "# Review it, then add it to settings.toml.",
    ]
    if not servers:
        out.append(f"# {where} is empty: no servers to import.")
    for original, entry in servers.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: {where}.{clip(original)} must be an object with command/args or url")
        out += ["", *_server_toml(names[original], original, entry, f"{source}: {where}.{clip(original)}")]
    return "\n".join(out) + "\n"


def _server_map(document: Any, source: str) -> tuple[dict[str, Any], str]:
    if isinstance(document, dict):
        for key in ("mcpServers", "servers"):
            if key in document:
                servers = document[key]
                if not isinstance(servers, dict):
                    raise ConfigError(f"{source}: '{key}' must be an object mapping names to servers; {_EXPECTED}")
                return servers, key
        nested = document.get("mcp")
        if isinstance(nested, dict) and isinstance(nested.get("servers"), dict):
            return nested["servers"], "mcp.servers"
    raise ConfigError(f"{source}: no server map found; {_EXPECTED}")


def _assign_names(originals: list[str]) -> dict[str, str]:
    """Valid names keep theirs; the rest get a sanitized, collision-free one."""
    used = {n for n in originals if server_name_problem(n) is None}
    names = {n: n for n in used}
    for original in originals:
        if original in names:
            continue
        base = _sanitize(original)
        candidate, counter = base, 1
        while candidate in used:
            counter += 1
            suffix = f"-{counter}"
            candidate = base[: _MAX_NAME - len(suffix)].rstrip("_") + suffix
        used.add(candidate)
        names[original] = candidate
    return names


def _sanitize(name: str) -> str:
    cleaned = re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9_-]", "-", name))[:_MAX_NAME].strip("_-")
    return cleaned if cleaned and server_name_problem(cleaned) is None else "server"


def _server_toml(name: str, original: str, entry: dict[str, Any], where: str) -> list[str]:
    url = entry.get("url", entry.get("serverUrl"))
    is_http = entry.get("type") in _HTTP_TYPES or url is not None
    lines = [] if name == original else [f"# imported from {_basic(original)}"]
    lines.append(f"[mcp_servers.{name}]")
    tables: list[tuple[str, dict[str, Any]]] = []
    dropped: list[str]
    if is_http:
        if not isinstance(url, str):
            raise ConfigError(f"{where}: an http/sse entry needs a string 'url'; add one")
        if "${" not in url:  # with references, only the expanded URL can be judged: check does that
            _refuse(url_problem(url), f"{where}.url")
        lines.append(f"url = {_value(url)}")
        if entry.get("type") == "sse":
            lines.append('transport = "sse"')  # the legacy HTTP+SSE transport (upstream.sse)
        tables.append(("http_headers", _string_map(entry.get("headers", {}), f"{where}.headers")))
        dropped = [k for k in ("command", "args", "env", "cwd") if k in entry]
    else:
        command = entry.get("command")
        if not isinstance(command, str):
            raise ConfigError(f"{where}: needs a string 'command' (stdio) or a 'url' (http); add one")
        _refuse(exec_problem(command), f"{where}.command")
        lines.append(f"command = {_value(command)}")
        args = entry.get("args", [])
        if not isinstance(args, list):
            raise ConfigError(f"{where}.args must be a list of strings")
        for i, arg in enumerate(args):
            _refuse(exec_problem(_text(arg)), f"{where}.args[{i}]")
        if args:
            lines.append(f"args = [{', '.join(_value(_text(a)) for a in args)}]")
        if isinstance(entry.get("cwd"), str):
            _refuse(exec_problem(entry["cwd"]), f"{where}.cwd")
            lines.append(f"cwd = {_value(entry['cwd'])}")
        env = _string_map(entry.get("env", {}), f"{where}.env")
        for key, value in env.items():
            _refuse(env_name_problem(key), f"{where}.env.{clip(key)} (the name)")
            _refuse(exec_problem(value), f"{where}.env.{clip(key)}")
        tables.append(("env", env))
        dropped = [k for k in ("headers",) if k in entry]
    if entry.get("disabled") is True:
        lines.append("enabled = false")
    for key in sorted(set(entry) - _KNOWN_KEYS) + dropped:
        lines.append(f"# not imported (no equivalent): {_basic(key)} = {json.dumps(entry[key], ensure_ascii=True)}")
    for table, values in tables:
        if values:
            lines.append(f"[mcp_servers.{name}.{table}]")
            lines += [f"{_key(k)} = {_value(v)}" for k, v in values.items()]
    return lines


def _refuse(problem: str | None, where: str) -> None:
    if problem is not None:
        raise ConfigError(f"{where} {problem}")


def _string_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object of name/value strings")
    return {str(k): _text(v) for k, v in value.items()}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _basic(key)


def _value(text: str) -> str:
    """A TOML string whose ``${...}`` means the same under our interpolation."""
    return _basic(_REFERENCE.sub(_translate_reference, text))


def _translate_reference(match: re.Match[str]) -> str:
    token = match.group(1)
    if token == "$":
        return "$$$$"  # the source meant two literal dollars
    body = token[1:-1] if token.endswith("}") else None
    if body is not None:
        vscode = _VSCODE_ENV.fullmatch(body)
        if vscode is not None:
            return "${" + vscode.group(1) + "}"
        if _OUR_REFERENCE.fullmatch(body):
            return match.group(0)  # ${VAR} / ${VAR:-default}: same meaning here
    return "$$" + token  # anything else (e.g. VS Code ${input:...}) stays literal


def _basic(text: str) -> str:
    # JSON escapes are TOML basic-string escapes; TOML also wants DEL escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
