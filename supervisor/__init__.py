"""mcp-supervisor: one supervised MCP server over the union of many upstream servers' tools.

The public surface is small; see the README for the command line. The
settings names load on first use (PEP 562), so importing the package, as every
``python -m supervisor`` does, costs no pydantic until a command needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from supervisor._version import __version__
from supervisor.catalog.naming import public_tool_name
from supervisor.errors import (
    ConfigError,
    RegistryConflict,
    SupervisorError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
)

if TYPE_CHECKING:
    from supervisor.config.loader import load_settings
    from supervisor.config.models import Settings

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

_LAZY: dict[str, str] = {"Settings": "supervisor.config.models", "load_settings": "supervisor.config.loader"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is not None:
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
