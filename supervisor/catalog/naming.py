"""Public tool and prompt names: ``<server>__<name>``, or ``mcp__<server>__<name>`` (DESIGN §3.3, issue 57).

``NameRule`` is the form ``[supervisor.names]`` sets (``config.names``): the
prefix before ``<server>__`` (none, or ``mcp__``) and the longest name made.
Characters outside ``[A-Za-z0-9_-]`` become ``_``; if anything was replaced, or
the name would be longer than the rule allows, it is cut and a short stable
hash of ``(server, raw name)`` is appended, so the result is unique and
deterministic.

Pure functions, no I/O. The public name is never parsed back: routing goes
through the Registry, which maps each public name to its owner and raw name.
``other_form`` only gives globs and the ``call`` command the other spelling of
a name, so a view written for ``mcp__files__*`` still matches ``files__read``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

MCP_PREFIX: Final = "mcp__"
MAX_NAME_LEN: Final = 64
_HASH_LEN: Final = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class NameRule:
    """How public names are made: ``prefix`` before ``<server>__``, at most ``max_len`` characters."""

    prefix: str
    max_len: int


MCP_RULE: Final = NameRule(MCP_PREFIX, MAX_NAME_LEN)
"""The ``mcp`` form: ``mcp__<server>__<name>``, at most 64 characters (the functions' default; the Registry is given
the settings' rule, whose default is the short form: ``config.names``)."""


def public_tool_name(server: str, raw_tool: str, rule: NameRule = MCP_RULE) -> str:
    """Return the host-facing name of ``raw_tool`` on ``server`` under ``rule``."""
    return public_name(server, raw_tool, rule=rule)


def public_name(server: str, raw: str, *, namespace: bool = True, rule: NameRule = MCP_RULE) -> str:
    """Return the host-facing name of the tool or prompt ``raw`` on ``server``.

    With ``namespace=False`` (the server's ``namespace = false`` setting) the
    prefix and server part are left out; the same sanitizing, cutting and
    hashing rule applies, so the result is still a safe name within the rule's length.
    """
    prefix = f"{rule.prefix}{server}__" if namespace else ""
    candidate = f"{prefix}{_UNSAFE.sub('_', raw)}"
    changed = candidate != f"{prefix}{raw}"
    if not changed and 0 < len(candidate) <= rule.max_len:
        return candidate
    digest = hashlib.sha256(f"{server}\0{raw}".encode()).hexdigest()[:_HASH_LEN]
    return f"{candidate[: rule.max_len - _HASH_LEN - 1]}_{digest}"


def tool_part(public: str, server: str) -> str:
    """``public`` without ``mcp__<server>__`` or ``<server>__``: what the search index reads as the tool's name."""
    return public.removeprefix(f"{MCP_PREFIX}{server}__").removeprefix(f"{server}__")


def other_form(name: str) -> str:
    """The same name in the other form: ``mcp__files__read`` <-> ``files__read`` (a spelling, not a lookup)."""
    return name.removeprefix(MCP_PREFIX) if name.startswith(MCP_PREFIX) else f"{MCP_PREFIX}{name}"
