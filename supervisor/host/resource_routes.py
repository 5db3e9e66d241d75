"""Where a resource URI or a resource template goes (DESIGN I13).

Resources keep their URIs (they are not namespaced), so a URI routes by what
the servers listed, in this order:

1. a server that listed the URI itself (the Registry's resources);
2. the servers whose listed URI templates match it (RFC 6570, the SDK's
   ``UriTemplate``): exactly one such server takes it; two or more is an
   error that names them, never a guess;
3. when nothing matches, the one ready server that offers resources at all
   (a server may serve URIs it does not list, as a filesystem server does);
   with several, the error names them.

Completions against a template route to the server that listed exactly that
template (two servers listing the same template: an error naming both).

Every lookup goes through the Front's view (``catalog.views``): a server the
view hides neither serves a URI nor counts as one that might.

Concurrency: synchronous lookups over the view; the parsed-template cache
is a plain dict filled without ``await``.
"""

from __future__ import annotations

from typing import Final

from mcp import MCPError
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from mcp_types import INVALID_PARAMS

from supervisor.catalog.views import CatalogView
from supervisor.root import Supervisor
from supervisor.server_actor import ServerActor

MAX_PARSED_TEMPLATES: Final = 4096


class ResourceRoutes:
    """Routes resource URIs and templates to the ServerActor that serves them."""

    def __init__(self, supervisor: Supervisor, view: CatalogView) -> None:
        self._supervisor = supervisor
        self._view = view
        self._parsed: dict[str, UriTemplate | None] = {}

    def owner_of(self, uri: str) -> ServerActor:
        """The actor that serves ``uri``.

        Raises:
            MCPError: No server, or more than one, can be said to serve it (-32602, naming them).
        """
        supervisor, view = self._supervisor, self._view
        listed = view.resource_owner(uri)
        if listed is not None and (actor := supervisor.actors.get(listed)) is not None:
            return actor
        matching = sorted({entry.owner for entry in view.template_entries() if self._matches(entry.raw_name, uri)})
        if len(matching) > 1:
            raise MCPError(
                INVALID_PARAMS,
                f"resource {uri!r} matches the URI templates of servers {_names(matching)}; "
                "mcp-supervisor cannot tell which one serves it",
            )
        if matching and (actor := supervisor.actors.get(matching[0])) is not None:
            return actor
        offering = sorted(
            name for name, actor in supervisor.actors.items() if actor.offers_resources and view.shows_server(name)
        )
        if len(offering) == 1:
            return supervisor.actors[offering[0]]
        if offering:
            raise MCPError(
                INVALID_PARAMS,
                f"Unknown resource: {uri} (no server lists it or a template matching it, and servers "
                f"{_names(offering)} all offer resources)",
            )
        raise MCPError(INVALID_PARAMS, f"Unknown resource: {uri} (no ready server offers resources)")

    def template_owner(self, template: str) -> ServerActor:
        """The actor that listed the URI template ``template``.

        Raises:
            MCPError: No server, or more than one, listed it (-32602).
        """
        supervisor = self._supervisor
        owners = sorted({e.owner for e in self._view.template_entries() if e.raw_name == template})
        if len(owners) > 1:
            raise MCPError(INVALID_PARAMS, f"resource template {template!r} is listed by servers {_names(owners)}")
        if not owners or (actor := supervisor.actors.get(owners[0])) is None:
            raise MCPError(INVALID_PARAMS, f"Unknown resource template: {template}")
        return actor

    def _matches(self, template: str, uri: str) -> bool:
        if template not in self._parsed:
            if len(self._parsed) >= MAX_PARSED_TEMPLATES:
                self._parsed.clear()
            try:
                self._parsed[template] = UriTemplate.parse(template)
            except InvalidUriTemplate:
                self._parsed[template] = None
        parsed = self._parsed[template]
        return parsed is not None and parsed.match(uri) is not None


def _names(servers: list[str]) -> str:
    return " and ".join(repr(server) for server in servers)
