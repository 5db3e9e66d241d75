"""Command line: ``mcp-supervisor`` / ``python -m supervisor`` (DESIGN §3.1).

The CLI parses arguments, configures logging (the only place that does),
loads settings and calls ``trio.run``. Exit codes: 0 ok, 1 runtime failure,
2 bad configuration or usage. In ``run`` mode stdout carries only MCP frames;
everything else goes to stderr.

Imports are lazy on purpose: ``--help``, ``import`` and ``check`` must answer
in a fraction of a second, so trio and the ``mcp`` SDK (about a second to
import) are loaded only by the commands that connect to something, and
pydantic only by those that read the settings (``tests/test_cli_imports.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from supervisor._version import __version__
from supervisor.errors import EXIT_CONFIG, EXIT_OK, EXIT_RUNTIME, ConfigError, SupervisorError

if TYPE_CHECKING:
    from supervisor.config.models import Settings

TOKEN_ENV_VAR: Final = "MCP_SUPERVISOR_TOKEN"
DEFAULT_ADMIN_URL: Final = "http://127.0.0.1:8932"
STATUS_TIMEOUT_SEC: Final = 5.0


def entry() -> NoReturn:
    """The process's entry point (the console script, ``python -m supervisor``): ``main``, then exit at once.

    Once ``main`` returns, everything the process owes is done: the servers are
    reaped, the answers and the last spans are out, the logs are flushed. What
    is left is the interpreter's own teardown, about 200 ms of freeing a heap of
    SDK models and pydantic schemas, which a host that stops us waits through
    (Claude Code signals again 100 ms after its first signal). So the process
    flushes its standard streams and leaves with ``os._exit``.
    """
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a host that closed the pipe, or a stream closed already
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (``entry`` exits with it; tests call this directly)."""
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
            return _status(args.admin_url, args.config, args.timeout)
        from supervisor.config.loader import interpolation_environ, load_settings  # noqa: PLC0415 - see the docstring

        settings = load_settings(args.config, environ=interpolation_environ())
        quiet = command in ("tools", "call", "login", "pins") and not getattr(args, "verbose", False)
        _configure_logging(settings, command, quiet=quiet, level=getattr(args, "log_level", None))
        if command == "check":
            from supervisor.config.check import describe_settings  # noqa: PLC0415

            print(describe_settings(settings))
            return EXIT_OK
        if command == "logout":
            from supervisor.commands.login import logout  # noqa: PLC0415

            logout(settings, args.server)
            return EXIT_OK
        import trio  # noqa: PLC0415

        from supervisor.launch import let_trio_take_interrupts, start_early_then  # noqa: PLC0415  (no SDK)

        let_trio_take_interrupts()
        match command:
            case "login":
                from supervisor.commands.login import login  # noqa: PLC0415

                trio.run(login, settings, args.server)
                return EXIT_OK
            case "run":
                view = _chosen_view(settings, args.view)
                if view is not None and settings.supervisor.front.transport == "http":
                    raise ConfigError(
                        "--view applies to the stdio front; over HTTP every view is served at its own URL, "
                        f"http://HOST:PORT/mcp/{view}"
                    )
                from supervisor.pins.store import check_pin_files  # noqa: PLC0415

                check_pin_files(settings)  # a damaged pin file stops the start, naming the file
                return trio.run(start_early_then, settings, "run", view)
            case "tools":
                view = _chosen_view(settings, args.view)
                if args.tokens:
                    return trio.run(start_early_then, settings, "tokens", view)
                return trio.run(start_early_then, settings, "tools", args.json, view)
            case "pins":
                tool = getattr(args, "tool", None)
                return trio.run(start_early_then, settings, "pins", args.pins_action, args.server, tool)
            case "call":
                arguments = parse_tool_arguments(args.arguments)  # a usage error before anything starts
                return trio.run(start_early_then, settings, "call", args.tool, arguments, args.no_input)
    except ConfigError as exc:
        print(f"mcp-supervisor: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except SupervisorError as exc:
        print(f"mcp-supervisor: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        return EXIT_RUNTIME
    raise AssertionError(f"unhandled command {command!r}")


def _chosen_view(settings: Settings, view: str | None) -> str | None:
    """``--view NAME``, checked against the settings' views (a usage error, exit 2, names the ones there are)."""
    if view is None or view in settings.views:
        return view
    there = ", ".join(sorted(settings.views)) or "none are defined"
    raise ConfigError(f"--view {view}: no [views.{view}] in the settings (views: {there})")


def parse_tool_arguments(text: str | None) -> dict[str, Any] | None:
    """The ``call`` command's JSON arguments, checked before anything starts (no SDK needed for that).

    Raises:
        ConfigError: ``text`` is not JSON or not a JSON object (a usage error, exit 2).
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"the tool arguments are not valid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(value, dict):
        raise ConfigError('the tool arguments must be a JSON object, e.g. \'{"text": "hi"}\'')
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-supervisor", description="A supervised MCP sidecar.")
    parser.add_argument("--version", action="version", version=f"mcp-supervisor {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def with_config(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub.add_argument(
            "--config", type=Path, default=None, help="settings file (default: $MCP_SUPERVISOR_CONFIG, ./settings.toml)"
        )
        return sub

    run = with_config(commands.add_parser("run", help="serve the host over stdio"))
    run.add_argument("--view", metavar="NAME", help="serve only the view [views.NAME] (stdio front)")
    run.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="log at this level (default: [supervisor] log_level, else warning on the stdio front, info over HTTP)",
    )
    with_config(commands.add_parser("check", help="validate the settings and print them, secrets masked"))
    tools = with_config(commands.add_parser("tools", help="connect once and print the aggregated catalog"))
    tools.add_argument("--json", action="store_true", help="print the catalog as JSON")
    tools.add_argument("--view", metavar="NAME", help="the catalog as the view [views.NAME] shows it")
    tools.add_argument(
        "--tokens", action="store_true", help="print the estimated tokens of each server's and each view's listing"
    )
    tools.add_argument("-v", "--verbose", action="store_true", help="also print the supervisor's log")
    call = with_config(commands.add_parser("call", help="connect, call one namespaced tool, print the result"))
    call.add_argument("tool", help="public tool name, e.g. mcp__demo__echo")
    call.add_argument("arguments", nargs="?", default=None, help="JSON object of arguments")
    call.add_argument("-v", "--verbose", action="store_true", help="also print the supervisor's log")
    call.add_argument(
        "--no-input",
        action="store_true",
        help="never ask: a server's elicitation is refused, as for a script (the default when stdin is no terminal)",
    )
    status = with_config(commands.add_parser("status", help="print the status table of a running sidecar"))
    status.add_argument(
        "--admin-url",
        default=None,
        help="the sidecar's admin endpoint (default: from [supervisor.admin] in the settings, "
        f"else {DEFAULT_ADMIN_URL}); token from ${TOKEN_ENV_VAR}",
    )
    status.add_argument(
        "--timeout", type=float, default=STATUS_TIMEOUT_SEC, help=f"seconds to wait (default {STATUS_TIMEOUT_SEC:g})"
    )
    login = with_config(commands.add_parser("login", help="log in to an OAuth server (browser) and store its tokens"))
    login.add_argument("server", help="the server's name in the settings")
    login.add_argument("-v", "--verbose", action="store_true", help="also print the supervisor's log")
    logout = with_config(commands.add_parser("logout", help="forget an OAuth server's stored tokens"))
    logout.add_argument("server", help="the server's name in the settings")
    pins = commands.add_parser("pins", help="review and approve pinned tool and prompt definitions")
    actions = pins.add_subparsers(dest="pins_action", required=True)
    pins_list = with_config(actions.add_parser("list", help="the state of every pinned tool and prompt"))
    pins_list.add_argument("server", nargs="?", default=None, help="only this server")
    pins_diff = with_config(actions.add_parser("diff", help="what changed since a definition was pinned"))
    pins_diff.add_argument("server", help="the server's name in the settings")
    pins_diff.add_argument("tool", nargs="?", default=None, help="its raw tool or prompt name (default: all changed)")
    pins_approve = with_config(actions.add_parser("approve", help="pin what the server lists now"))
    pins_approve.add_argument("server", help="the server's name in the settings")
    pins_approve.add_argument("tool", nargs="?", default=None, help="its raw tool or prompt name (default: all)")
    pins_reset = with_config(actions.add_parser("reset", help="forget a server's pins (next sync: first use)"))
    pins_reset.add_argument("server", help="the server's name in the settings")
    for action in (pins_list, pins_diff, pins_approve):
        action.add_argument("-v", "--verbose", action="store_true", help="also print the supervisor's log")
    imp = commands.add_parser("import", help="convert an mcpServers JSON file to settings TOML")
    imp.add_argument("file", type=Path)
    return parser


# -- logging ----------------------------------------------------------------------------


_STANDARD_RECORD_KEYS: Final = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_EXACT: Final = (str, int, bool, type(None))


class JsonFormatter(logging.Formatter):
    """One JSON object per line, so logs can be queried.

    Keys: ``ts``, ``level``, ``logger``, ``message``, then every ``extra=``
    field (``server``, ``generation``, ``tool``, ``event`` ...): any attribute
    a standard LogRecord does not have. An extra named like a core key is kept
    as ``extra_<key>``; a value JSON cannot hold is written as its ``str``.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_RECORD_KEYS:
                entry[f"extra_{key}" if key in entry or key in ("exc", "stack") else key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        try:
            return json.dumps(entry, default=str, allow_nan=False)
        except (TypeError, ValueError):  # non-string keys, a cycle, NaN: fall back to str() per value
            return json.dumps({k: v if _is_json_scalar(v) else str(v) for k, v in entry.items()})


def _is_json_scalar(value: object) -> bool:
    return isinstance(value, _EXACT) or (isinstance(value, float) and math.isfinite(value))


def _configure_logging(settings: Settings, command: str, *, quiet: bool, level: str | None = None) -> None:
    """Log to stderr: ``level`` (``--log-level``) if given, else the settings' level for ``command``."""
    handler = logging.StreamHandler(sys.stderr)
    if settings.supervisor.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel("ERROR" if quiet else (level or settings.supervisor.log_level_for(command)).upper())


# -- import -----------------------------------------------------------------------------


def _import(path: Path) -> int:
    from supervisor.config.importer import convert_mcp_servers_json  # noqa: PLC0415

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the file ({exc.strerror}); give the path of an mcpServers JSON file"
        ) from exc
    print(convert_mcp_servers_json(text, source=str(path)), end="")
    return EXIT_OK


# -- status -----------------------------------------------------------------------------


def _status(admin_url: str | None, config: Path | None, timeout_sec: float) -> int:
    """Print the running sidecar's status table; exit 1 if it cannot be reached."""
    import urllib.error  # noqa: PLC0415 - http.client and ssl cost tens of ms; only this command needs them
    import urllib.request  # noqa: PLC0415

    from supervisor.config.loader import default_config_path, interpolation_environ, load_settings  # noqa: PLC0415

    token = os.environ.get(TOKEN_ENV_VAR)
    if admin_url is None:
        admin_url = DEFAULT_ADMIN_URL
        if config is not None or default_config_path().exists():
            settings = load_settings(config, environ=interpolation_environ())
            admin = settings.supervisor.admin
            if admin.port == 0:
                print(
                    "mcp-supervisor: [supervisor.admin] port = 0 binds any free port, so the address is only known "
                    "to the running sidecar; pass --admin-url with the URL from its 'admin listening on' log line",
                    file=sys.stderr,
                )
                return EXIT_CONFIG
            admin_url = f"http://{f'[{admin.host}]' if ':' in admin.host else admin.host}:{admin.port}"
            if token is None and settings.supervisor.admin_token is not None:
                token = settings.supervisor.admin_token.get_secret_value()
    url = admin_url.rstrip("/") + "/status"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_sec) as response:
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
    for server in document.get("servers", []):
        for pin_state, keys in (server.get("pins") or {}).items():
            lines.append(f"{server['name']}: pins {pin_state}: {', '.join(keys)}")
    state = "ready" if document.get("ready") else "starting"
    lines.append(f"{state}; {document.get('catalog_tools', 0)} tools in the catalog")
    if isinstance(search := document.get("search"), str):
        lines.append(f"search: {search}")
    if isinstance(code := document.get("code_mode"), str):
        lines.append(f"code mode: {code}")
    store = document.get("catalog_store")
    if isinstance(store, dict):
        lines.append(
            f"catalog store: {store.get('backend')} ({store.get('state')}); {store.get('fleet_hits', 0)} fleet hits, "
            f"{store.get('local_hits', 0)} local hits, outbox {store.get('outbox_depth', 0)}"
            + (f"; {store['reason']}" if store.get("reason") else "")
        )
    return "\n".join(lines)
