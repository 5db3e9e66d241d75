"""One upstream generation: a transport plus one connected ``mcp.Client``.

``Upstream`` is what the ServerActor holds of a generation (``seams.UpstreamSession``);
``upstream.connect.open_upstream`` opens one. Its methods translate SDK and
transport failures into the supervisor's ``UpstreamError`` family exactly once,
here.

What crosses, per direction (DESIGN I13):

* **Catalog.** ``list_all`` fetches every page of one kind (tools, prompts,
  resources, templates) through ``upstream.listing`` (``tools/list`` on a raw
  path); tools and prompts go through the shared response cache (I4),
  resource lists always ``bypass`` it (I9).
* **Requests for a host call** (``call_tool``, ``get_prompt``,
  ``read_resource``, ``complete``) carry the host's progress wish (a progress
  token of ours), its trace context (I18) and, to a 2026-era server, its log
  level in ``_meta``. The call's progress and request-scoped log notices reach
  its host in wire order, before its result: on our own POST's stream as they
  come, else through the transport tap (``upstream.tap``) into its ``CallNotices``.
  A 2026-era server's ``InputRequiredResult`` is passed through to a 2026-era host unchanged (it runs the
  round and retries with the same ``requestState``), and driven for a handshake-era host with its own
  connection answering each embedded request (``HostSide.ask_host``).
* **Server→client requests** of a handshake-era server (sampling, elicitation,
  roots) go to ``HostSide.ask_host``, which attributes them (``calls.attribution``).
* **Notices.** Change notices differ by era (DESIGN §7): handshake-era servers
  send them to ``message_handler``; 2026-era servers deliver them only on an
  open ``subscriptions/listen`` stream, which ``upstream.listen.serve_listen``
  holds for the generation (re-opened when the subscribed resource URIs change).
  ``on_list_changed(kind)`` must not block. Log messages, resource updates and
  URL-elicitation completions go to the ``HostSide``.

Nursery: a host call not on our own POST has a short-lived nursery for its ``CallNotices`` pump
(``NoticeRoutes.pumped``); nothing else here owns a task. Waits are unbounded on purpose: the
ServerActor bounds requests with ``tool_timeout_sec``.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, cast

import mcp_types as types
import trio
from mcp import Client
from mcp.client.caching import CacheMode
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from supervisor._version import __version__
from supervisor.calls.attribution import HostCall, HostSide, no_host_error
from supervisor.calls.results import strip_server_stamp, wire_result_shaped
from supervisor.catalog.registry import Definition, Kind
from supervisor.catalog.semantic import about_line
from supervisor.compat.sdk import (
    DEFAULT_INPUT_REQUIRED_MAX_ROUNDS,
    run_input_required_driver,
    send_raw_request,
    stamp_request,
)
from supervisor.config.servers import ServerSettings
from supervisor.errors import UpstreamProtocolError
from supervisor.telemetry.spans import about_server, trace_carrier
from supervisor.upstream.call_notices import NoticeRoutes
from supervisor.upstream.errors import ErrorTranslator
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.http_calls import HttpCalls
from supervisor.upstream.listen import ListenFilter
from supervisor.upstream.listing import list_all
from supervisor.upstream.splice import UpstreamSplice

logger = logging.getLogger(__name__)

CLIENT_INFO: Final = types.Implementation(name="mcp-supervisor", version=__version__)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who answered: ``name@version`` as reported, or None for an anonymous server."""

    name: str | None
    version: str | None

    def __str__(self) -> str:
        if self.name is None:
            return "anonymous"
        return f"{self.name}@{self.version or '?'}"


