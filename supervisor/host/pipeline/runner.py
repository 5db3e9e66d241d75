"""The runner of every call a task carries, and the SDK path's ``tools/call`` handler over it (issues 11, 47).

``ToolCalls.call_tool_wire`` runs one call: the stages of ``host.pipeline.stages``
(transform, spans, output schema, shape, settle) around the actor's upstream
leg. Its callers: the SDK's handler (``ToolCalls.call_tool``, which alone waits
for the first attempts to route a name, and gives the SDK's server a model), and
through ``reply`` (the JSON-RPC answer, each era's SDK error mapping) the fronts'
own tasks: ``host.stdio.tasks``, ``host.http.posts``, ``host.http.sessions``.
Which call takes which way is ``host.pipeline.paths``'s table.

Every call keeps, with the same texts: the shutdown refusal,
``tool_timeout_sec``, error translation (an ``UpstreamError`` becomes an error
result, a server's JSON-RPC error passes through), the unknown-tool heal (I8),
metrics and the rate-limited failure warning, a 2026 ``input_required`` result
passed through unchanged, and the host's trace context (I18: ``TaskTrace``).

Concurrency: each call runs in its caller's own task (the host's cancellation
cancels the upstream request); no state here beyond the Front's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast

import mcp_types as types
import trio
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.runner import modern_error_data
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import URL_ELICITATION_REQUIRED, ErrorData
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from supervisor.calls.attribution import HostCall
from supervisor.calls.results import CallOutcome, sieved
from supervisor.catalog.registry import RegisteredTool
from supervisor.errors import UpstreamError, UpstreamTimeout
from supervisor.host.pipeline.stages import FrontKind, TaskTrace, check_output, outbound, settle, shaped
from supervisor.server_actor import ServerActor
from supervisor.telemetry.spans import TELEMETRY

T = TypeVar("T")
logger = logging.getLogger(__name__)

ToolCallResult = types.CallToolResult | types.InputRequiredResult | dict[str, Any]
"""What a tools/call handler returns: a model, or the upstream's wire result (restamped)."""

SHUTTING_DOWN_TEXT = "mcp-supervisor is shutting down; the call was not started"


