"""The bundled demo MCP server: ``python -m supervisor.demo [--name NAME]``.

Ships with the product so the bundled ``settings.toml`` works offline. Serves stdio
through `supervisor.wire.stdio.open_stdio_wire` (cancellable: the process exits as
soon as stdin reaches EOF), in both protocol eras, with a few tools: ``echo``,
``add``, ``now`` and ``add_tool`` / ``remove_tool`` to exercise tool-list changes.

Concurrency: one ``trio.run``; the SDK owns the connection's task groups. The tool
table is mutated only in sync code between awaits. A change is announced to
2026-era clients on the subscription bus (their ``subscriptions/listen`` streams)
and, for a handshake-era caller, as ``notifications/tools/list_changed`` on its
connection.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
from collections.abc import Sequence
from typing import Any

import trio
from mcp.server import Server
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from supervisor.wire.stdio import open_stdio_wire

__all__ = ["DemoServer", "main"]

SERVER_NAME = "mcp-supervisor-demo"
SERVER_VERSION = "0.1.0"
CATALOG_TTL_MS = 300_000


def _schema(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
    }


def _echo_tool(name: str, description: str = "Echo the text back.") -> Tool:
    return Tool(name=name, description=description, input_schema=_schema(text="string"))


def _text(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)])


def _str_arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise MCPError(INVALID_PARAMS, f"argument {key!r} must be a string")
    return value


def _num_arg(args: dict[str, Any], key: str) -> float:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MCPError(INVALID_PARAMS, f"argument {key!r} must be a number")
    return value


class DemoServer:
    """Tool table and handlers of the demo server."""

    def __init__(self, name: str = SERVER_NAME) -> None:
        self.name = name
        self.bus = InMemorySubscriptionBus()
        self.tools: dict[str, Tool] = {
            tool.name: tool
            for tool in [
                _echo_tool("echo"),
                Tool(name="add", description="Add two numbers.", input_schema=_schema(a="number", b="number")),
                Tool(name="now", description="The current UTC time, ISO 8601.", input_schema=_schema()),
                Tool(
                    name="add_tool",
                    description="Add an echo tool with the given name.",
                    input_schema=_schema(name="string"),
                ),
                Tool(name="remove_tool", description="Remove the named tool.", input_schema=_schema(name="string")),
            ]
        }

    def build_server(self) -> Server[Any]:
        """A low-level `Server` wired to this demo's handlers."""
        return Server(
            self.name,
            version=SERVER_VERSION,
            # Its list changes only by add_tool / remove_tool, which announce it: a client may keep it five minutes
            # (a 2026-era server that declares nothing says 0, and nothing is reused across a restart).
            cache_hints={"tools/list": CacheHint(ttl_ms=CATALOG_TTL_MS)},
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
        )

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=list(self.tools.values()))

    async def call_tool(self, ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        if params.name not in self.tools:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        args = params.arguments or {}
        match params.name:
            case "add":
                return _text(str(_num_arg(args, "a") + _num_arg(args, "b")))
            case "now":
                return _text(datetime.datetime.now(datetime.UTC).isoformat())
            case "add_tool":
                name = _str_arg(args, "name")
                self.tools[name] = _echo_tool(name, "Echo the text back (added at runtime).")
                await self._announce_tools_changed(ctx)
                return _text(f"added {name}")
            case "remove_tool":
                name = _str_arg(args, "name")
                if self.tools.pop(name, None) is None:
                    raise MCPError(INVALID_PARAMS, f"No such tool to remove: {name}")
                await self._announce_tools_changed(ctx)
                return _text(f"removed {name}")
            case _:  # echo and every tool added at runtime
                return _text(_str_arg(args, "text"))

    async def _announce_tools_changed(self, ctx: ServerRequestContext[Any]) -> None:
        await self.bus.publish(ToolsListChanged())  # 2026-era clients: their listen streams
        if ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            await ctx.session.send_tool_list_changed()  # handshake era: the caller's connection

    async def serve_stdio(self) -> None:
        """Serve one client over stdin/stdout until stdin reaches EOF."""
        server = self.build_server()
        async with open_stdio_wire() as (read, write):
            await server.run(read, write, server.create_initialization_options(NotificationOptions(tools_changed=True)))


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``--name`` and serve the demo over stdio."""
    parser = argparse.ArgumentParser(prog="python -m supervisor.demo", description="The bundled demo MCP server.")
    parser.add_argument("--name", default=SERVER_NAME, help=f"serverInfo.name to report (default {SERVER_NAME})")
    ns = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(DemoServer(ns.name).serve_stdio)


if __name__ == "__main__":
    main()
