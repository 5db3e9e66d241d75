"""The one-shot commands ``tools`` and ``call``: start every server once, report, stop.

Each command is one entry point the CLI runs under ``trio.run``, after starting
the stdio servers early (``upstream.spawn``; ``early`` hands them over). It owns one
nursery holding the :class:`~supervisor.root.Supervisor`; the wait for the
servers' first attempts is bounded by the slowest ``startup_timeout_sec`` plus
one second, and the nursery is cancelled as soon as the answer is known, which
stops every server and reaps every child before the command returns. Progress
goes to stderr (:mod:`supervisor.ops.progress`); the result to stdout.

``call`` (issue 30) says why a call failed and what to run, never with a
traceback: when the connection drops during the call it waits, at most
``VERDICT_BOUND_SEC``, for the server's own verdict (a scope step-up or a
refused token parks it in ``needs_login``, whose message names the command).
In a terminal it is a host: ``ops.terminal_host.TerminalHost`` asks the person
what an upstream elicits (a form, field by field; a URL, printed and waited
for), over a ``Terminal`` (stdin and stderr in the CLI, a fake in tests). With
``--no-input``, or when stdin is not a terminal, there is no host and an
elicitation is refused as before. The person's answers are bounded by the
call's ``tool_timeout_sec``, like a host's.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from typing import Any, Final

import mcp_types as types
import trio
from mcp import MCPError
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from supervisor.catalog.naming import other_form
from supervisor.catalog.token_estimate import BYTES_PER_TOKEN, estimate_tokens
from supervisor.compat.oauth import LoginRequired
from supervisor.config.models import Settings
from supervisor.errors import EXIT_OK, EXIT_RUNTIME, UpstreamError, UpstreamUnavailable, first_leaf
from supervisor.ops.progress import Progress
from supervisor.ops.status import ServerStatus
from supervisor.ops.terminal_host import StreamTerminal, Terminal, TerminalHost
from supervisor.root import Supervisor
from supervisor.server_actor import ServerActor
from supervisor.upstream.spawn import EarlyServers

VERDICT_BOUND_SEC: Final = 5.0
"""How long a call whose connection dropped waits for its server to say why (the generation's teardown)."""


async def tools(
    settings: Settings, as_json: bool, view: str | None = None, *, early: EarlyServers | None = None
) -> int:
    """Print the catalog (as ``view`` lists it, if given) and each server's state; exit 1 if nothing came up."""
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(settings, on_status=Progress(sys.stderr, settings.mcp_servers), early=early)
        await nursery.start(supervisor.run)
        with trio.move_on_after(supervisor.startup_bound_sec + 1):
            await supervisor.wait_first_attempts()
        catalog = supervisor.views[view or ""].tools()
        statuses = [dataclasses.replace(status) for status in supervisor.statuses()]
        caches = {status.name: supervisor.cache.describe(status.name) for status in statuses}
        nursery.cancel_scope.cancel()
    if as_json:
        print(
            json.dumps(
                {
                    "tools": [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in catalog],
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
        for tool in catalog:
            summary = (tool.description or "").strip().splitlines()
            print(f"{tool.name}\t{summary[0] if summary else ''}")
    failed = [s.name for s in statuses if s.state not in ("ready", "disabled")]
    return EXIT_RUNTIME if failed and not catalog else EXIT_OK


async def tokens(settings: Settings, view: str | None = None, *, early: EarlyServers | None = None) -> int:
    """Print the estimated tokens of each server's listing and each view's (``catalog.token_estimate``)."""
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(settings, on_status=Progress(sys.stderr, settings.mcp_servers), early=early)
        await nursery.start(supervisor.run)
        with trio.move_on_after(supervisor.startup_bound_sec + 1):
            await supervisor.wait_first_attempts()
        views = {name: supervisor.views[name] for name in ([view] if view is not None else supervisor.views)}
        shown = views[view].shows_server if view is not None else (lambda _: True)
        servers = [
            (name, [entry.definition for entry in supervisor.registry.owned_by(name)])
            for name in settings.mcp_servers
            if shown(name)
        ]
        listings = [(name or "(all: /mcp)", catalog.tools()) for name, catalog in views.items()]
        searched = {name or "(all: /mcp)": catalog.code for name, catalog in views.items() if catalog.search}
        nursery.cancel_scope.cancel()
    print(f"# estimated tokens of each tools/list as a host receives it (JSON bytes / {BYTES_PER_TOKEN:g}),")
    print(f"# for a {LATEST_MODERN_VERSION} host and a {LATEST_HANDSHAKE_VERSION} one (which also gets `execution`)")
    width = max((len(name) for name, _ in servers + listings), default=6) + 2
    eras = f"{LATEST_MODERN_VERSION:>13}{LATEST_HANDSHAKE_VERSION:>13}"
    print(f"{'server'.ljust(width)}{'tools':>7}{eras}")
    for name, listing in servers:
        print(f"{name.ljust(width)}{len(listing):>7}{_estimates(listing)}")
    print(f"\n{'view'.ljust(width)}{'tools':>7}{eras}")
    for name, listing in listings:
        mode = ""
        if name in searched:
            own = "run_code" if searched[name] else "call_tool"
            mode = f"  ({'code' if searched[name] else 'search'}: search_tools + {own} + always_visible)"
        print(f"{name.ljust(width)}{len(listing):>7}{_estimates(listing)}{mode}")
    return EXIT_OK


def _estimates(listing: list[types.Tool]) -> str:
    modern = estimate_tokens(listing, LATEST_MODERN_VERSION)
    return f"{modern:>13,}{estimate_tokens(listing, LATEST_HANDSHAKE_VERSION):>13,}"


async def call(
    settings: Settings,
    public_name: str,
    arguments: dict[str, Any] | None,
    no_input: bool = False,
    *,
    early: EarlyServers | None = None,
    terminal: Terminal | None = None,
) -> int:
    """Call one namespaced tool and print its result; exit 1 on an unknown tool or a failed call.

    ``terminal``: where a person answers elicitations; by default stdin and
    stderr when stdin is a terminal and ``no_input`` is false, else none.
    """
    if terminal is None and not no_input and sys.stdin is not None and sys.stdin.isatty():
        terminal = StreamTerminal(sys.stdin, sys.stderr)
    try:
        return await _call_once(settings, public_name, arguments, terminal, early)
    except BaseExceptionGroup as group:
        stopped, rest = group.split(LoginRequired)
        if stopped is None or rest is not None:
            raise
        # A server's generation, cut short by the cancel that ends the command, let its OAuth flow's own
        # reason out (the transport names the server only once the teardown completes): still no traceback.
        print(f"mcp-supervisor: {public_name}: {first_leaf(stopped)}", file=sys.stderr)
        return EXIT_RUNTIME


async def _call_once(
    settings: Settings,
    public_name: str,
    arguments: dict[str, Any] | None,
    terminal: Terminal | None,
    early: EarlyServers | None,
) -> int:
    watch = StatusWatch(Progress(sys.stderr, settings.mcp_servers))
    host = TerminalHost(terminal) if terminal is not None else None
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(settings, on_status=watch, early=early, host=host)
        await nursery.start(supervisor.run)
        with trio.move_on_after(supervisor.startup_bound_sec + 1):
            await supervisor.wait_first_attempts()
        try:
            # The other form names the same tool (mcp__demo__echo for demo__echo): a name from older notes works too.
            routed = supervisor.route(public_name) or supervisor.route(other_form(public_name))
            if routed is None:
                print(f"mcp-supervisor: {_unknown_tool(supervisor, public_name)}", file=sys.stderr)
                return EXIT_RUNTIME
            tool, actor = routed
            try:
                result = await actor.call_tool(tool.raw_name, tool.upstream_arguments(arguments))
            except MCPError as exc:
                print(f"mcp-supervisor: {public_name}: error {exc.code}: {exc.error.message}", file=sys.stderr)
                return EXIT_RUNTIME
            except UpstreamError as exc:
                print(f"mcp-supervisor: {public_name}: {await _verdict(watch, actor, exc)}", file=sys.stderr)
                return EXIT_RUNTIME
        finally:
            nursery.cancel_scope.cancel()
    print(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2))
    return EXIT_RUNTIME if getattr(result, "is_error", True) else EXIT_OK


def _unknown_tool(supervisor: Supervisor, public_name: str) -> str:
    """Why ``public_name`` routes nowhere: its server is parked (and what to run), or the name is unknown."""
    for actor in supervisor.actors.values():
        own = f"{supervisor.registry.rule.prefix}{actor.name}__"
        if public_name.startswith(own) and actor.status.state in ("needs_login", "failed"):
            return f"{public_name}: {actor.status.unavailable_message()}"
    known = ", ".join(tool.name for tool in supervisor.registry.tools()[:20]) or "none"
    return f"unknown tool {public_name!r}; known tools: {known}"


async def _verdict(watch: StatusWatch, actor: ServerActor, exc: UpstreamError) -> str:
    """What a failed call tells the person: its server's verdict when the lost connection parks it, else ``exc``.

    A scope step-up or a refused refresh surfaces in the call only as a lost
    connection; the server's generation then ends and says why (``needs_login``).
    """
    if isinstance(exc, UpstreamUnavailable):
        with trio.move_on_after(VERDICT_BOUND_SEC):
            await watch.wait_until(lambda: actor.status.state not in ("ready", "connecting"))
    if actor.status.state == "needs_login":
        return actor.status.unavailable_message()
    return str(exc)


class StatusWatch:
    """The one-shot commands' ``on_status``: draws progress, and wakes whoever waits for a change."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._changed = trio.Event()

    def __call__(self, status: ServerStatus) -> None:
        self._progress(status)
        # Synchronous (called from the actor's status update): swap the event, so each change wakes once.
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    async def wait_until(self, settled: Callable[[], bool]) -> None:
        """Return once ``settled()`` is true (checked now and after every status change)."""
        while not settled():
            await self._changed.wait()