class OwnTools(Protocol):
    """A view's own tools: a search view's (``host.catalog_search.CatalogSearch``), a code view's
    (``host.code_mode.CodeMode``)."""

    def owns(self, name: str) -> bool: ...

    async def serve(self, *, task_status: trio.TaskStatus[None] = ...) -> None:
        """What they hold while the Front runs (a code view: the sandbox's workers)."""

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
    def own_tools(self) -> OwnTools | None: ...

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
    """The SDK path's ``tools/call`` handler and every task-run call's runner, over one Front."""

    def __init__(self, front: CallingFront) -> None:
        self._front = front

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The SDK path: the SDK's server hands the request over as its model and takes the result as one; in
        between, the call is ``call_tool_wire``'s, like every other."""
        front = self._front
        if front.shutting_down:
            return error_result(SHUTTING_DOWN_TEXT)
        own = front.own_tools
        if own is not None and own.owns(params.name):
            return await own.call(ctx, params, self.call_tool)
        # Right after start a host may call before every server has listed its tools: the
        # host asked for this very tool, so the route waits for the first attempts (``routing``).
        tool, actor = await front.route_tool(params.name)
        result = await self.call_tool_wire(ctx, tool, actor, params.arguments)
        try:  # the SDK's handler returns its model (its server sieves and stamps it)
            if result.get("resultType") == "input_required":
                return types.InputRequiredResult.model_validate(result)
            return types.CallToolResult.model_validate(result)
        except ValidationError as exc:  # shaped like a result (``wire_result_shaped``), but not a valid one
            what = f"tools/call {tool.raw_name}"
            return error_result(
                f"server {actor.name!r}: {what} returned an invalid result ({exc.error_count()} errors)"
            )

    async def call_tool_wire(
        self,
        ctx: ServerRequestContext[Any],
        tool: RegisteredTool,
        actor: ServerActor,
        arguments: dict[str, Any] | None,
        *,
        own_span: FrontKind | None = None,
    ) -> dict[str, Any]:
        """Every call's runner: the result as the upstream's JSON object, in the host's era's shape (restamped
        for a 2026-era host, ``handshake_shaped`` for a handshake-era one).

        Always the result's wire dict, ours included (the HTTP front's own answer
        writes it as it is: ``host.http.posts``). ``own_span``: the front of a
        call the SDK's server does not see (a front's own answer): with telemetry on,
        its SERVER span is ours (``telemetry.spans.start_host_call``), not the SDK's.
        """
        modern_host = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if self._front.shutting_down:
            finished: ToolCallResult = error_result(SHUTTING_DOWN_TEXT)
        else:
            upstream_arguments = outbound(tool, arguments)

            async def send(call: HostCall) -> dict[str, Any]:
                result = await actor.call_tool_wire(tool.raw_name, upstream_arguments, call)
                check_output(tool, result)
                return result

            result: Any = await self._run(
                ctx, tool, actor, send, _is_error_wire, arguments=arguments, own_span=own_span
            )
            if isinstance(result, dict) and not modern_host:
                return shaped(result, None)
            finished = self._finished(result)
        if isinstance(finished, dict):
            return finished
        # A model here is the SDK's to sieve, but the fast path short-circuits the SDK's serialization.
        sieve = sieved("tools/call", ctx.protocol_version, finished)
        return shaped(sieve, self._front.server.server_info_stamp) if modern_host else sieve

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
            return shaped(result, self._front.server.server_info_stamp)
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
        own_span: FrontKind | None = None,
    ) -> T | str:
        """Forward one tools/call; an ``UpstreamError`` comes back as its message (the caller makes the error result).

        Both paths share this: the failure warning (rate-limited), the metrics
        outcome, the URL-elicitation bookkeeping, the error rule, and the spans.
        """
        front = self._front
        started = trio.current_time()
        outcome: CallOutcome = "cancelled"
        result: T | None = None
        error: MCPError | None = None
        failure: tuple[str, str] | None = None
        spans = None
        if TELEMETRY.on:  # off: this check is all the telemetry a call costs
            spans = TaskTrace(tool, actor, ctx, own=own_span, arguments=arguments)
            send = spans.around(actor, send, is_error)
        try:
            result = await front.forward(ctx, actor, f"tools/call {tool.key}", send)
            outcome = "tool_error" if is_error(result) else "ok"
            return result
        except UpstreamError as exc:
            outcome = "timeout" if isinstance(exc, UpstreamTimeout) else "unavailable"
            failure = (type(exc).__name__, str(exc))
            return str(exc)
        except MCPError as exc:
            outcome, error = "rpc_error", exc
            if exc.code == URL_ELICITATION_REQUIRED:
                front.remember_url_elicitations(ctx, actor, exc)
            raise
        except Exception:  # the host gets the SDK's error for it (an output schema not met, say)
            outcome = "rpc_error"
            raise
        finally:
            settle(front, tool, outcome, started, failure=failure)
            if spans is not None:
                spans.end(outcome, result, error)


async def reply(
    run: Callable[..., Awaitable[dict[str, Any]]],
    ctx: ServerRequestContext[Any],
    tool: RegisteredTool,
    actor: ServerActor,
    arguments: dict[str, Any] | None,
    *,
    own_span: FrontKind,
) -> dict[str, Any]:
    """The JSON-RPC reply to a call a front's own task runs (``run``: ``ToolCalls.call_tool_wire``): its result, or
    the error the SDK would answer for what it raised, by the host's era (its runner's mapping, or its dispatcher's).
    """
    answer: dict[str, Any] = {"jsonrpc": "2.0", "id": ctx.request_id}
    try:
        answer["result"] = await run(ctx, tool, actor, arguments, own_span=own_span)
    except Exception as exc:  # what the SDK maps, mapped the same way
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        error = modern_error_data(exc) if modern else handshake_error_data(exc)
        answer["error"] = error.model_dump(mode="json", exclude_none=True)
    return answer


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
