"""Public tool and prompt names: ``mcp__<server>__<name>`` (DESIGN §3.3).

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


def public_tool_name(server: str, raw_tool: str) -> str:
    """Return the host-facing name of ``raw_tool`` on ``server``.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``. When anything was
    replaced, or the result is longer than 64 characters, it is cut and a short
    stable hash of ``(server, raw_tool)`` is appended, so two raw names that
    sanitize alike still get distinct public names.
    """
    return public_name(server, raw_tool)


def public_name(server: str, raw: str, *, namespace: bool = True) -> str:
    """Return the host-facing name of the tool or prompt ``raw`` on ``server``.

    With ``namespace=False`` (the server's ``namespace = false`` setting) the
    prefix is left out; the same sanitizing, cutting and hashing rule applies,
    so the result is still a safe name of at most 64 characters.
    """
    prefix = f"{PREFIX}{server}__" if namespace else ""
    candidate = f"{prefix}{_UNSAFE.sub('_', raw)}"
    changed = candidate != f"{prefix}{raw}"
    if not changed and 0 < len(candidate) <= MAX_NAME_LEN:
        return candidate
    digest = hashlib.sha256(f"{server}\0{raw}".encode()).hexdigest()[:_HASH_LEN]
    return f"{candidate[: MAX_NAME_LEN - _HASH_LEN - 1]}_{digest}"
