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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import trio
from mcp import MCPError

from supervisor._version import __version__
from supervisor.errors import ConfigError, SupervisorError
from supervisor.importer import convert_mcp_servers_json
from supervisor.root import Supervisor
from supervisor.serve import serve
from supervisor.settings import Settings, describe_settings, load_settings
from supervisor.status import ServerStatus

logger = logging.getLogger("supervisor")

EXIT_OK: Final = 0
EXIT_RUNTIME: Final = 1
EXIT_CONFIG: Final = 2


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
        settings = load_settings(args.config, environ=_interpolation_environ())
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
    imp = commands.add_parser("import", help="convert an mcpServers JSON file to settings TOML")
    imp.add_argument("file", type=Path)
    return parser


def _interpolation_environ() -> dict[str, str]:
    """The process environment plus ``SUPERVISOR_PYTHON``: this interpreter, unless set.

    The bundled settings start the demo servers with ``${SUPERVISOR_PYTHON}``, so
    they run in the sidecar's own environment, wherever it is installed.
    """
    environ = dict(os.environ)
    environ.setdefault("SUPERVISOR_PYTHON", sys.executable)
    return environ


# -- logging ----------------------------------------------------------------------------


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
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


class _Progress:
    """Per-server progress on stderr: one line per state change."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._seen: dict[str, str] = {}

    def __call__(self, status: ServerStatus) -> None:
        line = status.describe()
        if self._seen.get(status.name) != line and status.state in ("connecting", "ready", "failed", "reconnecting"):
            self._seen[status.name] = line
            print(f"{status.name}: {line}", file=self._stream, flush=True)


async def _tools(settings: Settings, as_json: bool) -> int:
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(settings, on_status=_Progress(sys.stderr))
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
        supervisor = Supervisor(settings, on_status=_Progress(sys.stderr))
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
    return EXIT_RUNTIME if result.is_error else EXIT_OK
