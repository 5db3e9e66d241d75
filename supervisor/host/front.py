"""The Front: the one MCP server the host talks to (DESIGN §2, I13).

Lists (``tools/list``, ``prompts/list``, ``resources/list``,
``resources/templates/list``) answer from the Registry, through the view
(``host.lists``, which also records what each answer showed and declares
the view's capabilities). Requests for one
server (``tools/call``, ``prompts/get``, ``resources/read``,
``completion/complete``, ``resources/subscribe``) route by the Registry
(``host.resource_routes`` for URIs) to the owning ServerActor's current generation,
with the raw name. The Front never mutates the Registry, and reads it only through its view
(``catalog.views.CatalogView``; the default one is everything): a host of this
Front sees that view and nothing else (I16). ``serve`` makes one Front per
view; they share the Supervisor and the Relay. Resource subscriptions and
listen streams are ``host.resource_subscriptions``; a search view's own two
tools are ``host.catalog_search``, a code view's ``host.code_mode``.

Each routed request runs as a ``HostCall`` in the handler's own task, so a
host's cancellation (or the SDK's, on shutdown) cancels the upstream request
too, and the Relay can attribute the upstream's progress, log messages and
server→client requests to it. The one exception: a 2026-era host calling a
handshake-era server runs through an ``Exchange`` (``host.pipeline.exchanges``), whose task
outlives the handler's input rounds.

Change notices reach hosts of both protocol eras (DESIGN §7), per kind:
2026-era hosts hold ``subscriptions/listen`` streams served by the SDK's
``ListenHandler`` over an in-memory bus (wrapped, so their resource URIs count
as subscriptions); handshake-era hosts get ``notifications/*/list_changed`` on
their connection, captured when the host finishes its handshake and forgotten
when the connection closes. ``change_notices.ChangeNotices`` coalesces bursts
of Registry changes into one notice per kind per short window.

``tools/call`` takes one of three paths (the SDK's, the fast path, the stdio
splice); which call takes which, and why, is the table in ``host.pipeline.paths``.

Logging: ``logging/setLevel`` is registered with ``add_request_handler`` (the
constructor argument is deprecated in mcp 2.3 and warns); the most verbose
level any handshake-era host set is applied to every handshake-era upstream.

Shutdown: ``begin_shutdown`` makes new calls fail at once with a clear error;
``wait_idle`` returns when the requests already running have returned (the
HTTP front adds the responses still being written; the stdio link tracks
answers on its own wire). The owner bounds that wait, then cancels.

Concurrency: ``run`` owns one nursery: the change notifier, the exchanges and
the sidecar's own host warnings. The unanswered-request set and the captured
connections are only touched without ``await`` in between, so they need no lock.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final, TypeVar

import mcp_types as types
import trio
from mcp import MCPError
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult
from mcp.server.subscriptions import (
    ListenHandler,
)
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from supervisor._version import __version__
from supervisor.calls.attribution import CallTracker, HostCall
from supervisor.calls.results import CallOutcome
from supervisor.catalog.registry import RegisteredPrompt, RegisteredTool
from supervisor.catalog.views import CatalogView
from supervisor.compat.sdk import add_server_middleware, connection_of, gate_sdk_tracing
from supervisor.errors import UpstreamError
from supervisor.host.capabilities import instructions
from supervisor.host.catalog_search import CatalogSearch
from supervisor.host.change_notices import ChangeNotices
from supervisor.host.lists import FrontLists
from supervisor.host.pipeline.adapters import OwnTools, call_tool
from supervisor.host.pipeline.driver import ToolCalls
from supervisor.host.pipeline.exchanges import ExchangeTable
from supervisor.host.relay import Relay
from supervisor.host.resource_routes import ResourceRoutes
from supervisor.host.resource_subscriptions import ResourceSubscriptions
from supervisor.host.routing import route_when_known
from supervisor.ops.logs import RateLimitedLog
from supervisor.root import Supervisor
from supervisor.server_actor import ServerActor
from supervisor.telemetry.spans import sdk_span_needed

logger = logging.getLogger(__name__)

T = TypeVar("T")
Routed = TypeVar("Routed", bound="tuple[Any, ServerActor]")

FIRST_LIST_WAIT_SEC: Final = 3.0
"""How long a list waits for servers still on their first attempt.

