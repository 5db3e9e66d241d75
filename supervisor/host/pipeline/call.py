"""What a ``tools/call`` is, whoever read it: the one object the driver runs its stages over (issues 47, 58).

Each runner is an adapter: it builds a ``ToolCall`` from what it read (the SDK's
handler, a front's own task, a program's call in the sandbox), hands it to the
driver (``host.pipeline.driver.ToolCalls.run``) and writes the reply its own way.
The splice is the one runner with no task per call: it applies the same stages
synchronously in its reader and pump (``host.pipeline.spliced``).

Everything a stage reads of a call is here: the host's request (``host``: its id,
progress token, ``_meta``, era and session, through which its progress, logs and
questions are attributed), the tool its view routed the public name to (the
view's wall, pins and transform are decided by then, and carried by the tool),
the actor serving it, the host's arguments, and whose span is the host's
(``origin``).

Concurrency: built and read in one task, the call's own; never shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

    from supervisor.catalog.registry import RegisteredTool
    from supervisor.server_actor import ServerActor

Origin = Literal["sdk", "stdio", "http", "sandbox"]
"""Who read the call, which says whose span is the host's (telemetry on):

* ``sdk``: the SDK's server; its middleware's SERVER span is current, and ours annotates it;
* ``stdio``, ``http``: a front's own task, which the SDK never saw; the SERVER span is ours;
* ``sandbox``: a program's call in ``run_code``; an INTERNAL span of its own, a child of the
  ``run_code`` call's span (current in the run's tasks).
"""


@dataclass(slots=True, frozen=True)
class ToolCall:
    """One host's call of one tool, as every stage of the pipeline reads it."""

    host: ServerRequestContext[Any]
    """The host's request: its id, ``_meta`` (its progress token, which ``calls.attribution.HostCall`` reads, and
    trace context), era, and the session its notices go to."""
    tool: RegisteredTool
    """What the view's public name routed to (the wall and the pin guard passed: ``Front.route``): everything the
    view decides of a call (its public name ``key``, its transform) is this tool's."""
    actor: ServerActor
    """The actor serving the tool's server."""
    arguments: dict[str, Any] | None
    """The host's arguments, before any transform (what spans record)."""
    origin: Origin

    @property
    def request_id(self) -> str | int | None:
        """The host's JSON-RPC id (a sandbox call's: its ``run_code`` request's)."""
        return self.host.request_id

    @property
    def modern(self) -> bool:
        """Whether the host speaks the 2026 era (its results carry our ``serverInfo`` and a ``resultType``)."""
        return self.host.protocol_version in MODERN_PROTOCOL_VERSIONS
