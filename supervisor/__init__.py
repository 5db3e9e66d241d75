"""mcp-supervisor: one supervised MCP server over the union of many upstream servers' tools.

The public surface is small; see the README for the command line. The
settings names load on first use (PEP 562), so importing the package, as every
``python -m supervisor`` does, costs no pydantic until a command needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
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

_LAZY = frozenset({"Settings", "load_settings"})


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module("supervisor.settings"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