class Upstream:
    """A connected generation of one server. Created only by ``open_upstream``."""

    def __init__(
        self, settings: ServerSettings, client: Client, health: TransportHealth, host: HostSide | None
    ) -> None:
        self._settings = settings
        self._client = client
        self._host = host
        self.health = health
        self.change_notices = True
        """False when this generation gets no change notices (a 2026-era server that never acknowledged listen)."""
        self.listen_filter = ListenFilter()
        self._subscribed: frozenset[str] = frozenset()
        self._subscribing = trio.Lock()
        self._log_level: types.LoggingLevel | None = None
        self.notice_routes = NoticeRoutes(settings.name, host, modern=self.modern)
        self.splice: UpstreamSplice | None = None
        """The stdio wire splice's end of this generation (``host.stdio.reader``); None over HTTP."""
        self.http_calls: HttpCalls | None = None
        """The fast path's own POST to this generation (``upstream.http_calls``): 2026-era streamable HTTP only."""

    # -- what this generation is ------------------------------------------------------

    @property
    def protocol_version(self) -> str:
        return self._client.protocol_version

    @property
    def modern(self) -> bool:
        return self._client.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def identity(self) -> Identity:
        info = self._client.server_info
        return Identity(None, None) if info is None else Identity(info.name, info.version)

    @property
    def about(self) -> str:
        """One line of what the server says it does (``serverInfo.description``, else ``instructions``)."""
        return about_line(getattr(self._client.server_info, "description", None), self._client.instructions)

    @property
    def kinds(self) -> frozenset[Kind]:
        """The catalog kinds this server offers (from its capabilities; tools are always asked for)."""
        capabilities = self._client.server_capabilities
        kinds: set[Kind] = {"tools"}
        if capabilities.prompts is not None:
            kinds.add("prompts")
        if capabilities.resources is not None:
            kinds.update(("resources", "templates"))
        return frozenset(kinds)

    # -- catalog -----------------------------------------------------------------------

    async def list_all(self, kind: Kind, cache_mode: CacheMode) -> list[Definition]:
        """Fetch every page of one kind's listing (``upstream.listing.list_all``), handed over as an ``OwnedListing``.

        Raises:
            UpstreamUnavailable: The connection died.
            UpstreamProtocolError: The server answered with an error, an invalid
                listing, more than ``max_tools`` entries, or pages without end.
        """
        with about_server(self._settings.name):  # its requests' spans name the server (telemetry on)
            return await list_all(self._client, self._settings, kind, cache_mode, self._translate_errors)

    # -- requests for a host call --------------------------------------------------------

    async def call_tool(
        self, raw_name: str, arguments: dict[str, Any] | None, call: HostCall | None = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """``call_tool_wire``'s result as the SDK's model, without the server's ``serverInfo`` stamp (the one-shot
        ``call`` command prints it).

        An ``MCPError`` the server answered with is re-raised unchanged (the host
        must see the original error); a dead connection becomes ``UpstreamUnavailable``.
        """
        result = await self.call_tool_wire(raw_name, arguments, call)
        with self._translate_errors(f"tools/call {raw_name}"):
            if result.get("resultType") == "input_required":
                return types.InputRequiredResult.model_validate(result)
            return cast(types.CallToolResult, strip_server_stamp(types.CallToolResult.model_validate(result)))

    def _tool_sender(
        self, raw_name: str, arguments: dict[str, Any] | None, call: HostCall | None
    ) -> Callable[[Any, Any, Any, Any], Awaitable[Any]]:
        """The one way a ``tools/call`` (a first request, or an input round's retry) goes to this generation.

        Its own POST to a 2026-era HTTP server (``upstream.http_calls``, which
        sends the call's CLIENT span's context too), else the SDK's session as a
        raw request: no request model, no result validation. An input round
        the sidecar runs itself (a handshake-era host of a 2026-era server, or
        no host) comes back as the SDK's model, which its round driver reads;
        anything else as the server's JSON object.
        """
        session = self._client.session
        what = f"tools/call {raw_name}"
        http = self.http_calls
        rounds_here = self.modern and (call is None or not call.modern_host)

        async def send(responses: Any, state: Any, meta: Any, progress: Any) -> Any:
            params: dict[str, Any] = {"name": raw_name}
            if arguments is not None:
                params["arguments"] = arguments
            if responses is not None:  # an input round's retry
                params["inputResponses"] = {
                    key: response.model_dump(by_alias=True, mode="json", exclude_none=True)
                    for key, response in responses.items()
                }
            if state is not None:
                params["requestState"] = state
            if meta:
                params["_meta"] = dict(meta)
            if http is None:
                result = await send_raw_request(session, "tools/call", params)
            else:
                headers = stamp_request(session, "tools/call", params)
                token = meta.get("progressToken") if meta else None
                notice = partial(self.notice_routes.forward, call=call, token=token)
                result = await http.request("tools/call", params, headers, notice)
            return self._input_round(what, result) if rounds_here else result

        return send

    async def call_tool_wire(
        self, raw_name: str, arguments: dict[str, Any] | None, call: HostCall | None
    ) -> dict[str, Any]:
        """Call one tool by its raw name for ``call``, the result as the server's raw JSON object.

        For a 2026-era host (of a server of either era), a handshake-era host (its
        input rounds, from a 2026-era server, run here: each round's request asked of
        the host, each retry sent by this path), or none (the one-shot command).
        The request skips the SDK's request model and the result its validation
        (the host side checks an ``outputSchema``: ``host.pipeline.stages.check_output``);
        errors translate once, here, and a result that is not even shaped like one
        is an ``UpstreamProtocolError``.
        """
        what = f"tools/call {raw_name}"
        send = self._tool_sender(raw_name, arguments, call)
        result: dict[str, Any] = await self._interactive(what, call, send, own_post=self.http_calls is not None)
        if not wire_result_shaped(result):
            name = self._settings.name
            raise UpstreamProtocolError(name, f"server {name!r}: {what} returned an invalid result")
        return result

    def _input_round(self, what: str, result: dict[str, Any]) -> dict[str, Any] | types.InputRequiredResult:
        """``result`` as it came, or, for an input round, the SDK's model of it (which its round driver reads)."""
        if result.get("resultType") != "input_required":
            return result
        try:
            return types.InputRequiredResult.model_validate(result)
        except ValidationError:
            name = self._settings.name
            raise UpstreamProtocolError(name, f"server {name!r}: {what} returned an invalid input round") from None

    async def finish_input_rounds(
        self, raw_name: str, arguments: dict[str, Any] | None, first: dict[str, Any], call: HostCall
    ) -> types.CallToolResult:
        """The rest of a call the wire splice sent, whose answer ``first`` is an input round (2026-era server).

        Its host is handshake-era (``call``): the rounds are run here, as for a
        call of ``call_tool_wire``, each request asked of the host, and the retries
        sent with the host's log level; the request that got ``first`` is not sent again.
        """
        what = f"tools/call {raw_name}"
        first_round = self._input_round(what, first)
        retry = self._tool_sender(raw_name, arguments, call)

        async def send(responses: Any, state: Any, meta: Any, progress: Any) -> Any:
            if responses is None and state is None:
                return first_round  # the splice's request: answered already
            return await retry(responses, state, meta, progress)

        result = await self._interactive(what, call, send)
        with self._translate_errors(what):
            if isinstance(result, dict) and wire_result_shaped(result) and result.get("resultType") != "input_required":
                return cast(types.CallToolResult, strip_server_stamp(types.CallToolResult.model_validate(result)))
        raise UpstreamProtocolError(self._settings.name, f"tools/call {raw_name}: input rounds without an end")

    async def get_prompt(
        self, raw_name: str, arguments: dict[str, str] | None, call: HostCall | None = None
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Get one prompt by its raw name for ``call`` (errors as in ``call_tool``)."""
        session = self._client.session

        async def send(
            responses: types.InputResponses | None, state: str | None, meta: Any, progress: Any
        ) -> types.GetPromptResult | types.InputRequiredResult:
            del progress  # prompts/get has no progress callback in the SDK
            return await session.get_prompt(
                raw_name,
                arguments,
                input_responses=responses,
                request_state=state,
                meta=meta,
                allow_input_required=True,
            )

        result = await self._interactive(f"prompts/get {raw_name}", call, send)
        return cast(types.GetPromptResult | types.InputRequiredResult, result)

    async def read_resource(
        self, uri: str, call: HostCall | None = None
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read one resource, always from the server (I9: the response cache is never involved)."""
        session = self._client.session

        async def send(
            responses: types.InputResponses | None, state: str | None, meta: Any, progress: Any
        ) -> types.ReadResourceResult | types.InputRequiredResult:
            del progress
            return await session.read_resource(
                uri, input_responses=responses, request_state=state, meta=meta, allow_input_required=True
            )

        result = await self._interactive(f"resources/read {uri}", call, send)
        return cast(types.ReadResourceResult | types.InputRequiredResult, result)

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None,
    ) -> types.CompleteResult:
        """Ask for completions of one argument."""
        with self._translate_errors("completion/complete", passthrough_server_errors=True):
            return await self._client.complete(ref=ref, argument=argument, context_arguments=context_arguments)

    async def _interactive(
        self,
        what: str,
        call: HostCall | None,
        send: Callable[[types.InputResponses | None, str | None, Any, Any], Awaitable[Any]],
        *,
        own_post: bool = False,
    ) -> Any:
        """Send for ``call`` with its trace context, log level and progress token; its notices go to its host.

        ``own_post``: ``send`` reads its notices in this task (``NoticeRoutes.forward``): no pump.
        """
        if call is None:
            return await self._send_and_drive(what, None, None, send)
        # The host's trace context goes upstream as it came; with telemetry on, the SDK's injection of the
        # current (our CLIENT) span then replaces traceparent and tracestate (``telemetry.spans``).
        meta: dict[str, Any] = trace_carrier(call.ctx.meta) or {}
        level = call.log_level
        if self.modern and level is not None:
            meta[LOG_LEVEL_META_KEY] = level
        if own_post:
            if call.wants_progress:
                meta["progressToken"] = self.notice_routes.new_token()
            return await self._send_and_drive(what, call, meta or None, send)
        if not call.wants_progress and (level is None or not (self.modern or call.modern_host)):
            # Nothing can reach this call's CallNotices (see ``tap``): no pump task, no nursery.
            return await self._send_and_drive(what, call, meta or None, send)
        return await self.notice_routes.pumped(call, meta, lambda: self._send_and_drive(what, call, meta or None, send))

    async def _send_and_drive(
        self,
        what: str,
        call: HostCall | None,
        meta: dict[str, Any] | None,
        send: Callable[[types.InputResponses | None, str | None, Any, Any], Awaitable[Any]],
    ) -> Any:
        passthrough = call is not None and call.modern_host and self.modern
        responses = call.input_responses if passthrough and call is not None else None
        state = call.request_state if passthrough and call is not None else None
        with self._translate_errors(what, passthrough_server_errors=True):
            first = await send(responses, state, meta, None)
            if isinstance(first, types.InputRequiredResult) and not passthrough:
                # A handshake-era host (or none): run the rounds here, the host answering each request.
                first = await run_input_required_driver(
                    first,
                    dispatch=self._dispatch_input_request,
                    retry=lambda r, s: send(r, s, meta, None),
                    max_rounds=DEFAULT_INPUT_REQUIRED_MAX_ROUNDS,
                )
        return first if isinstance(first, dict) else strip_server_stamp(first)

    def tap(self, message: types.JSONRPCNotification, context: contextvars.Context | None) -> None:
        """See each notification in wire order, before the SDK spawns its handlers (runs in the reader task)."""
        self.notice_routes.tap(message, context)

    async def _dispatch_input_request(
        self, key: str, request: types.InputRequest
    ) -> types.InputResponse | types.ErrorData:
        if self._host is None:
            return no_host_error(request.method)
        return await self._host.ask_host(self._settings.name, request)

    # -- standing state: log level, resource subscriptions -------------------------------

    async def set_log_level(self, level: types.LoggingLevel | None) -> None:
        """Ask a handshake-era server with logging for ``level`` (2026-era levels travel per request)."""
        if level is None or level == self._log_level or self.modern:
            return
        if self._client.server_capabilities.logging is None:
            return
        with self._translate_errors("logging/setLevel"):
            await self._client.session.send_request(
                types.SetLevelRequest(params=types.SetLevelRequestParams(level=level)), types.EmptyResult
            )
        self._log_level = level

    async def roots_changed(self) -> None:
        """Tell a handshake-era server the host's roots changed (2026 has none; the SDK's helper warns so)."""
        if not self.modern:
            with self._translate_errors("notifications/roots/list_changed"):
                await self._client.session.send_notification(types.RootsListChangedNotification())

    async def set_subscriptions(self, uris: frozenset[str]) -> None:
        """Make the server's resource subscriptions ``uris``; return once the server has them.

        Handshake era: subscribe the new URIs, unsubscribe the old. 2026 era: the
        listen stream is re-opened with the new set (``_serve_listen``).
        """
        async with self._subscribing:
            if self.modern:
                self.listen_filter.update(uris)
                if self.change_notices:
                    await self.listen_filter.wait_applied(uris)
                return
            await self._set_legacy_subscriptions(uris)

    async def _set_legacy_subscriptions(self, uris: frozenset[str]) -> None:
        capabilities = self._client.server_capabilities.resources
        if capabilities is None or not capabilities.subscribe:
            return
        session = self._client.session
        for uri in sorted(uris - self._subscribed):
            with self._translate_errors(f"resources/subscribe {uri}"):
                await session.send_request(
                    types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
                )
            self._subscribed |= {uri}
        for uri in sorted(self._subscribed - uris):
            with self._translate_errors(f"resources/unsubscribe {uri}"):
                await session.send_request(
                    types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)), types.EmptyResult
                )
            self._subscribed -= {uri}

    def _translate_errors(self, what: str, *, passthrough_server_errors: bool = False) -> ErrorTranslator:
        return ErrorTranslator(self._settings.name, what, self.health, passthrough_server_errors)
