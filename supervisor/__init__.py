"""mcp-supervisor: one supervised MCP server over the union of many upstream servers' tools.

The public surface is small; see the README for the command line.
"""

from __future__ import annotations

from supervisor._version import __version__
from supervisor.errors import (
    ConfigError,
    RegistryConflict,
    SupervisorError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from supervisor.naming import public_tool_name
from supervisor.settings import Settings, load_settings

__all__ = [
    "ConfigError",
    "RegistryConflict",
    "Settings",
    "SupervisorError",
    "UpstreamError",
    "UpstreamProtocolError",
    "UpstreamTimeout",
    "UpstreamUnavailable",
    "__version__",
    "load_settings",
    "public_tool_name",
]
