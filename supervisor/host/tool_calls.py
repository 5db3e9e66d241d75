"""The code that runs a host's ``tools/call`` on the SDK path and on the fast path (issue 11).

Which path a call takes is decided in one place, ``host.call_paths`` (its
table says which calls take the splice, which the fast path, and which the SDK
path, and why); ``tests/host/test_tool_call_paths.py`` pins each row.

Every path keeps what a call must keep, with the same texts: routing through
the Registry, the shutdown refusal, ``tool_timeout_sec``, error translation (an
``UpstreamError`` becomes an error result, a server's JSON-RPC error passes
through), the unknown-tool heal (I8), metrics and the rate-limited failure
warning (``Front.note_call``, ``Front.note_call_failure``), a 2026
``input_required`` result passed through unchanged, and the host's trace
context (I18): with telemetry off it goes upstream unchanged; on, the host's
request has a SERVER span parented on it (here: the SDK middleware's, annotated
by ``_traced``), and the upstream request a CLIENT span whose context goes
upstream instead (``telemetry.spans``).

Concurrency: each call runs in its handler's own task (the host's cancellation
cancels the upstream request); no state here beyond the Front's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypeVar, cast

import mcp_types as types
import trio
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import URL_ELICITATION_REQUIRED, ErrorData
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry.context import Context

from supervisor.calls.attribution import HostCall
from supervisor.calls.results import CallOutcome, handshake_shaped, sieved
from supervisor.catalog.registry import RegisteredTool
from supervisor.errors import UpstreamError, UpstreamTimeout
from supervisor.host.fast_path import restamp
from supervisor.server_actor import ServerActor
from supervisor.telemetry.spans import (
    TELEMETRY,
    CallSpan,
    annotate_host_call,
    covering_call,
    current_context,
    host_call_ended,
    start_client_call,
    start_host_call,
    trace_carrier,
)

T = TypeVar("T")
Front = Literal["stdio", "http"]
logger = logging.getLogger(__name__)

ToolCallResult = types.CallToolResult | types.InputRequiredResult | dict[str, Any]
"""What a tools/call handler returns: a model, or the upstream's wire result (restamped)."""

SHUTTING_DOWN_TEXT = "mcp-supervisor is shutting down; the call was not started"


class OwnTools(Protocol):
    """A search view's own tools (``host.catalog_search.CatalogSearch``)."""

    def owns(self, name: str) -> bool: ...

    async def call(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        call_tool: Callable[
            [ServerRequestContext[Any], types.CallToolRequestParams],
            Awaitable[types.CallToolResult | types.InputRequiredResult],
        ],
    ) -> types.CallToolResult | types.InputRequiredResult: ...


class CallingFront(Protocol):
    """What a tools/call needs of the Front (``host.front.Front``)."""

    @property
    def shutting_down(self) -> bool: ...

    @property
    def server(self) -> Server[Any]: ...

    @property
    def search(self) -> OwnTools | None: ...

    def note_call(self, tool: RegisteredTool, outcome: CallOutcome, seconds: float) -> None: ...

    def note_call_failure(self, tool: RegisteredTool, kind: str, text: str) -> None: ...

    async def route_tool(self, public_name: str) -> tuple[RegisteredTool, ServerActor]: ...

    async def forward(
        self, ctx: ServerRequestContext[Any], actor: ServerActor, what: str, request: Callable[[HostCall], Awaitable[T]]
    ) -> T: ...

    def remember_url_elicitations(
        self, ctx: ServerRequestContext[Any], actor: ServerActor, error: MCPError
    ) -> None: ...


