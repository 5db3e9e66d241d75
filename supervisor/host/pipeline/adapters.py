"""The runners of the pipeline as adapters: each builds a ``ToolCall``, hands it to the driver, writes the reply.

* ``call_tool``, the SDK's ``tools/call`` handler: a view's own tools answer
  themselves; any other name routes (waiting for the first attempts, which
  only this path does) and runs; the SDK's server takes the result as its model.
* ``reply``: a front's own task's JSON-RPC answer (``host.stdio.tasks``,
  ``host.http.posts``, ``host.http.sessions``): the result, or the error the
  SDK would answer for what the driver raised, by the host's era.

The third adapter is a program's call in ``run_code`` (``host.code_mode``); which
call takes which way is ``host.pipeline.paths``'s table.

Concurrency: each runs in its caller's task; no state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types
import trio
from mcp.server import ServerRequestContext
from mcp.server.runner import modern_error_data
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import ErrorData
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from supervisor.host.pipeline.call import ToolCall
from supervisor.host.pipeline.driver import SHUTTING_DOWN_TEXT, error_result

if TYPE_CHECKING:
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.host.pipeline.driver import ToolCalls
    from supervisor.server_actor import ServerActor

logger = logging.getLogger(__name__)

CallResult = types.CallToolResult | types.InputRequiredResult
CallTool = Callable[[ServerRequestContext[Any], types.CallToolRequestParams], Awaitable[CallResult]]
"""The SDK path's ``tools/call`` (what a search view's ``call_tool`` runs a call through)."""


class OwnTools(Protocol):
    """A view's own tools: a search view's (``host.catalog_search.CatalogSearch``), a code view's
    (``host.code_mode.CodeMode``)."""

    def owns(self, name: str) -> bool: ...

    async def serve(self, *, task_status: trio.TaskStatus[None] = ...) -> None:
        """What they hold while the Front runs (a code view: the sandbox's workers)."""

    async def call(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, call_tool: CallTool
    ) -> CallResult: ...


class HandlingFront(Protocol):
    """What the SDK's handler needs of the Front (``host.front.Front``)."""

    @property
    def shutting_down(self) -> bool: ...

    @property
    def own_tools(self) -> OwnTools | None: ...

    @property
    def tool_calls(self) -> ToolCalls: ...

    async def route_tool(self, public_name: str) -> tuple[RegisteredTool, ServerActor]: ...


async def call_tool(
    front: HandlingFront, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> CallResult:
    """The SDK path: the SDK's server hands the request over as its model and takes the result as one; in between,
    the call is the driver's, like every other."""
    if front.shutting_down:
        return error_result(SHUTTING_DOWN_TEXT)
    own = front.own_tools
    if own is not None and own.owns(params.name):
        return await own.call(ctx, params, partial(call_tool, front))
    # Right after start a host may call before every server has listed its tools: the
    # host asked for this very tool, so the route waits for the first attempts (``routing``).
    tool, actor = await front.route_tool(params.name)
    result = await front.tool_calls.run(ToolCall(ctx, tool, actor, params.arguments, "sdk"))
    try:  # the SDK's handler returns its model (its server sieves and stamps it)
        if result.get("resultType") == "input_required":
            return types.InputRequiredResult.model_validate(result)
        return types.CallToolResult.model_validate(result)
    except ValidationError as exc:  # shaped like a result (``wire_result_shaped``), but not a valid one
        what = f"tools/call {tool.raw_name}"
        return error_result(f"server {actor.name!r}: {what} returned an invalid result ({exc.error_count()} errors)")


async def reply(driver: ToolCalls, call: ToolCall) -> dict[str, Any]:
    """The JSON-RPC reply to a call a front's own task runs: its result, or the error the SDK would answer for what
    the driver raised, by the host's era (its runner's mapping, or its dispatcher's)."""
    answer: dict[str, Any] = {"jsonrpc": "2.0", "id": call.request_id}
    try:
        answer["result"] = await driver.run(call)
    except Exception as exc:  # what the SDK maps, mapped the same way
        modern = call.host.protocol_version in MODERN_PROTOCOL_VERSIONS
        error = modern_error_data(exc) if modern else handshake_error_data(exc)
        answer["error"] = error.model_dump(mode="json", exclude_none=True)
    return answer


def handshake_error_data(exc: Exception) -> ErrorData:
    """What the SDK's dispatcher answers a handshake-era request whose handler raised ``exc``: its ladder, then its
    catch-all (code 0 and the exception's text, its compatibility rule)."""
    error = handler_exception_to_error_data(exc)
    if error is not None:
        return error
    logger.exception("a fast-path call of a handshake-era host raised")  # as the SDK logs it
    return ErrorData(code=0, message=str(exc))
