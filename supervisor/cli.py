"""Command line: ``mcp-supervisor`` / ``python -m supervisor`` (DESIGN §3.1).

The CLI parses arguments, configures logging (the only place that does),
loads settings and calls ``trio.run``. Exit codes: 0 ok, 1 runtime failure,
2 bad configuration or usage. In ``run`` mode stdout carries only MCP frames;
everything else goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import trio
from mcp import MCPError

from supervisor._version import __version__
from supervisor.errors import ConfigError, SupervisorError
from supervisor.importer import convert_mcp_servers_json
from supervisor.progress import Progress
from supervisor.root import Supervisor
from supervisor.serve import serve
from supervisor.settings import Settings, default_config_path, describe_settings, interpolation_environ, load_settings

logger = logging.getLogger("supervisor")

EXIT_OK: Final = 0
EXIT_RUNTIME: Final = 1
EXIT_CONFIG: Final = 2
TOKEN_ENV_VAR: Final = "MCP_SUPERVISOR_TOKEN"
DEFAULT_ADMIN_URL: Final = "http://127.0.0.1:8932"
STATUS_TIMEOUT_SEC: Final = 5.0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (the console script passes it to ``sys.exit``)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    command: str = args.command
    try:
        if command == "import":
            return _import(args.file)
        if command == "status":
            return _status(args.admin_url, args.config)
        settings = load_settings(args.config, environ=interpolation_environ())
        _configure_logging(settings, quiet=command in ("tools", "call") and not args.verbose)
        match command:
            case "check":
                print(describe_settings(settings))
                return EXIT_OK
            case "run":
                trio.run(serve, settings)
                return EXIT_OK
            case "tools":
                return trio.run(_tools, settings, args.json)
            case "call":
                return trio.run(_call, settings, args.tool, _parse_arguments(args.arguments))
    except ConfigError as exc:
        print(f"mcp-supervisor: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except SupervisorError as exc:
        print(f"mcp-supervisor: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        return EXIT_RUNTIME
    raise AssertionError(f"unhandled command {command!r}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-supervisor", description="A supervised MCP sidecar.")
    parser.add_argument("--version", action="version", version=f"mcp-supervisor {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def with_config(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub.add_argument(
            "--config", type=Path, default=None, help="settings file (default: $MCP_SUPERVISOR_CONFIG, ./settings.toml)"
        )
        return sub

    with_config(commands.add_parser("run", help="serve the host over stdio"))
    with_config(commands.add_parser("check", help="validate the settings and print them, secrets masked"))
    tools = with_config(commands.add_parser("tools", help="connect once and print the aggregated catalog"))
    tools.add_argument("--json", action="store_true", help="print the catalog as JSON")
    tools.add_argument("-v", "--verbose", action="store_true", help="also print the supervisor's log")
    call = with_config(commands.add_parser("call", help="connect, call one namespaced tool, print the result"))
    call.add_argument("tool", help="public tool name, e.g. mcp__demo__echo")
    call.add_argument("arguments", nargs="?", default=None, help="JSON object of arguments")
    call.add_argument("-v", "--verbose", action="store_true", help="also print the supervisor's log")
    status = with_config(commands.add_parser("status", help="print the status table of a running sidecar"))
    status.add_argument(
        "--admin-url",
        default=None,
        help="the sidecar's admin endpoint (default: from [supervisor.admin] in the settings, "
        f"else {DEFAULT_ADMIN_URL}); token from ${TOKEN_ENV_VAR}",
    )
    imp = commands.add_parser("import", help="convert an mcpServers JSON file to settings TOML")
    imp.add_argument("file", type=Path)
    return parser


# -- logging ----------------------------------------------------------------------------


_STANDARD_RECORD_KEYS: Final = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class _JsonFormatter(logging.Formatter):
    """One JSON object per line; ``extra=`` fields (e.g. ``"event": "ready"``) become keys."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD_RECORD_KEYS})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _configure_logging(settings: Settings, *, quiet: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if settings.supervisor.log_format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel("ERROR" if quiet else settings.supervisor.log_level.upper())


# -- import -----------------------------------------------------------------------------


def _import(path: Path) -> int:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the file ({exc.strerror}); give the path of an mcpServers JSON file"
        ) from exc
    print(convert_mcp_servers_json(text, source=str(path)), end="")
    return EXIT_OK


# -- tools / call -----------------------------------------------------------------------