Hosts that list once at start-up and ignore change notices then still see
every server that starts promptly; a hanging server delays the answer by at
most this much, once (I12), and its entries follow with a change notice."""
SERVER_NAME: Final = "mcp-supervisor"
_UNTRACKED_METHODS: Final = frozenset({"subscriptions/listen"})
"""Requests that stay open by design; shutdown ends them instead of waiting for them."""
CALL_FAILURE_LOG_WINDOW_SEC: Final = 10.0
"""A down server fails every call: per (server, error kind), one warning per window and a count of the rest."""


class Front:
    """Host-facing MCP server over the Supervisor's Registry."""

    def __init__(self, supervisor: Supervisor, relay: Relay, view: CatalogView | None = None) -> None:
        """Build the Front's MCP server.

        Args:
            supervisor: Whose Registry and actors the Front serves.
            relay: Where upstream traffic for hosts goes (the same one the
                Supervisor's upstreams were given).
            view: What of the catalog its hosts see (default: everything).
        """
        self._supervisor = supervisor
        self._relay = relay
        self.view = view if view is not None else supervisor.views[""]
        """Every read of the catalog goes through it: a host of this Front sees this view and nothing else (I16)."""
        self._bus = relay.open_bus(self.view)
        self._listen = ListenHandler(self._bus)
        self._exchanges = ExchangeTable(relay.calls)
        self._routes = ResourceRoutes(supervisor, self.view)
        self._own_tools: OwnTools | None = None
        if self.view.code:
            from supervisor.host.code_mode import CodeMode  # noqa: PLC0415  (the code extra: a code view only)

            self._own_tools = CodeMode(self, self.view, self.wait_for_first_attempts)
        elif self.view.search:
            self._own_tools = CatalogSearch(self.view, self.wait_for_first_attempts)
        self._resource_subscriptions = ResourceSubscriptions(
            self.view,
            relay,
            self._listen,
            lambda uri: self.routed(f"resource {uri}", partial(self._routes.owner_of, uri)),
        )
        self._unanswered: set[types.RequestId] = set()
        """Ids of host requests whose handler has not returned yet."""
        self._idle = trio.Event()
        self._idle.set()
        self._shutting_down = False
        self.handshake_connection: Connection | None = None
        """The latest handshake-era host connection this Front serves (the stdio front's only host)."""
        relay.on_log_level(supervisor.set_log_level)
        relay.subscriptions.on_change(supervisor.set_subscriptions)
        self._call_failures = RateLimitedLog(logger, window_sec=CALL_FAILURE_LOG_WINDOW_SEC)
        self.tool_calls = ToolCalls(self)
        """The pipeline's driver: every call a task carries runs through it (``host.pipeline.driver``)."""
        self.lists = FrontLists(
            supervisor, self.view, stamp=lambda: self.server.server_info_stamp, wait=self.wait_for_first_attempts
        )
        """The lists, what hosts were answered (I22), the capabilities the view declares (``host.lists``)."""
        self.received = self.lists.received
        self.tools_list_cache = self.lists.tools_cache
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=__version__,
            instructions=instructions(supervisor.registry.rule.prefix),
            get_tool_input_schema=self.view.input_schema,
            on_list_tools=self.lists.list_tools,
            on_call_tool=partial(call_tool, self),
            on_list_prompts=self.lists.list_prompts,
            on_get_prompt=self._get_prompt,
            on_list_resources=self.lists.list_resources,
            on_list_resource_templates=self.lists.list_resource_templates,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._resource_subscriptions.subscribe,
            on_unsubscribe_resource=self._resource_subscriptions.unsubscribe,
            on_subscriptions_listen=self._resource_subscriptions.listen,
            on_completion=self._complete,
        )
        # Registered directly: `Server(on_set_logging_level=…)` is deprecated and warns at construction.
        self.server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self._set_log_level)
        self.server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, self._roots_changed
        )
        gate_sdk_tracing(self.server, sdk_span_needed)
        add_server_middleware(self.server, self._track_requests)
        add_server_middleware(self.server, self.lists.declare_capabilities)
        add_server_middleware(self.server, self.lists.answer_from_disk)
        add_server_middleware(self.server, self.tools_list_cache)
        self.init_options = self.server.create_initialization_options(
            NotificationOptions(tools_changed=True, prompts_changed=True, resources_changed=True)
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the change notifier, the exchanges and the own-warning delivery until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self._exchanges.run)
            notices = ChangeNotices(
                self.view,
                self._supervisor.catalog_changed,
                self._bus,
                self._relay.legacy,
                tools_list_cache=self.tools_list_cache,
                received=self.received,
                after_change=self.lists.warn_of_undeclared,
                started=self._supervisor.wait_first_attempts,
            )
            nursery.start_soon(notices.serve)
            nursery.start_soon(self._relay.serve_own_warnings)
            if self._own_tools is not None:
                await nursery.start(self._own_tools.serve)
            task_status.started()

    @property
    def supervisor(self) -> Supervisor:
        """Whose Registry and actors this Front serves."""
        return self._supervisor

    async def wait_for_first_attempts(self, bound_sec: float = FIRST_LIST_WAIT_SEC) -> None:
        """Wait, at most ``bound_sec`` (and never past the start-up bound), for servers still on their first attempt."""
        with trio.move_on_after(min(self._supervisor.startup_bound_sec, bound_sec)):
            await self._supervisor.wait_first_attempts()

    async def routed(self, what: str, route: Callable[[], T]) -> T:
        """``route()``, waiting for the first attempts before it answers "unknown" (``routing``: the one rule)."""
        return await route_when_known(what, route, self._supervisor)

    async def route_tool(self, public_name: str) -> tuple[RegisteredTool, ServerActor]:
        """The tool named ``public_name`` and its actor, once the first attempts allow saying it is unknown."""
        return await self._route_named("tool", public_name, self.route)

    async def _route_prompt(self, public_name: str) -> tuple[RegisteredPrompt, ServerActor]:
        return await self._route_named("prompt", public_name, partial(self._supervisor.route_prompt, view=self.view))

    async def _route_named(self, kind: str, name: str, lookup: Callable[[str], Routed | None]) -> Routed:
        """``lookup(name)`` through ``routed``: None is the "unknown" error, with why when a server is parked."""

        def route() -> Routed:
            found = lookup(name)
            if found is None:
                raise self.unknown(kind, name)
            return found

        found = await self.routed(f"{kind} {name}", route)
        await found[1].until_first_attempt_ends()  # a span or a path decided later then sees it ready
        return found

    def unknown(self, kind: str, name: str) -> MCPError:
        """-32602 for a name nothing routes; says why when its server is parked (needs login, gave up) or pinning
        withholds it (I17: a changed, new or flagged definition, with the commands that review and approve it)."""
        for actor in self._supervisor.actors.values():
            if not self.view.shows_server(actor.name):
                continue
            own = f"{self._supervisor.registry.rule.prefix}{actor.name}__"
            if actor.status.state in ("needs_login", "failed") and name.startswith(own):
                return MCPError(INVALID_PARAMS, f"Unknown {kind}: {name}: {actor.status.unavailable_message()}")
            if (withheld := actor.withheld_reason(kind, name)) is not None:
                return MCPError(INVALID_PARAMS, f"Unknown {kind}: {name}: {withheld}")
        return MCPError(INVALID_PARAMS, f"Unknown {kind}: {name}")

    # -- what every tools/call path shares (the runner's and the splice's) ----------

    @property
    def shutting_down(self) -> bool:
        """Whether new calls are refused (``begin_shutdown`` was called)."""
        return self._shutting_down

    def route(self, public_name: str) -> tuple[RegisteredTool, ServerActor] | None:
        """The view's tool named ``public_name`` and the actor serving it, or None."""
        return self._supervisor.route(public_name, self.view)

    @property
    def exchanges(self) -> ExchangeTable:
        """The open input-round exchanges of this Front's 2026-era hosts (the wire splice promotes calls into it)."""
        return self._exchanges

    @property
    def calls(self) -> CallTracker:
        """Which host calls are in flight where (the wire splice counts its calls to handshake-era servers here)."""
        return self._relay.calls

    def connection_log_level(self, connection: Connection) -> types.LoggingLevel | None:
        """The level a handshake-era host set with ``logging/setLevel`` (None: it never did)."""
        return self._relay.legacy.level_of(connection)

    @property
    def own_tools(self) -> OwnTools | None:
        """The view's own two tools: a search view's (``host.catalog_search``), a code view's (``host.code_mode``)."""
        return self._own_tools

    def note_call(self, tool: RegisteredTool, outcome: CallOutcome, seconds: float) -> None:
        """Count one finished tools/call in the metrics."""
        self._supervisor.metrics.call_finished(tool.owner, outcome, seconds)

    def note_call_failure(self, tool: RegisteredTool, kind: str, text: str) -> None:
        """Warn (rate-limited per server and kind) that a call failed upstream with ``text``."""
        self._call_failures.warning(
            (tool.owner, kind),
            "server=%s tool=%s call failed: %s", tool.owner, tool.raw_name, text,
            extra={"server": tool.owner, "tool": tool.raw_name},
        )  # fmt: skip

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        prompt, actor = await self._route_prompt(params.name)
        return await self._forward_or_error(
            ctx,
            actor,
            f"prompts/get {params.name}",
            lambda call: actor.get_prompt(prompt.raw_name, params.arguments, call),
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        uri = str(params.uri)
        actor = await self.routed(f"resource {uri}", lambda: self._routes.owner_of(uri))
        return await self._forward_or_error(
            ctx, actor, f"resources/read {uri}", lambda call: actor.read_resource(uri, call)
        )

    async def _complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        actor: ServerActor
        if isinstance(ref, types.PromptReference):
            prompt, actor = await self._route_prompt(ref.name)
            upstream_ref: types.PromptReference | types.ResourceTemplateReference = types.PromptReference(
                name=prompt.raw_name
            )
        else:
            template = ref.uri
            actor = await self.routed(f"template {template}", lambda: self._routes.template_owner(template))
            upstream_ref = ref
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        try:
            return await actor.complete(upstream_ref, argument, context)
        except UpstreamError as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from exc

    async def _forward_or_error(
        self,
        ctx: ServerRequestContext[Any],
        actor: ServerActor,
        what: str,
        request: Callable[[HostCall], Awaitable[T]],
    ) -> T:
        """``_forward`` for requests whose result has no ``isError``: upstream trouble is a JSON-RPC -32603."""
        if self._shutting_down:
            raise MCPError(INTERNAL_ERROR, "mcp-supervisor is shutting down; the request was not started")
        try:
            return await self.forward(ctx, actor, what, request)
        except UpstreamError as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from exc

    async def forward(
        self,
        ctx: ServerRequestContext[Any],
        actor: ServerActor,
        what: str,
        request: Callable[[HostCall], Awaitable[T]],
    ) -> T:
        """Run ``request`` for the host request ``ctx`` as a ``HostCall`` on ``actor``."""
        call = HostCall(ctx, actor.name, connection_log_level=self._connection_log_level(ctx))
        if call.modern_host and not actor.upstream_modern:
            result: T = await self._exchanges.serve(call, what, lambda: request(call))
            return result
        with self._relay.calls.serving(call):
            return await request(call)

    def _connection_log_level(self, ctx: ServerRequestContext[Any]) -> types.LoggingLevel | None:
        if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        return self._relay.legacy.level_of(connection_of(ctx.session))

    def remember_url_elicitations(self, ctx: ServerRequestContext[Any], actor: ServerActor, error: MCPError) -> None:
        """A -32042 names URL elicitations; their completion notices must reach this host."""
        if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return
        data = error.error.data if isinstance(error.error.data, dict) else {}
        for elicitation in data.get("elicitations") or []:
            if isinstance(elicitation, dict) and isinstance(elicitation.get("elicitationId"), str):
                call = HostCall(ctx, actor.name)
                self._relay.remember_elicitation(elicitation["elicitationId"], call)

    # -- subscriptions and logging ----------------------------------------------------

    async def _roots_changed(self, ctx: ServerRequestContext[Any], params: types.NotificationParams) -> None:
        """A handshake host's roots changed: every server it sees may have cached them (each actor tells its own)."""
        for actor in self._supervisor.actors.values():
            if self.view.shows_server(actor.name):
                actor.notify_roots_changed()
        await trio.lowlevel.checkpoint()

    async def _set_log_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self._relay.legacy.set_level(connection_of(ctx.session), params.level, self.view)
        return types.EmptyResult()

    # -- request tracking (shutdown) and handshake-era connections --------------------

    async def _track_requests(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        request_id = ctx.request_id
        tracked = request_id is not None and ctx.method not in _UNTRACKED_METHODS
        if tracked and request_id is not None:
            self._unanswered.add(request_id)
            self._idle = trio.Event() if len(self._unanswered) == 1 else self._idle
        try:
            result = await call_next(ctx)
        finally:
            if tracked and request_id is not None:
                self._settle(request_id)
        if ctx.method == "notifications/initialized" and ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            # The SDK builds a new ServerSession per request; the connection lives as long as the host's session.
            self.handshake_connection = connection_of(ctx.session)
            self._relay.legacy.capture(self.handshake_connection, self.view)
        return result

    def _settle(self, request_id: types.RequestId) -> None:
        self._unanswered.discard(request_id)
        if not self._unanswered:
            self._idle.set()

    def http_session(self, session_id: str) -> Connection | None:
        """The initialized connection of a handshake-era HTTP host's session (``host.http.sessions``)."""
        return self._relay.legacy.of_session(session_id)

    @property
    def legacy_hosts(self) -> int:
        """How many handshake-era host connections are open (tests read it)."""
        return len(self._relay.legacy)

    # -- shutdown ---------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """Refuse new calls from now on and end the hosts' listen streams."""
        self._shutting_down = True
        self._listen.close()

    async def wait_idle(self) -> None:
        """Return when every request handler already running has returned."""
        await self._idle.wait()