class ToolCalls:
    """The SDK path's ``tools/call`` handler and the fast path's runner, over one Front."""

    def __init__(self, front: CallingFront) -> None:
        self._front = front

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The SDK path: the request and result as the SDK's models."""
        front = self._front
        if front.shutting_down:
            return error_result(SHUTTING_DOWN_TEXT)
        search = front.search
        if search is not None and search.owns(params.name):
            return await search.call(ctx, params, self.call_tool)
        # Right after start a host may call before every server has listed its tools: the
        # host asked for this very tool, so the route waits for the first attempts (``routing``).
        tool, actor = await front.route_tool(params.name)
        arguments = tool.upstream_arguments(params.arguments)

        async def send(call: HostCall) -> types.CallToolResult | types.InputRequiredResult:
            return await actor.call_tool(tool.raw_name, arguments, call)

        result: Any = await self._run(ctx, tool, actor, send, _is_error_model, arguments=params.arguments)
        finished = self._finished(result)
        return types.CallToolResult.model_validate(finished) if isinstance(finished, dict) else finished

    async def call_tool_wire(
        self,
        ctx: ServerRequestContext[Any],
        tool: RegisteredTool,
        actor: ServerActor,
        arguments: dict[str, Any] | None,
        *,
        own_span: Front | None = None,
    ) -> dict[str, Any]:
        """The fast path (``host.fast_path``): the same call, the result as the upstream's JSON object, in the
        host's era's shape: restamped for a 2026-era host, ``handshake_shaped`` for a handshake-era one.

        Always the result's wire dict, ours included (the HTTP front's own answer
        writes it as it is: ``host.http_fast_calls``). ``own_span``: the front of a
        call the SDK's server does not see (a front's own answer): with telemetry on,
        its SERVER span is ours (``telemetry.spans.start_host_call``), not the SDK's.
        """
        modern_host = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if self._front.shutting_down:
            finished: ToolCallResult = error_result(SHUTTING_DOWN_TEXT)
        else:
            upstream_arguments = tool.upstream_arguments(arguments)

            async def send(call: HostCall) -> dict[str, Any]:
                return await actor.call_tool_wire(tool.raw_name, upstream_arguments, call)

            result: Any = await self._run(
                ctx, tool, actor, send, _is_error_wire, arguments=arguments, own_span=own_span
            )
            if isinstance(result, dict) and not modern_host:
                return handshake_shaped(result)
            finished = self._finished(result)
        if isinstance(finished, dict):
            return finished
        # A model here is the SDK's to sieve, but the fast path short-circuits the SDK's serialization.
        shaped = sieved("tools/call", ctx.protocol_version, finished)
        return restamp(shaped, self._front.server.server_info_stamp) if modern_host else shaped

    def _finished(self, result: Any) -> ToolCallResult:
        """What the host gets: an error result for an ``UpstreamError``'s text, a wire result restamped.

        Either path may get either shape: an exchange (a 2026-era host of a
        handshake-era server) answers a retry round on the SDK path with the
        fast path's wire dict, and the fast path's first round with its input
        round, a model.
        """
        if isinstance(result, str):
            return error_result(result)
        if isinstance(result, dict):
            return restamp(result, self._front.server.server_info_stamp)
        return cast(types.CallToolResult | types.InputRequiredResult, result)

    async def _run(
        self,
        ctx: ServerRequestContext[Any],
        tool: RegisteredTool,
        actor: ServerActor,
        send: Callable[[HostCall], Awaitable[T]],
        is_error: Callable[[T], bool],
        *,
        arguments: dict[str, Any] | None,
        own_span: Front | None = None,
    ) -> T | str:
        """Forward one tools/call; an ``UpstreamError`` comes back as its message (the caller makes the error result).

        Both paths share this: the failure warning (rate-limited), the metrics
        outcome, the URL-elicitation bookkeeping, the error rule, and the spans.
        """
        front = self._front
        started = trio.current_time()
        outcome: CallOutcome = "cancelled"
        result: T | None = None
        host_span = None
        own: CallSpan | None = None
        error: MCPError | None = None
        if TELEMETRY.on:  # off: this check is all the telemetry a call costs
            stdio = ctx.request is None if own_span is None else own_span == "stdio"
            if own_span is not None:
                own = start_host_call(
                    tool.key, ctx.request_id, trace_carrier(ctx.meta), server=actor.name,
                    generation=actor.status.generation, host_version=ctx.protocol_version, stdio=stdio,
                    arguments=arguments,
                )  # fmt: skip
            else:
                host_span = annotate_host_call(
                    server=actor.name, generation=actor.status.generation, stdio=stdio, arguments=arguments
                )
            send = _traced(
                tool, actor, send, is_error, arguments, parent=current_context() if own is None else own.context
            )
        try:
            result = await front.forward(ctx, actor, f"tools/call {tool.key}", send)
            outcome = "tool_error" if is_error(result) else "ok"
            return result
        except UpstreamError as exc:
            outcome = "timeout" if isinstance(exc, UpstreamTimeout) else "unavailable"
            front.note_call_failure(tool, type(exc).__name__, str(exc))
            return str(exc)
        except MCPError as exc:
            outcome, error = "rpc_error", exc
            if exc.code == URL_ELICITATION_REQUIRED:
                front.remember_url_elicitations(ctx, actor, exc)
            raise
        finally:
            front.note_call(tool, outcome, trio.current_time() - started)
            if host_span is not None:
                host_call_ended(host_span, outcome, result)
            elif own is not None:
                code, message = (error.code, error.error.message) if error is not None else (None, None)
                own.end(outcome, code=code, message=message, result=result)


