"""A search view's own two tools: ``search_tools`` and ``call_tool`` (issue 26).

A view with ``catalog = "search"`` lists its ``always_visible`` tools plus
these two (``catalog.views.search_tools`` defines them):

* ``search_tools(query, limit)`` answers from the view's BM25 index
  (``CatalogView.search_index``, rebuilt whole when the view's tools changed),
  fused (``catalog.fusion``: normalized scores, equal weights) with the semantic index
  (``CatalogView.semantic_index``) once the embedding model is loaded and every
  tool of the view has its vector; until then, or without the ``search`` extra,
  from the BM25 index alone (issue 48): the best matches, each with its public
  name, title, description and input schema as a host would list them
  (transforms applied), and ``ranking`` ("fused" or "lexical"), as JSON text
  and as ``structuredContent``;
* ``call_tool(name, arguments)`` calls any tool of the view by its public name.
  It is the same call as a direct one: the request is the host's own (its id,
  progress token, ``_meta``, input responses) with ``name`` and ``arguments``
  replaced, and it runs through ``ToolCalls.call_tool``, so routing, unknown
  names (-32602), errors, progress, cancellation, elicitation and 2026 input
  rounds all behave exactly as for a direct call.

Bad arguments to either tool are a tool error the model can read and correct
(``isError``), as a server's input validation would be.

Concurrency: runs in the host request's handler task; the indexes are read (or
rebuilt) synchronously, and both are taken before the one await of a fused
search (the query's embedding, in the engine's worker thread), so one answer
ranks one snapshot of the view.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
import trio
from mcp.server import ServerRequestContext

from supervisor.catalog.fusion import DEPTH, fuse
from supervisor.catalog.search import Match, describe
from supervisor.catalog.views import CALL_TOOL, MAX_SEARCH_LIMIT, SEARCH_TOOL, CatalogView
from supervisor.host.pipeline.adapters import CallResult, CallTool
from supervisor.host.pipeline.driver import error_result


class CatalogSearch:
    """``search_tools`` and ``call_tool`` over one Front's search view.

    Args:
        view: The Front's view (a search view).
        settle: What a search waits for first: the servers still on their first attempt (bounded).
    """

    def __init__(self, view: CatalogView, settle: Callable[[], Awaitable[None]]) -> None:
        self._view = view
        self._settle = settle

    @staticmethod
    def owns(name: str) -> bool:
        """Whether ``name`` is one of the two tools this view answers itself."""
        return name in (SEARCH_TOOL, CALL_TOOL)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Nothing to hold: started at once."""
        task_status.started()

    async def call(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, call_tool: CallTool
    ) -> CallResult:
        """Answer a call of ``search_tools`` or ``call_tool`` (``call_tool``: the Front's own tools/call)."""
        arguments = params.arguments or {}
        if params.name == SEARCH_TOOL:
            return await self._search(arguments)
        name = arguments.get("name")
        inner = arguments.get("arguments", {})
        if not isinstance(name, str) or not name:
            return error_result("call_tool needs 'name': the tool's name, exactly as search_tools gave it")
        if not isinstance(inner, dict):
            return error_result(f"call_tool: 'arguments' must be an object (the arguments of {name})")
        if self.owns(name):
            return error_result(f"call_tool: call {name} directly, not through call_tool")
        return await call_tool(ctx, params.model_copy(update={"name": name, "arguments": inner}))

    async def _search(self, arguments: dict[str, Any]) -> types.CallToolResult:
        asked = search_arguments(arguments, self._view.rules.search_limit)
        if isinstance(asked, types.CallToolResult):
            return asked
        # Right after start, search the servers that are still starting too (bounded, as a list is).
        await self._settle()
        ranked, ranking = await rank(self._view, *asked)
        payload = {"tools": describe(ranked), "ranking": ranking}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
            structured_content=payload,
        )


def search_arguments(arguments: dict[str, Any], default_limit: int) -> tuple[str, int] | types.CallToolResult:
    """``search_tools``' query and limit, or the error result that says what is wrong with them."""
    query = arguments.get("query")
    limit = arguments.get("limit", default_limit)
    if not isinstance(query, str) or not query.strip():
        return error_result("search_tools needs 'query': what you want to do, in a few words")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SEARCH_LIMIT:
        return error_result(f"search_tools: 'limit' must be a whole number from 1 to {MAX_SEARCH_LIMIT}")
    return query, limit


async def rank(view: CatalogView, query: str, limit: int) -> tuple[list[Match], str]:
    """The view's lexical ranking, fused with the semantic one when it has a vector index; and which it was.

    Both indexes are taken before the one await (the query's embedding), so one answer ranks one snapshot.
    """
    lexical = view.search_index()
    vectors = view.semantic_index()
    if vectors is None or view.semantic is None:
        return lexical.search(query, limit), "lexical"
    words = lexical.search(query, DEPTH)
    meaning = await view.semantic.embed_query(query)
    if meaning is None:
        return words[:limit], "lexical"
    scored = [(match.entry, match.score) for match in words]
    return [Match(entry, 0.0) for entry in fuse(scored, vectors.search(meaning, DEPTH), limit)], "fused"
