"""A view: the part of the Registry one host may see and use (issue 26, DESIGN I16).

A ``CatalogView`` answers every read the Front makes of the catalog (lists,
lookups, the routes of URIs and templates) with the view's entries only, so a
hidden server is hidden everywhere at once: its tools, prompts, resources,
templates, and through them completions and subscriptions. A request for a
hidden thing finds nothing, and so gets the same error as an unknown name.

What a view shows (``ViewRules``, compiled from ``[views.<name>]``):

* servers, by name or tag (none listed: all of them);
* of those, the tools whose public name matches an allow glob (none: all) and
  no deny glob;
* with ``catalog = "search"``, the listing is only the ``always_visible``
  tools plus ``search_tools`` and ``call_tool`` (``search_tools``); with
  ``catalog = "code"``, plus ``search_tools`` and ``run_code`` (``code_tools``,
  answered by ``host.code_mode``: issue 58); every tool
  of the view still routes by its public name, and ``search_index`` is the
  BM25 index over them all (``catalog.search``); ``semantic_index`` is the
  vector index over them once the sidecar's ``SemanticEngine`` (``semantic``,
  set by the Supervisor) has every one's vector (``catalog.semantic_engine``).

The unnamed view ``everything()`` shows the whole Registry; it reads the
Registry's own lists, so the default front pays nothing for views.

Change counting: ``versions`` has one counter per kind that moves only when
the view's own entries of that kind changed (compared by identity: an entry
lives for one generation of its server), or when its rules were edited
(``update``). The Front's change notifier reads it, so a change a view cannot
see notifies none of its hosts.

Concurrency: synchronous reads and refreshes only; under trio nothing can run
between a refresh and the read it serves, so a host sees the view as it was
before a Registry swap or after it, never between.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import mcp_types as types

from supervisor.catalog.naming import other_form
from supervisor.catalog.registry import ALL_KINDS, Kind, Registered, RegisteredPrompt, RegisteredTool, Registry
from supervisor.catalog.search import ToolIndex
from supervisor.catalog.semantic import VectorIndex
from supervisor.catalog.semantic_engine import SemanticEngine
from supervisor.config.servers import ServerSettings
from supervisor.config.views import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, ViewSettings

OWN_TOOLS_OWNER: Final = "mcp-supervisor"
"""The owner of the tools a search view adds itself (no server has this name: it has no actor)."""
SEARCH_TOOL: Final = "search_tools"
CALL_TOOL: Final = "call_tool"
RUN_CODE: Final = "run_code"


def _compile(globs: Collection[str]) -> re.Pattern[str] | None:
    return re.compile("|".join(f"(?:{fnmatch.translate(glob)})" for glob in globs)) if globs else None


def _matches(pattern: re.Pattern[str], public_name: str) -> bool:
    """Whether a glob matches the name in either form (``mcp__files__*`` still matches ``files__read``)."""
    return pattern.fullmatch(public_name) is not None or pattern.fullmatch(other_form(public_name)) is not None


@dataclass(frozen=True, slots=True)
class ViewRules:
    """What one view shows, with tags resolved to server names and globs compiled."""

    name: str
    servers: frozenset[str] | None = None
    """The servers it shows; None: every server."""
    allow: re.Pattern[str] | None = None
    deny: re.Pattern[str] | None = None
    search: bool = False
    """Whether the view lists its own tools and ``always_visible`` ones instead of all (a search or code view)."""
    code: bool = False
    """Whether its own tools are code mode's (``search_tools`` and ``run_code``)."""
    always_visible: re.Pattern[str] | None = None
    search_limit: int = DEFAULT_SEARCH_LIMIT

    @classmethod
    def of(cls, name: str, view: ViewSettings, servers: Mapping[str, ServerSettings]) -> ViewRules:
        """The rules of ``[views.<name>]``; its ``servers`` entries are server names or tags of ``servers``."""
        chosen: frozenset[str] | None = None
        if view.servers:
            wanted = set(view.servers)
            chosen = frozenset(n for n, s in servers.items() if n in wanted or wanted.intersection(s.tags))
        return cls(
            name,
            chosen,
            allow=_compile(view.tools),
            deny=_compile(view.exclude_tools),
            search=view.catalog in ("search", "code"),
            code=view.catalog == "code",
            always_visible=_compile(view.always_visible),
            search_limit=view.default_search_limit,
        )

    @property
    def everything(self) -> bool:
        """Whether these rules show the whole catalog, listed."""
        return self.servers is None and self.allow is None and self.deny is None and not self.search

    def shows_server(self, server: str) -> bool:
        return self.servers is None or server in self.servers

    def shows_tool(self, public_name: str) -> bool:
        if self.allow is not None and not _matches(self.allow, public_name):
            return False
        return self.deny is None or not _matches(self.deny, public_name)


EVERYTHING: Final = ViewRules("")


def _own_tool(name: str, description: str, schema: dict[str, Any]) -> RegisteredTool:
    tool = types.Tool(name=name, description=description, input_schema=schema)
    return Registered(name, OWN_TOOLS_OWNER, name, tool)


