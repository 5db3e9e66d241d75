"""A code view's own two tools: ``search_tools`` and ``run_code`` (issue 58).

A view with ``catalog = "code"`` lists its ``always_visible`` tools plus these
two (``catalog.views.code_tools``):

* ``search_tools(query, limit, detail)`` ranks the view's tools exactly as a
  search view does (``host.catalog_search.rank``: BM25, fused with the
  semantic index once it is ready) and answers each hit as the typed Python
  signature a program calls (``code.api.ViewApi.signatures``), or with
  ``detail`` as its full stub;
* ``run_code(code)`` runs the program in the sandbox (``code.engine``), with
  every tool of the view importable from ``tools`` (``code.api``: one module
  per server), within the view's limits (``[views.<name>.code]`` over
  ``[supervisor.code]``, read at each run, so a reload applies to the next).

Every call a program makes is a call of the host that sent ``run_code``: it is
routed by the view (``Front.route``: a tool of another view, a hidden one, or
a pinned one withheld is unknown, with the same text a host would get) and
runs through the pipeline's driver as a ``ToolCall`` of origin ``sandbox``
(``host.pipeline.call``) with that host's request context: this module is one
more adapter, and transforms, the pin guard, ``tool_timeout_sec``, the
unknown-tool heal, attribution (its progress, logs and questions reach that
host, against its request), metrics and spans (an INTERNAL span under the
``run_code`` call's) apply as to a host's own call. What the program gets
back: the call's ``structuredContent`` where the tool declares an
``outputSchema``, else its text; a tool's error (``isError``, a JSON-RPC
error, an unavailable server) raises ``RuntimeError`` in the program with the
server's message.

What ``run_code`` answers: the program's value (``code.values.encode``: a
text as it is, anything else as JSON, cut at ``max_result_bytes``) and what it
printed, as text content; a program that failed (a type error against the
stubs, before any call; an uncaught exception; a limit) is an error result
(``isError``) with the reason, and what it printed before.

Concurrency: each ``run_code`` runs in its host request's handler task, and
the host's cancellation of it cancels the program and every call in flight
(``Sandbox.execute``). The API is rebuilt whole when the view's tools changed,
between two awaits, so one run sees one version of the view. ``serve`` holds
the sandbox's worker pool.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final, Protocol

import mcp_types as types
import pydantic_monty as pm
import trio
from mcp import MCPError
from mcp.server import ServerRequestContext

from supervisor.catalog.naming import public_name
from supervisor.catalog.registry import RegisteredTool
from supervisor.catalog.views import RUN_CODE, SEARCH_TOOL, CatalogView
from supervisor.code.api import ViewApi
from supervisor.code.engine import RunFailed, Sandbox, ToolError, tools_module
from supervisor.code.values import encode, plain
from supervisor.host.catalog_search import rank, search_arguments
from supervisor.host.pipeline.adapters import CallResult, CallTool
from supervisor.host.pipeline.call import ToolCall
from supervisor.host.pipeline.driver import error_result
from supervisor.root import Supervisor
from supervisor.server_actor import ServerActor

logger = logging.getLogger(__name__)

_MISSING: Final = re.compile(r"[Mm]odule [`']([\w.]+)[`'] has no (?:member|attribute) [`'](\w+)[`']")
"""The type check's and the runtime's words for a function a module does not have."""


class CallDriver(Protocol):
    """The pipeline's driver (``host.pipeline.driver.ToolCalls``)."""

    async def run(self, call: ToolCall) -> dict[str, Any]: ...


class CodingFront(Protocol):
    """What code mode needs of its Front (``host.front.Front``)."""

    @property
    def supervisor(self) -> Supervisor: ...

    @property
    def tool_calls(self) -> CallDriver: ...

    def route(self, public_name: str) -> tuple[RegisteredTool, ServerActor] | None: ...

    def unknown(self, kind: str, name: str) -> MCPError: ...


