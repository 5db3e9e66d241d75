"""``python -m supervisor``: the same as the ``mcp-supervisor`` console script."""

from __future__ import annotations

from supervisor.cli import entry

entry()