def search_tools(limit: int) -> list[RegisteredTool]:
    """The two tools a search view lists besides its ``always_visible`` ones, sorted by name."""
    return [
        _own_tool(
            CALL_TOOL,
            "Call one of the tools search_tools found, by its name, with arguments that follow its inputSchema.",
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name, exactly as search_tools gave it"},
                    "arguments": {"type": "object", "description": "The tool's arguments, as its inputSchema says"},
                },
                "required": ["name"],
            },
        ),
        _own_tool(
            SEARCH_TOOL,
            "Find the tools for a task: describe it in a few words. Returns the best matching tools with "
            "their names, descriptions and input schemas; call one with call_tool.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in a few words"},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SEARCH_LIMIT,
                        "description": f"How many tools to return (default {limit})",
                    },
                },
                "required": ["query"],
            },
        ),
    ]


def code_tools(limit: int) -> list[RegisteredTool]:
    """The two tools a code view lists besides its ``always_visible`` ones, sorted by name (issue 58)."""
    return [
        _own_tool(
            RUN_CODE,
            "Run a Python program against the tools: `from tools import <server>`, then "
            "`await <server>.<tool>(arg=...)` with the signatures search_tools gave (top-level await; "
            "asyncio.gather runs calls at once). Returns the value of a top-level `return`, else of the last "
            "expression, as JSON, and what it printed. A tool's error raises RuntimeError. No file system, "
            "network or environment: only the tools.",
            {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The program (Python)"}},
                "required": ["code"],
            },
        ),
        _own_tool(
            SEARCH_TOOL,
            "Find the tools for a task: describe it in a few words. Returns the best matching tools as typed "
            "Python signatures for run_code; detail=true gives their full stubs, with every argument's description.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in a few words"},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SEARCH_LIMIT,
                        "description": f"How many tools to return (default {limit})",
                    },
                    "detail": {"type": "boolean", "description": "Full stubs instead of one line each"},
                },
                "required": ["query"],
            },
        ),
    ]


def own_tools(rules: ViewRules) -> list[RegisteredTool]:
    """What the view lists of its own: a search view's two, a code view's two, or none."""
    if rules.code:
        return code_tools(rules.search_limit)
    return search_tools(rules.search_limit) if rules.search else []


@dataclass
class _Kind:
    """One kind's entries as the view sees them, and when they were last taken from the Registry."""

    seen: int = -1
    entries: list[Registered[Any]] = field(default_factory=list)
    by_key: dict[str, Registered[Any]] | None = None
    version: int = 0


