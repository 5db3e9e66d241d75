"""The pipeline's one driver: every call a task carries runs its stages here, over one ``ToolCall`` (issues 47, 58).

``ToolCalls.run`` takes a call some runner built (``host.pipeline.call``) and
applies the stages of ``host.pipeline.stages`` in their order around the actor's
upstream leg:

=====  ==========================  ==================================================
order  stage                       here
=====  ==========================  ==================================================
0      shutdown refusal            ``SHUTTING_DOWN_TEXT``, before anything is sent
1      view wall, pin guard        done by the runner that routed the name (``Front.route``)
2      transform                   ``stages.outbound``
3      span                        ``stages.TaskTrace`` by the call's origin
4      envelope                    the upstream leg's (``Upstream._interactive``)
5      send, attribution           ``CallingFront.forward`` (a ``HostCall`` for the host's request)
6      heal (I8)                   the actor's leg (``HostRequests._call``)
7      output schema               ``stages.check_output``
8      shape                       ``stages.shaped`` by the host's era
9      settle                      ``stages.settle``, the spans' end
=====  ==========================  ==================================================

Its adapters build the call and write the reply: the SDK's handler and a front's
own task (``host.pipeline.adapters``), and a program's call in ``run_code``
(``host.code_mode``). The splice alone has no task per call and applies the same
stages synchronously (``host.pipeline.spliced``).

Every call keeps, with the same texts: the shutdown refusal, ``tool_timeout_sec``,
error translation (an ``UpstreamError`` becomes an error result, a server's
JSON-RPC error passes through), the unknown-tool heal, metrics and the
rate-limited failure warning, a 2026 ``input_required`` result passed through
unchanged, and the host's trace context (I18).

Concurrency: each call runs in its caller's own task (the host's cancellation
cancels the upstream request); no state here beyond the Front's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import mcp_types as types
import trio
from mcp import MCPError
from mcp_types import URL_ELICITATION_REQUIRED

from supervisor.calls.results import CallOutcome, sieved
from supervisor.errors import UpstreamError, UpstreamTimeout
from supervisor.host.pipeline.stages import TaskTrace, check_output, outbound, settle, shaped
from supervisor.telemetry.spans import TELEMETRY

if TYPE_CHECKING:
    from mcp.server import Server, ServerRequestContext

    from supervisor.calls.attribution import HostCall
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.host.pipeline.call import ToolCall
    from supervisor.server_actor import ServerActor

T = TypeVar("T")

ToolCallResult = types.CallToolResult | types.InputRequiredResult | dict[str, Any]
"""What a tools/call handler returns: a model, or the upstream's wire result (restamped)."""

SHUTTING_DOWN_TEXT = "mcp-supervisor is shutting down; the call was not started"


class DrivenFront(Protocol):
    """What the driver needs of the Front (``host.front.Front``)."""

    @property
    def shutting_down(self) -> bool: ...

    @property
    def server(self) -> Server[Any]: ...

    def note_call(self, tool: RegisteredTool, outcome: CallOutcome, seconds: float) -> None: ...

    def note_call_failure(self, tool: RegisteredTool, kind: str, text: str) -> None: ...

    async def forward(
        self, ctx: ServerRequestContext[Any], actor: ServerActor, what: str, request: Callable[[HostCall], Awaitable[T]]
    ) -> T: ...

    def remember_url_elicitations(
        self, ctx: ServerRequestContext[Any], actor: ServerActor, error: MCPError
    ) -> None: ...


class ToolCalls:
    """The driver over one Front: ``run`` is every task-carried call's way through the stages."""

    def __init__(self, front: DrivenFront) -> None:
        self._front = front

    async def run(self, call: ToolCall) -> dict[str, Any]:
        """Run ``call`` through the stages: the result as the upstream's JSON object, in the host's era's shape
        (restamped for a 2026-era host, ``handshake_shaped`` for a handshake-era one).

        Always the result's wire dict, ours included (the HTTP front's own answer
        writes it as it is: ``host.http.posts``). Raises what the host gets as a
        JSON-RPC error: the server's ``MCPError``, an output schema not met.
        """
        modern_host = call.modern
        if self._front.shutting_down:
            finished: ToolCallResult = error_result(SHUTTING_DOWN_TEXT)
        else:
            tool, actor = call.tool, call.actor
            upstream_arguments = outbound(tool, call.arguments)

            async def send(host_call: HostCall) -> dict[str, Any]:
                result = await actor.call_tool_wire(tool.raw_name, upstream_arguments, host_call)
                check_output(tool, result)
                return result

            result: Any = await self._forward(call, send)
            if isinstance(result, dict) and not modern_host:
                return shaped(result, None)
            finished = self._finished(result)
        if isinstance(finished, dict):
            return finished
        # A model here is the SDK's to sieve, but the fast path short-circuits the SDK's serialization.
        sieve = sieved("tools/call", call.host.protocol_version, finished)
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

    async def _forward(self, call: ToolCall, send: Callable[[HostCall], Awaitable[T]]) -> T | str:
        """Send ``call`` on its actor for its host's request; an ``UpstreamError`` comes back as its message (the
        caller makes the error result).

        The span, attribution and settle stages: the failure warning
        (rate-limited), the metrics outcome, the URL-elicitation bookkeeping,
        the error rule, and the spans.
        """
        front, tool, actor, ctx = self._front, call.tool, call.actor, call.host
        started = trio.current_time()
        outcome: CallOutcome = "cancelled"
        result: T | None = None
        error: MCPError | None = None
        failure: tuple[str, str] | None = None
        spans = None
        if TELEMETRY.on:  # off: this check is all the telemetry a call costs
            spans = TaskTrace(call)
            send = spans.around(actor, send, _is_error_wire)
        try:
            result = await front.forward(ctx, actor, f"tools/call {tool.key}", send)
            outcome = "tool_error" if _is_error_wire(result) else "ok"
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


def _is_error_wire(result: object) -> bool:
    return isinstance(result, dict) and result.get("isError") is True


def error_result(text: str) -> types.CallToolResult:
    """The error result a host gets for a call that failed before or upstream (the general path's text)."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
