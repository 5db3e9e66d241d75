"""The one-shot commands ``tools`` and ``call``: start every server once, report, stop.

Each command is one entry point the CLI runs under ``trio.run``, after starting
the stdio servers early (``upstream.spawn``; ``early`` hands them over). It owns one
nursery holding the :class:`~supervisor.root.Supervisor`; the wait for the
servers' first attempts is bounded by the slowest ``startup_timeout_sec`` plus
one second, and the nursery is cancelled as soon as the answer is known, which
stops every server and reaps every child before the command returns. Progress
goes to stderr (:mod:`supervisor.ops.progress`); the result to stdout.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import trio
from mcp import MCPError

from supervisor.catalog.token_estimate import BYTES_PER_TOKEN, estimate_tokens
from supervisor.config.models import Settings
from supervisor.errors import EXIT_OK, EXIT_RUNTIME
from supervisor.ops.progress import Progress
from supervisor.root import Supervisor
from supervisor.upstream.spawn import EarlyServers


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
        searched = {name or "(all: /mcp)" for name, catalog in views.items() if catalog.search}
        nursery.cancel_scope.cancel()
    print(f"# estimated tokens of each tools/list as a host receives it (JSON bytes / {BYTES_PER_TOKEN:g})")
    width = max((len(name) for name, _ in servers + listings), default=6) + 2
    print(f"{'server'.ljust(width)}{'tools':>7}{'tokens':>10}")
    for name, listing in servers:
        print(f"{name.ljust(width)}{len(listing):>7}{estimate_tokens(listing):>10,}")
    print(f"\n{'view'.ljust(width)}{'tools':>7}{'tokens':>10}")
    for name, listing in listings:
        mode = "  (search: search_tools + call_tool + always_visible)" if name in searched else ""
        print(f"{name.ljust(width)}{len(listing):>7}{estimate_tokens(listing):>10,}{mode}")
    return EXIT_OK


async def call(
    settings: Settings, public_name: str, arguments: dict[str, Any] | None, *, early: EarlyServers | None = None
) -> int:
    """Call one namespaced tool and print its result; exit 1 on an unknown tool or a failed call."""
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(settings, on_status=Progress(sys.stderr, settings.mcp_servers), early=early)
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
                result = await actor.call_tool(tool.raw_name, tool.upstream_arguments(arguments))
            except MCPError as exc:
                print(f"mcp-supervisor: {public_name}: error {exc.code}: {exc.error.message}", file=sys.stderr)
                return EXIT_RUNTIME
        finally:
            nursery.cancel_scope.cancel()
    print(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2))
    return EXIT_RUNTIME if getattr(result, "is_error", True) else EXIT_OK