def _traced(
    tool: RegisteredTool,
    actor: ServerActor,
    send: Callable[[HostCall], Awaitable[T]],
    is_error: Callable[[T], bool],
    arguments: dict[str, Any] | None,
    *,
    parent: Context,
) -> Callable[[HostCall], Awaitable[T]]:
    """``send`` inside a CLIENT span for the upstream request, parented on the host's SERVER span.

    The span is made where the request runs: in the handler's task, or in an
    exchange's (a 2026-era host of a handshake-era server, ``host.exchanges``),
    so the parent (the host call's SERVER span) is taken in the handler. It covers what the actor does
    for the call (the fail-fast of a server that is not ready, the
    ``tool_timeout_sec`` bound), so a timeout and an unavailable server have
    their ``error.type`` too. The host's arguments are recorded (with
    ``capture_content``), never what a transform injected.
    """
    stdio = actor.settings.transport == "stdio"

    async def traced_send(call: HostCall) -> T:
        status = actor.status
        span = start_client_call(
            tool.raw_name,
            server=actor.name,
            generation=status.generation,
            protocol_version=status.protocol_version,
            stdio=stdio,
            parent=parent,
            arguments=arguments,
        )
        with covering_call(span, tool.raw_name):
            try:
                result = await send(call)
            except BaseException as exc:
                _end_failed(span, exc)
                raise
        span.end("tool_error" if is_error(result) else "ok", result=result)
        return result

    return traced_send


def _end_failed(span: CallSpan, exc: BaseException) -> None:
    """End an upstream request's CLIENT span that raised ``exc``: the same outcomes as the metrics count."""
    if isinstance(exc, UpstreamTimeout):
        span.end("timeout")
    elif isinstance(exc, UpstreamError):
        span.end("unavailable")
    elif isinstance(exc, MCPError):
        span.end("rpc_error", code=exc.code, message=exc.error.message)
    elif isinstance(exc, Exception):
        span.end("error", error_type=type(exc).__qualname__)
    else:  # cancelled: the host gave up, or the sidecar is stopping
        span.end("cancelled")


def _is_error_model(result: types.CallToolResult | types.InputRequiredResult | dict[str, Any]) -> bool:
    if isinstance(result, dict):
        return result.get("isError") is True
    return isinstance(result, types.CallToolResult) and result.is_error


def _is_error_wire(result: dict[str, Any] | types.InputRequiredResult) -> bool:
    return isinstance(result, dict) and result.get("isError") is True


def error_result(text: str) -> types.CallToolResult:
    """The error result a host gets for a call that failed before or upstream (the general path's text)."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def handshake_error_data(exc: Exception) -> ErrorData:
    """What the SDK's dispatcher answers a handshake-era request whose handler raised ``exc``: its ladder, then its
    catch-all (code 0 and the exception's text, its compatibility rule)."""
    error = handler_exception_to_error_data(exc)
    if error is not None:
        return error
    logger.exception("a fast-path call of a handshake-era host raised")  # as the SDK logs it
    return ErrorData(code=0, message=str(exc))