class CodeMode:
    """``search_tools`` and ``run_code`` over one Front's code view.

    Args:
        front: The Front whose view it is.
        view: The Front's view (a code view).
        settle: What a search or a run waits for first: the servers still on their first attempt (bounded).
    """

    def __init__(self, front: CodingFront, view: CatalogView, settle: Callable[[], Awaitable[None]]) -> None:
        self._front = front
        self._view = view
        self._settle = settle
        self._sandbox = Sandbox()
        self._api: tuple[int, ViewApi, pm.ExternalModule] | None = None

    @staticmethod
    def owns(name: str) -> bool:
        """Whether ``name`` is one of the two tools this view answers itself."""
        return name in (SEARCH_TOOL, RUN_CODE)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the sandbox's worker pool until cancelled (``Sandbox.serve``)."""
        await self._sandbox.serve(task_status=task_status)

    async def call(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, _: CallTool
    ) -> CallResult:
        """Answer a call of ``search_tools`` or ``run_code``."""
        arguments = params.arguments or {}
        await self._settle()  # right after start, the servers still starting are part of the API too
        if params.name == SEARCH_TOOL:
            return await self._search(arguments)
        return await self._run(ctx, arguments)

    def current(self) -> tuple[ViewApi, pm.ExternalModule]:
        """The view's API now (rebuilt when its tools changed)."""
        version = self._view.versions["tools"]
        if self._api is None or self._api[0] != version:
            api = ViewApi.of_tools(self._view.entries("tools"))
            self._api = (version, api, tools_module(api.modules))
        return self._api[1], self._api[2]

    # -- search_tools ---------------------------------------------------------------------

    async def _search(self, arguments: dict[str, Any]) -> CallResult:
        asked = search_arguments(arguments, self._view.rules.search_limit)
        if isinstance(asked, types.CallToolResult):
            return asked
        query, limit = asked
        detail = arguments.get("detail", False)
        if not isinstance(detail, bool):
            return error_result("search_tools: 'detail' must be true or false")
        ranked, _ = await rank(self._view, query, limit)
        api, _ = self.current()
        names = [match.entry.key for match in ranked]
        text = api.details(names) if detail else api.signatures(names)
        if not text:
            text = f"no tool of this view matches {query!r}: try other words"
        elif not detail:
            modules = sorted({api.by_public[name].module for name in names if name in api.by_public})
            text = f"from tools import {', '.join(modules)}\n{text}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    # -- run_code ---------------------------------------------------------------------------

    async def _run(self, ctx: ServerRequestContext[Any], arguments: dict[str, Any]) -> CallResult:
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return error_result("run_code needs 'code': a Python program that uses `from tools import <server>`")
        api, tools = self.current()
        limits = self._front.supervisor.settings.code_limits(self._view.name)
        started = trio.current_time()
        try:
            result = await self._sandbox.execute(code, tools, partial(self._inner_call, ctx, api), limits)
        except RunFailed as exc:
            logger.info("view=%s run_code failed (%s) after %.0f ms", self._view.name, exc.kind,
                        (trio.current_time() - started) * 1000)  # fmt: skip
            text = exc.text + self._why_missing(exc.text, api)
            return error_result(text + (f"\n\nprinted before it stopped:\n{exc.output}" if exc.output else ""))
        logger.debug("view=%s run_code: %d calls in %.0f ms", self._view.name, result.calls,
                     (trio.current_time() - started) * 1000)  # fmt: skip
        content: list[types.TextContent] = []
        if result.value is not None or not result.output:
            content.append(types.TextContent(type="text", text=encode(result.value, limits.max_result_bytes).text))
        if result.output:
            content.append(types.TextContent(type="text", text=f"printed:\n{result.output}"))
        return types.CallToolResult(content=list(content))

    def _why_missing(self, text: str, api: ViewApi) -> str:
        """Why a function a program named is not in its module, when the view can say (a pinned tool withheld, a
        server that needs a login): the host's own "unknown tool" text for that name."""
        reasons = []
        for module, function in sorted(set(_MISSING.findall(text))):
            server = api.servers.get(module.removeprefix("tools."))
            if server is None:
                continue
            public = public_name(server, function, rule=self._front.supervisor.registry.rule)
            message = self._front.unknown("tool", public).error.message
            if message != f"Unknown tool: {public}":
                reasons.append(f"\n{module.removeprefix('tools.')}.{function}: {message}")
        return "".join(reasons)

    async def _inner_call(
        self, ctx: ServerRequestContext[Any], api: ViewApi, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """One call the program made (``code.engine.CallTool``): routed by the view, run by the driver as the host's
        own (``ctx``: the ``run_code`` request, to which it is attributed)."""
        stub = api.by_call.get(name)
        if stub is None:  # the engine refuses a name its modules lack; a stale API would reach here
            raise ToolError(f"{name.removeprefix('tools.')}: no such tool in this view")
        what = f"{stub.module}.{stub.function}"
        if args:
            raise ToolError(f"{what} takes keyword arguments only: {stub.signature}")
        arguments = {stub.arguments.get(key, key): plain(value) for key, value in kwargs.items()}
        routed = self._front.route(stub.public_name)
        if routed is None:
            raise ToolError(f"{what}: {self._front.unknown('tool', stub.public_name).error.message}")
        call = ToolCall(ctx, *routed, arguments, "sandbox")
        try:
            result = await self._front.tool_calls.run(call)
        except MCPError as exc:
            raise ToolError(f"{what}: {exc.error.message}") from None
        except Exception as exc:  # what the host would get as a JSON-RPC error (an output schema not met, say)
            raise ToolError(f"{what}: {exc}") from None
        return tool_value(what, result, structured=stub.structured)


def tool_value(what: str, result: dict[str, Any], *, structured: bool) -> Any:
    """What a program gets of a call's wire result: its structured content, or its text (module docstring)."""
    if result.get("resultType") == "input_required":
        raise ToolError(
            f"{what} asked for input mid-call, which a program's call cannot pass on to a 2026-era host: "
            "call the tool directly"
        )
    if result.get("isError") is True:
        raise ToolError(f"{what}: {_text(result) or 'the tool failed (no message)'}")
    if structured and isinstance(result.get("structuredContent"), dict):
        return result["structuredContent"]
    return _text(result)


def _text(result: dict[str, Any]) -> str:
    """The text of a result's content, blocks joined by newlines (a non-text block: a line that says what it is)."""
    parts: list[str] = []
    for block in result.get("content") or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "resource" and isinstance(block.get("resource"), dict) and "text" in block["resource"]:
            parts.append(str(block["resource"]["text"]))
        elif kind == "resource_link":
            parts.append(f"[resource {block.get('uri', '')}]")
        else:
            parts.append(f"[{kind} content, {block.get('mimeType', 'no type')}]")
    return "\n".join(parts)
