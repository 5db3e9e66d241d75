"""The call pipeline's stages on their own (``supervisor.host.pipeline.stages``, issue 47).

The output-schema stage is held to the SDK's own client check (``ClientSession.validate_tool_result``, what
the SDK path ran) by feeding both the same results: the same verdict and the same text.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Final

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp_types import SERVER_INFO_META_KEY

from supervisor.host.pipeline.stages import check_output, error_content, outbound, settle, shaped

SCHEMA: Final = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["n"],
}


def _tool(schema: dict[str, Any] | None) -> Any:
    return SimpleNamespace(
        raw_name="count", key="mcp__fx__count", owner="fx", source=SimpleNamespace(output_schema=schema)
    )


async def _sdk_verdict(schema: dict[str, Any], result: dict[str, Any]) -> str | None:
    """What the SDK's client says of ``result`` (None: it passes), through its own method and validator cache."""
    session: Any = SimpleNamespace(_tool_output_schemas={"count": schema}, _tool_output_validators={})
    session._output_schema_validator = lambda name, s: ClientSession._output_schema_validator(session, name, s)
    try:
        await ClientSession.validate_tool_result(session, "count", types.CallToolResult.model_validate(result))
    except RuntimeError as exc:
        return str(exc)
    return None


def _our_verdict(schema: dict[str, Any], result: dict[str, Any]) -> str | None:
    try:
        check_output(_tool(schema), result)
    except RuntimeError as exc:
        return str(exc)
    return None


RESULTS: Final = [
    pytest.param({"content": [], "structuredContent": {"n": 1}}, id="conforms"),
    pytest.param({"content": [], "structuredContent": {"n": 1, "tags": ["a"]}}, id="conforms-with-optional"),
    pytest.param({"content": []}, id="no-structured-content"),
    pytest.param({"content": [], "structuredContent": {"n": "one"}}, id="wrong-type"),
    pytest.param({"content": [], "structuredContent": {}}, id="missing-required"),
    pytest.param({"content": [], "structuredContent": {"n": 1, "tags": [1]}}, id="wrong-item"),
]


@pytest.mark.parametrize("result", RESULTS)
async def test_the_output_schema_stage_agrees_with_the_sdks_client_check(result: dict[str, Any]) -> None:
    assert _our_verdict(SCHEMA, result) == await _sdk_verdict(SCHEMA, result)


async def test_an_invalid_schema_is_refused_by_name_as_the_sdk_refuses_it() -> None:
    broken = {"type": "object", "properties": {"n": {"type": 7}}}
    result = {"content": [], "structuredContent": {"n": 1}}
    ours = _our_verdict(broken, result)
    assert ours is not None and ours.startswith("Invalid schema for tool count")
    assert ours == await _sdk_verdict(broken, result)


def test_an_error_an_input_round_and_a_tool_without_a_schema_are_not_checked() -> None:
    check_output(_tool(SCHEMA), {"content": [], "isError": True})  # an error result carries no structure
    check_output(_tool(SCHEMA), {"resultType": "input_required", "inputRequests": {}})
    check_output(_tool(None), {"content": []})
    with pytest.raises(RuntimeError, match="did not return structured content"):
        check_output(_tool(SCHEMA), {"content": []})


def test_the_shape_stage_stamps_a_2026_result_and_strips_a_handshake_one() -> None:
    ours = {"name": "mcp-supervisor", "version": "1"}
    upstream = {"content": [], "_meta": {SERVER_INFO_META_KEY: {"name": "up"}, "k": 1}, "resultType": "complete"}
    assert shaped(dict(upstream), ours) == {
        "content": [],
        "_meta": {SERVER_INFO_META_KEY: ours, "k": 1},
        "resultType": "complete",
    }
    assert shaped(dict(upstream), None) == {"content": [], "_meta": {"k": 1}}
    assert shaped(error_content("no"), ours)["isError"] is True


def test_the_transform_stage_is_the_tools_own() -> None:
    tool = SimpleNamespace(upstream_arguments=lambda arguments: {**(arguments or {}), "injected": True})
    assert outbound(tool, {"a": 1}) == {"a": 1, "injected": True}  # type: ignore[arg-type]


async def test_settling_warns_of_a_failure_counts_the_call_and_ends_a_spliced_calls_spans() -> None:
    noted: list[tuple[str, ...]] = []
    front = SimpleNamespace(
        note_call=lambda tool, outcome, seconds: noted.append(("call", outcome)),
        note_call_failure=lambda tool, kind, text: noted.append(("failure", kind, text)),
    )
    ended: list[str] = []
    trace = SimpleNamespace(finish=ended.append)
    settle(front, _tool(None), "timeout", 0.0, failure=("UpstreamTimeout", "slow"), trace=trace)  # type: ignore[arg-type]
    assert noted == [("failure", "UpstreamTimeout", "slow"), ("call", "timeout")]
    assert ended == ["timeout"]
