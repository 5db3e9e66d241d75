"""A plan's steps on an ``mcp.Client``: the reference client's whole work, and the sidecar's host in ``run``.

``public`` maps a server's raw tool name to the name this client sees (the
reference sees raw names; a host of the sidecar sees ``<server>__<name>``, the default names),
``tools`` a listing to what the steps may call. Every request is bounded by the
caller's deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.context import ClientRequestContext

from tests.conformance.plans import (
    CallEveryListedTool,
    CallTool,
    EchoListedSchema,
    ListTools,
    ResourcesAndPrompts,
    Step,
)


async def run_steps(client: Client, steps: tuple[Step, ...], public: Callable[[str], str]) -> None:
    """Run ``steps`` in order on ``client``; the first that fails raises."""
    listed: list[types.Tool] = []
    for step in steps:
        match step:
            case ListTools():
                listed = (await client.list_tools()).tools
            case CallTool(name=name, arguments=arguments):
                await _call(client, public(name), arguments)
            case CallEveryListedTool():
                for tool in listed:
                    await _call(client, tool.name, {})
            case EchoListedSchema(focal=focal, echo=echo):
                schema = next(tool.input_schema for tool in listed if tool.name == public(focal))
                await _call(client, public(echo), {"schema": schema})
            case ResourcesAndPrompts():
                for resource in (await client.list_resources()).resources:
                    await client.read_resource(resource.uri)
                for prompt in (await client.list_prompts()).prompts:
                    await client.get_prompt(prompt.name)


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> None:
    result = await client.call_tool(name, arguments)
    if isinstance(result, types.CallToolResult) and result.is_error:
        raise RuntimeError(f"tool {name!r} answered an error: {result.content}")


def accept_form(schema: dict[str, Any]) -> dict[str, Any]:
    """What the user answers to a form: every default the schema declares, and yes to every yes/no question."""
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    answer: dict[str, Any] = {}
    for name, prop in properties.items():
        if "default" in prop:
            answer[name] = prop["default"]
        elif prop.get("type") == "boolean":
            answer[name] = True
    return answer


async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The user accepts every form the way ``accept_form`` fills it in (URL elicitations: accepted)."""
    if isinstance(params, types.ElicitRequestFormParams):
        return types.ElicitResult(action="accept", content=accept_form(params.requested_schema))
    return types.ElicitResult(action="accept")