class CatalogView:
    """The Registry as one view's hosts see it (module docstring)."""

    def __init__(self, registry: Registry, rules: ViewRules = EVERYTHING) -> None:
        self._registry = registry
        self._rules = rules
        self._kinds: dict[Kind, _Kind] = {kind: _Kind() for kind in ALL_KINDS}
        self._edits = 0
        self._listed: tuple[int, list[RegisteredTool]] | None = None
        self._own: list[RegisteredTool] = own_tools(rules)
        self._index: tuple[int, ToolIndex] | None = None
        self._vectors: tuple[int, VectorIndex] | None = None
        self.semantic: SemanticEngine | None = None
        """The sidecar's embedding engine (None: lexical search only)."""

    @property
    def name(self) -> str:
        """The view's name; ``""`` for the default view (everything)."""
        return self._rules.name

    @property
    def rules(self) -> ViewRules:
        return self._rules

    @property
    def search(self) -> bool:
        """Whether the view lists its own two tools (``search_tools`` and ``call_tool`` or ``run_code``) instead of
        most of its tools."""
        return self._rules.search

    @property
    def code(self) -> bool:
        """Whether it is a code view (``search_tools`` and ``run_code``)."""
        return self._rules.code

    def update(self, rules: ViewRules) -> bool:
        """Apply edited rules (a reload); return whether they differ. Every kind then counts as changed."""
        if rules == self._rules:
            return False
        self._rules = rules
        self._own = own_tools(rules)
        for held in self._kinds.values():
            held.seen = -1
            held.version += 1  # hosts re-list: the rules changed, even if the entries happen not to
        self._listed = self._index = None
        return True

    def shows_server(self, server: str) -> bool:
        """Whether the view shows ``server`` at all (its log messages, its warnings, its resources)."""
        return self._rules.shows_server(server)

    # -- change counting ----------------------------------------------------------------

    @property
    def versions(self) -> dict[Kind, int]:
        """Each kind's counter; it moves only when the view's entries of that kind (or its rules) changed."""
        return {kind: self._refreshed(kind).version for kind in ALL_KINDS}

    @property
    def version(self) -> int:
        """Moves whenever any kind's counter moves (the tools-list wire cache keys on it)."""
        return sum(self.versions.values())

    def _refreshed(self, kind: Kind) -> _Kind:
        held = self._kinds[kind]
        now = self._registry.kind_version(kind)
        if held.seen == now:
            return held
        held.seen = now
        entries = self._registry.entries(kind)
        rules = self._rules
        if not rules.everything:
            if kind == "tools":
                entries = [e for e in entries if rules.shows_server(e.owner) and rules.shows_tool(e.key)]
            elif rules.servers is not None:
                entries = [e for e in entries if e.owner in rules.servers]
        if len(entries) != len(held.entries) or any(a is not b for a, b in zip(entries, held.entries, strict=True)):
            held.entries = entries
            held.by_key = None
            held.version += 1
        return held

    def _by_key(self, kind: Kind) -> dict[str, Registered[Any]]:
        held = self._refreshed(kind)
        if held.by_key is None:
            held.by_key = {entry.key: entry for entry in held.entries}
        return held.by_key

    # -- lists --------------------------------------------------------------------------

    def entries(self, kind: Kind) -> list[Registered[Any]]:
        """Every entry of ``kind`` the view has, sorted by key (routable; for tools, not only the listed ones)."""
        return self._refreshed(kind).entries

    def tool_entries(self) -> list[RegisteredTool]:
        """The tools the view lists, sorted by public name (a search view: ``always_visible`` + its own two)."""
        held = self._refreshed("tools")
        if not self._rules.search:
            return held.entries
        if self._listed is None or self._listed[0] != held.version:
            pattern = self._rules.always_visible
            shown = [e for e in held.entries if pattern is not None and _matches(pattern, e.key)]
            own = {entry.key for entry in self._own}
            listed = [e for e in shown if e.key not in own] + self._own
            self._listed = (held.version, sorted(listed, key=lambda entry: entry.key))
        return self._listed[1]

    def listed(self, kind: Kind) -> list[Registered[Any]]:
        """What a host's list of ``kind`` shows now: the listed tools (``tool_entries``), or every entry of the kind."""
        return self.tool_entries() if kind == "tools" else self.entries(kind)

    def tools(self) -> list[types.Tool]:
        """The listed tools' host-facing definitions (the default view: the Registry's own kept list)."""
        if self._rules.everything:
            return self._registry.tools()
        return [entry.definition for entry in self.tool_entries()]

    def prompts(self) -> list[types.Prompt]:
        if self._rules.everything:
            return self._registry.prompts()
        return [entry.definition for entry in self.entries("prompts")]

    def resources(self) -> list[types.Resource]:
        if self._rules.everything:
            return self._registry.resources()
        return [entry.definition for entry in self.entries("resources")]

    def templates(self) -> list[types.ResourceTemplate]:
        if self._rules.everything:
            return self._registry.templates()
        return [entry.definition for entry in self.entries("templates")]

    def template_entries(self) -> list[Registered[types.ResourceTemplate]]:
        return self.entries("templates")

    # -- lookups ------------------------------------------------------------------------

    def lookup(self, public_name: str) -> RegisteredTool | None:
        """The view's tool of that public name (listed or found by search), or None."""
        if self._rules.everything:
            return self._registry.lookup(public_name)
        return self._by_key("tools").get(public_name)

    def input_schema(self, public_name: str) -> dict[str, Any] | None:
        """The ``inputSchema`` this view shows for tool ``public_name`` (None: no such tool of the view).

        What the SDK's streamable-HTTP server checks a 2026 call's ``Mcp-Param-*``
        headers against (``Server(get_tool_input_schema=…)``); without it, the SDK
        would serve a whole ``tools/list`` per ``tools/call`` to find the schema.
        """
        tool = self.lookup(public_name)
        return None if tool is None else tool.definition.input_schema

    def lookup_prompt(self, public_name: str) -> RegisteredPrompt | None:
        if self._rules.everything:
            return self._registry.lookup_prompt(public_name)
        return self._by_key("prompts").get(public_name)

    def resource_owner(self, uri: str) -> str | None:
        """Which of the view's servers listed ``uri``, if any."""
        owner = self._registry.resource_owner(uri)
        return owner if owner is not None and self._rules.shows_server(owner) else None

    def search_index(self) -> ToolIndex:
        """The BM25 index over every tool of the view; rebuilt (then swapped in whole) when they changed."""
        held = self._refreshed("tools")
        if self._index is None or self._index[0] != held.version:
            self._index = (held.version, ToolIndex(held.entries))
        return self._index[1]

    def semantic_index(self) -> VectorIndex | None:
        """The vector index over every tool of the view, or None while some tool has no vector yet (or no model)."""
        if self.semantic is None:
            return None
        held = self._refreshed("tools")
        if self._vectors is None or self._vectors[0] != held.version:
            built = self.semantic.index_for(self.name, held.version, held.entries)
            if built is None:
                return None
            self._vectors = (held.version, built)
        return self._vectors[1]


def everything(registry: Registry) -> CatalogView:
    """The default view: the whole Registry, listed."""
    return CatalogView(registry, EVERYTHING)


__all__ = [
    "CALL_TOOL",
    "EVERYTHING",
    "MAX_SEARCH_LIMIT",
    "OWN_TOOLS_OWNER",
    "RUN_CODE",
    "SEARCH_TOOL",
    "CatalogView",
    "ViewRules",
    "code_tools",
    "everything",
    "own_tools",
    "search_tools",
]
