"""The one rule for routing a host request to its server: never answer "unknown" before the first attempts end.

Right after start, a host's first request may name a tool, prompt, URI or
template of a server that is still connecting: one-shot hosts (CLI inspectors,
``-p``-style agent runs, scripts) send exactly that. A server the host had
spawned itself would have answered, so every request that routes to one server
goes through ``route_when_known``: it routes at once when it can, and when
nothing serves the name yet (-32602) while some server is still on its first
attempt, it waits for the first attempts (at most ``startup_timeout_sec``) and
routes once more. A request that cannot be routed after that gets the
"unknown" error it would have got anyway.

What every request method of the Front does before it answers:

* ``ROUTED_METHODS`` route to one server, through ``route_when_known`` (a
  tool or prompt found in the last moment of its server's first attempt then
  waits for that attempt to end: ``HostRequests.until_first_attempt_ends``):
  ``tools/call`` (the fast path and the splice leave a name not routed yet to
  the SDK path, which waits), ``prompts/get``, ``resources/read`` (by listing,
  by template, by the one resource server), ``resources/subscribe``,
  ``completion/complete`` (by prompt, by template), and the resource URIs of a
  2026 ``subscriptions/listen`` stream;
* ``LIST_METHODS`` answer from the Registry after a short bounded wait for the
  first attempts (``front.FIRST_LIST_WAIT_SEC``), then tell of late servers by
  change notices;
* ``LOCAL_METHODS`` route to no server and answer at once: the handshake,
  ``ping``, ``logging/setLevel`` (applied to every server), and
  ``resources/unsubscribe`` (it only forgets the host's subscription).

``tests/host/test_routing.py`` checks that every method the Front registers is
in exactly one of the three, and that each routed one waits.

Concurrency: ``route`` is synchronous (a Registry lookup); the one wait is
bounded by the start-up bound and returns as soon as the first attempts end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, Protocol, TypeVar

import trio
from mcp import MCPError
from mcp_types import INVALID_PARAMS

logger = logging.getLogger(__name__)

T = TypeVar("T")

ROUTED_METHODS: Final = frozenset(
    {
        "tools/call",
        "prompts/get",
        "resources/read",
        "resources/subscribe",
        "completion/complete",
        "subscriptions/listen",
    }
)
LIST_METHODS: Final = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})
LOCAL_METHODS: Final = frozenset({"initialize", "server/discover", "ping", "logging/setLevel", "resources/unsubscribe"})


class FirstAttempts(Protocol):
    """The servers' first attempts (``root.Supervisor``)."""

    @property
    def startup_bound_sec(self) -> float: ...

    def pending_first_attempts(self) -> list[str]: ...

    async def wait_first_attempts(self) -> None: ...


async def route_when_known(what: str, route: Callable[[], T], first_attempts: FirstAttempts) -> T:
    """``route()``, once more after the first attempts if it found nothing while some were pending.

    Args:
        what: What is routed, for the log (``"resource fixture://x"``).
        route: The request's lookup; raises ``MCPError`` (-32602) when nothing
            serves the name, URI or template (yet).
        first_attempts: Whose first attempts to wait for.

    Raises:
        MCPError: Nothing serves it, even once the first attempts ended (or the
            start-up bound passed).
    """
    try:
        return route()
    except MCPError as exc:
        pending = first_attempts.pending_first_attempts()
        if exc.code != INVALID_PARAMS or not pending:
            raise
    logger.debug("%s is not routed yet: waiting for the first attempts of %s", what, ", ".join(pending))
    with trio.move_on_after(first_attempts.startup_bound_sec):
        await first_attempts.wait_first_attempts()
    return route()
