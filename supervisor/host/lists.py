"""The Front's lists: what its hosts list, what they were answered (I22), and what the view declares (issue 57).

``FrontLists`` is owned by one Front (one view) and holds everything about its
lists in one place:

* the four list handlers the SDK's server calls (``tools/list`` past its first
  page; the first page is the wire cache's, ``catalog.wire_form``), each waiting
  for the servers still on their first attempt, as a host that lists once at
  start-up needs;
* ``received``: what each answer showed (``host.change_notices``), recorded in
  the same step as the answer, so a notice goes out only for a real change;
* ``encoded_list``: a first-page answer as JSON text in a protocol version, the
  same text the wire cache sends (the view snapshot keeps it for the next
  start's prelude, and a prelude's answer is compared with it);
* ``answer_from_disk`` (a server middleware): while a server of the view is
  still on its first attempt, a first-page ``tools/list`` or ``prompts/list``
  in a version the view's snapshot holds fresh is answered from it, as the
  prelude would have (the host's list came after the prelude handed over);
* the capabilities a view declares (``host.capabilities.declared``): the SDK
  answers ``initialize`` and ``server/discover`` from the Front's options, and
  ``declare_capabilities`` (a server middleware) puts the view's own in. While a
  server of the view is still on its first attempt, the view declares what it
  served the last time (``startup_facts``), or everything. A view that later
  serves a kind it declared none of is logged once: a handshake-era host that
  connected before sees it only after it reconnects (its capabilities are
  fixed for its session); a 2026-era host's next ``server/discover`` has it.

Concurrency: synchronous bookkeeping and handlers that await only the first
attempts (bounded); no locks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from pydantic import ValidationError

from supervisor.catalog.disk import ALL_FACTS, ViewFacts, ViewSnapshot, answer_digest
from supervisor.catalog.registry import Kind
from supervisor.catalog.views import CatalogView
from supervisor.catalog.wire_form import ToolsListWireCache, prompts_answer, sdk_would_refuse
from supervisor.host.capabilities import declared
from supervisor.host.change_notices import EncodedAnswer, ReceivedListings
from supervisor.root import Supervisor

logger = logging.getLogger(__name__)

_CAPABILITY_METHODS: Final = frozenset({"initialize", "server/discover"})
_LISTED: Final[dict[str, Kind]] = {"tools/list": "tools", "prompts/list": "prompts"}


class FrontLists:
    """One Front's lists, its record of what hosts hold, and the capabilities it declares (module docstring).

    Args:
        supervisor: Whose servers' first attempts the lists wait for.
        view: What the Front's hosts see.
        stamp: The ``serverInfo`` stamp of a 2026-era result (a fresh dict per call).
        wait: What a list waits for before it answers (the servers still on their first attempt, bounded).
    """

    def __init__(
        self,
        supervisor: Supervisor,
        view: CatalogView,
        *,
        stamp: Callable[[], dict[str, Any]],
        wait: Callable[[], Awaitable[None]],
    ) -> None:
        self._supervisor = supervisor
        self.view = view
        self._stamp = stamp
        self._wait = wait
        self.received = ReceivedListings(view, encode=self.encoded_list, starting=self.starting)
        """What this view's hosts were answered since they were last told of a change (I22)."""
        self.tools_cache = ToolsListWireCache(
            view,
            settled=lambda: not supervisor.pending_first_attempts(),
            stamp=stamp,
            wait=wait,
            answered=partial(self._answered, "tools"),
        )
        """Answers first-page tools/lists (the SDK-path handler ``list_tools`` then sees only cursors)."""
        self.startup_facts: ViewFacts = ALL_FACTS
        """What the view declares while its servers are on their first attempt (the snapshot's facts, if any)."""
        self.startup_snapshot: ViewSnapshot | None = None
        """The view's snapshot on disk, answering first lists while its servers are on their first attempt."""
        self.declared_facts: ViewFacts | None = None
        """What it last declared to a host (None: nothing yet)."""
        self.on_answer: Callable[[], None] = lambda: None
        """Called after each list answer (the stdio link's snapshot writer looks again)."""
        self._undeclared_warned: set[str] = set()

    # -- the SDK's list handlers ----------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # A host that lists right after starting us sees every server that has
        # finished its first attempt, not a half-empty catalog.
        await self._wait()
        self._answered("tools")
        return types.ListToolsResult(tools=self.view.tools())

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        await self._wait()
        self._answered("prompts")
        return types.ListPromptsResult(prompts=self.view.prompts())

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        await self._wait()
        self._answered("resources")
        return types.ListResourcesResult(resources=self.view.resources())

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        await self._wait()
        self._answered("templates")
        return types.ListResourceTemplatesResult(resource_templates=self.view.templates())

    def _answered(self, kind: Kind) -> None:
        self.received.answered(kind)
        self.on_answer()

    async def answer_from_disk(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: a first list, while the view's servers start, from the view's snapshot (module)."""
        kind = _LISTED.get(ctx.method)
        snapshot = self.startup_snapshot
        if kind is None or snapshot is None or (ctx.params and ctx.params.get("cursor")) or not self.starting():
            return await call_next(ctx)
        text = snapshot.answer(ctx.method, ctx.protocol_version)
        if text is None or sdk_would_refuse(ctx):
            return await call_next(ctx)
        self.received.answered_from_disk(kind, EncodedAnswer(ctx.protocol_version, answer_digest(text)))
        answer: dict[str, Any] = json.loads(text)
        return answer

    # -- answers as text -----------------------------------------------------------------

    @property
    def host_versions(self) -> frozenset[str]:
        """The protocol versions this Front's hosts have spoken."""
        return self.tools_cache.host_versions

    def encoded_list(self, kind: Kind, version: str) -> str | None:
        """The view's first-page ``tools/list`` or ``prompts/list`` answer in ``version`` as JSON text; None: no
        such answer can be made now (another kind, or a definition that does not fit the version's surface)."""
        if kind == "tools":
            encoded = self.tools_cache.encoded(version)
            if encoded is not None:
                return encoded.decode("utf-8")
            answer = self.tools_cache.answer(version)
            return None if answer is None else json.dumps(answer, separators=(",", ":"))
        if kind == "prompts":
            try:
                answer = prompts_answer(self.view.prompts(), version, self._stamp)
            except (ValidationError, KeyError, ValueError):
                return None
            return json.dumps(answer, separators=(",", ":"))
        return None

    # -- capabilities ----------------------------------------------------------------------

    def starting(self) -> bool:
        """Whether a server of the view is still on its first attempt."""
        return any(self.view.shows_server(name) for name in self._supervisor.pending_first_attempts())

    def facts(self) -> ViewFacts:
        """What the view serves now; while one of its servers is on its first attempt, what it served last time."""
        if self.starting():
            return self.startup_facts
        view = self.view
        return ViewFacts(
            prompts=bool(view.entries("prompts")),
            resources=bool(view.entries("resources")),
            templates=bool(view.entries("templates")),
        )

    async def declare_capabilities(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: the view's own capabilities in the SDK's ``initialize`` and ``server/discover``."""
        result = await call_next(ctx)
        if ctx.method in _CAPABILITY_METHODS and isinstance(result, dict) and "capabilities" in result:
            facts = self.facts()
            self.declared_facts = facts
            result = {**result, "capabilities": declared(facts)}
        return result

    def warn_of_undeclared(self) -> None:
        """Log once per kind when the view now serves a kind its hosts were declared none of (module docstring)."""
        told = self.declared_facts
        if told is None:
            return
        now = self.facts()
        for kind, was, is_now in (
            ("prompts", told.prompts, now.prompts),
            ("resources", told.resources or told.templates, now.resources or now.templates),
        ):
            if is_now and not was and kind not in self._undeclared_warned:
                self._undeclared_warned.add(kind)
                logger.warning(
                    "view %r now serves %s, but its hosts were told it has none (the capability was not declared): "
                    "a handshake-era host lists them only after it reconnects",
                    self.view.name or "(all)", kind,
                )  # fmt: skip
