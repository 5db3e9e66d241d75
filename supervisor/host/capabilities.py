"""What the sidecar declares to a host, per view: the capabilities its catalog serves (issue 57; no SDK).

A host reads the capabilities once per session and builds its tools on them:
Claude Code adds three resource tools (2,082 bytes in every model request) for
any server that declares ``resources``, whether or not it lists one. So a view
declares a kind only when it serves it (``declared``): ``tools`` and
``logging`` always, ``prompts`` when it lists a prompt, ``resources`` (with
``subscribe``) when it lists a resource or a template, ``completions`` when it
has prompts or templates to complete. What it serves comes from the live
catalog, or before the servers are up, from what the view served the last time
(``catalog.disk.ViewFacts``), or when nothing is known (a first start, edited
settings), everything.

``initialize_result`` and ``discover_result`` build the two eras' answers the
way the SDK's ``Server`` does (negotiation included), so the stdio front's
prelude answers a host before the SDK is imported (``host.stdio.prelude``), and
the Front rewrites the SDK's own answers with ``declared`` (``host.front``);
``tests/host/test_capabilities.py`` holds both to the SDK's answers, field by
field, in every protocol version. The protocol version lists are the SDK's,
copied so this module needs no SDK (the same test holds them equal).

Pure functions; nothing here awaits.
"""

from __future__ import annotations

from typing import Any, Final

from supervisor._version import __version__
from supervisor.catalog.disk import ViewFacts

SERVER_NAME: Final = "mcp-supervisor"
HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""``mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS``."""
MODERN_VERSIONS: Final = ("2026-07-28",)
"""``mcp_types.version.MODERN_PROTOCOL_VERSIONS``."""
SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"
PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"
ENVELOPE_KEYS: Final = frozenset(
    {PROTOCOL_VERSION_META_KEY, "io.modelcontextprotocol/clientInfo", "io.modelcontextprotocol/clientCapabilities"}
)
"""The 2026-era request envelope's ``_meta`` keys (``host.pipeline.paths.ENVELOPE_KEYS``)."""


def instructions(prefix: str) -> str:
    """The ``instructions`` the sidecar gives a host: how its names are made (``prefix``: ``mcp__`` or none)."""
    return f"Tools and prompts of several MCP servers, named {prefix}<server>__<name>."


def declared(facts: ViewFacts) -> dict[str, Any]:
    """The capabilities a view with ``facts`` declares, as they go on the wire (module docstring)."""
    capabilities: dict[str, Any] = {"logging": {}, "tools": {"listChanged": True}}
    if facts.prompts:
        capabilities["prompts"] = {"listChanged": True}
    if facts.resources or facts.templates:
        capabilities["resources"] = {"listChanged": True, "subscribe": True}
    if facts.prompts or facts.templates:
        capabilities["completions"] = {}
    return capabilities


def negotiated(requested: object) -> str:
    """The version an ``initialize`` asking for ``requested`` gets: that one if the handshake era has it, else the
    latest (as the SDK's ``ServerRunner`` negotiates)."""
    return requested if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]


def server_info() -> dict[str, Any]:
    return {"name": SERVER_NAME, "version": __version__}


def initialize_result(requested: object, facts: ViewFacts, text: str) -> dict[str, Any]:
    """The ``initialize`` result for a host that asked for version ``requested``."""
    return {
        "capabilities": declared(facts),
        "instructions": text,
        "protocolVersion": negotiated(requested),
        "serverInfo": server_info(),
    }


def discover_result(facts: ViewFacts, text: str) -> dict[str, Any]:
    """The 2026-era ``server/discover`` result."""
    return {
        "cacheScope": "private",
        "capabilities": declared(facts),
        "instructions": text,
        "resultType": "complete",
        "supportedVersions": list(MODERN_VERSIONS),
        "ttlMs": 0,
        "_meta": {SERVER_INFO_META_KEY: server_info()},
    }
