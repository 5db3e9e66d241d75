"""Public tool names: ``mcp__<server>__<tool>`` (DESIGN §3.3).

Pure functions, no I/O. The public name is never parsed back: routing goes
through the Registry, which maps each public name to its owner and raw name.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

PREFIX: Final = "mcp__"
MAX_NAME_LEN: Final = 64
_HASH_LEN: Final = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


def server_name_problem(name: str) -> str | None:
    """Say why ``name`` cannot name a server, or return None when it can."""
    if not SERVER_NAME.fullmatch(name):
        return "use 1 to 32 characters from A-Z, a-z, 0-9, '_' and '-'"
    if "__" in name:
        return "it must not contain '__' (that separates the server from the tool in public names)"
    if name.endswith("_"):
        return "it must not end with '_' (the public name would be ambiguous)"
    return None


def public_tool_name(server: str, raw_tool: str) -> str:
    """Return the host-facing name of ``raw_tool`` on ``server``.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``. When anything was
    replaced, or the result is longer than 64 characters, it is cut and a short
    stable hash of ``(server, raw_tool)`` is appended, so two raw names that
    sanitize alike still get distinct public names.
    """
    candidate = f"{PREFIX}{server}__{_UNSAFE.sub('_', raw_tool)}"
    changed = candidate != f"{PREFIX}{server}__{raw_tool}"
    if not changed and len(candidate) <= MAX_NAME_LEN:
        return candidate
    digest = hashlib.sha256(f"{server}\0{raw_tool}".encode()).hexdigest()[:_HASH_LEN]
    return f"{candidate[: MAX_NAME_LEN - _HASH_LEN - 1]}_{digest}"