def _parse_arguments(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"the tool arguments are not valid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(value, dict):
        raise ConfigError('the tool arguments must be a JSON object, e.g. \'{"text": "hi"}\'')
    return value


async def _tools(settings: Settings, as_json: bool) -> int:
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(settings, on_status=Progress(sys.stderr, settings.mcp_servers))
        await nursery.start(supervisor.run)
        with trio.move_on_after(supervisor.startup_bound_sec + 1):
            await supervisor.wait_first_attempts()
        tools = supervisor.registry.tools()
        statuses = [dataclasses.replace(status) for status in supervisor.statuses()]
        caches = {status.name: supervisor.cache.describe(status.name) for status in statuses}
        nursery.cancel_scope.cancel()
    if as_json:
        print(
            json.dumps(
                {
                    "tools": [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools],
                    "servers": [
                        {
                            "name": s.name,
                            "state": s.state,
                            "tools": s.tool_count,
                            "last_error": s.last_error,
                            "catalog_cache": caches[s.name],
                        }
                        for s in statuses
                    ],
                },
                indent=2,
            )
        )
    else:
        for status in statuses:
            print(f"# {status.name}: {status.describe()}")
            if status.state != "disabled":
                print(f"#   catalog cache: {json.dumps(caches[status.name])}")
        for tool in tools:
            summary = (tool.description or "").strip().splitlines()
            print(f"{tool.name}\t{summary[0] if summary else ''}")
    failed = [s.name for s in statuses if s.state not in ("ready", "disabled")]
    return EXIT_RUNTIME if failed and not tools else EXIT_OK


async def _call(settings: Settings, public_name: str, arguments: dict[str, Any] | None) -> int:
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(settings, on_status=Progress(sys.stderr, settings.mcp_servers))
        await nursery.start(supervisor.run)
        with trio.move_on_after(supervisor.startup_bound_sec + 1):
            await supervisor.wait_first_attempts()
        try:
            routed = supervisor.route(public_name)
            if routed is None:
                known = ", ".join(tool.name for tool in supervisor.registry.tools()[:20]) or "none"
                print(f"mcp-supervisor: unknown tool {public_name!r}; known tools: {known}", file=sys.stderr)
                return EXIT_RUNTIME
            tool, actor = routed
            try:
                result = await actor.call_tool(tool.raw_name, arguments)
            except MCPError as exc:
                print(f"mcp-supervisor: {public_name}: error {exc.code}: {exc.error.message}", file=sys.stderr)
                return EXIT_RUNTIME
        finally:
            nursery.cancel_scope.cancel()
    print(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2))
    return EXIT_RUNTIME if getattr(result, "is_error", True) else EXIT_OK


# -- status -----------------------------------------------------------------------------


def _status(admin_url: str | None, config: Path | None) -> int:
    """Print the running sidecar's status table; exit 1 if it cannot be reached."""
    token = os.environ.get(TOKEN_ENV_VAR)
    if admin_url is None:
        admin_url = DEFAULT_ADMIN_URL
        if config is not None or default_config_path().exists():
            settings = load_settings(config, environ=interpolation_environ())
            admin = settings.supervisor.admin
            admin_url = f"http://{f'[{admin.host}]' if ':' in admin.host else admin.host}:{admin.port}"
            if token is None and settings.supervisor.admin_token is not None:
                token = settings.supervisor.admin_token.get_secret_value()
    url = admin_url.rstrip("/") + "/status"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=STATUS_TIMEOUT_SEC) as response:
            document = json.load(response)
    except urllib.error.HTTPError as exc:
        hint = f"; set {TOKEN_ENV_VAR} to the sidecar's token" if exc.code == 401 else ""
        print(f"mcp-supervisor: {url} answered {exc.code} {exc.reason}{hint}", file=sys.stderr)
        return EXIT_RUNTIME
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"mcp-supervisor: cannot reach the sidecar at {url} ({reason}); is it running with "
              "[supervisor.admin] enabled = true?", file=sys.stderr)  # fmt: skip
        return EXIT_RUNTIME
    print(format_status_table(document))
    return EXIT_OK


def format_status_table(document: dict[str, Any]) -> str:
    """The ``status`` command's table for a ``/status`` document."""
    header = ("SERVER", "STATE", "GEN", "ERA", "TOOLS", "ATTEMPTS", "LAST SYNC", "CACHE", "LAST ERROR")
    rows: list[tuple[str, ...]] = [header]
    for server in document.get("servers", []):
        age = server.get("last_sync_age_sec")
        cache = server.get("catalog_cache") or {}
        rows.append(
            (
                str(server["name"]),
                str(server["state"]),
                str(server.get("generation", "")),
                str(server.get("era") or "-"),
                str(server.get("tools", 0)),
                f"{server.get('attempt', 0)}/{server.get('max_attempts', 0)}",
                "-" if age is None else f"{age:.0f}s ago ({server.get('last_sync_reason')})",
                f"{cache.get('entries', 0)} entries, {cache.get('hits', 0)} hits" if cache else "-",
                str(server.get("last_error") or "-"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1]
             for row in rows]  # fmt: skip
    state = "ready" if document.get("ready") else "starting"
    lines.append(f"{state}; {document.get('catalog_tools', 0)} tools in the catalog")
    return "\n".join(lines)
