"""A code view's program calls on the host side (``host.code_mode``, issue 58), with a fake Front.

What a program gets of a call's result, how its arguments go out (identifiers
back to JSON keys, values as JSON), and that a name the view does not route
raises in the program with the host's own "unknown tool" text. No sandbox runs
here (``tests/code/test_engine.py``; end to end: ``tests/e2e/test_code_mode.py``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from mcp import MCPError
from mcp_types import INVALID_PARAMS

from supervisor.code.api import ViewApi
from supervisor.code.engine import ToolError
from supervisor.code.stubs import ToolEntry
from supervisor.host.code_mode import CodeMode, tool_value
from supervisor.host.pipeline.call import ToolCall

ENTRY = ToolEntry(
    "fx__read",
    "read",
    "Read.",
    {"type": "object", "properties": {"class": {"type": "string"}, "n": {"type": "integer"}}},
    None,
)
API = ViewApi.of([("fx", [ENTRY])])


class FakeFront:
    """Routes ``fx__read`` (or nothing), records each call, answers ``answer`` or raises ``error``."""

    def __init__(self, *, routes: bool = True, answer: dict[str, Any] | None = None, error: Exception | None = None):
        self.routes = routes
        self.answer = answer or {"content": [{"type": "text", "text": "ok"}]}
        self.error = error
        self.calls: list[dict[str, Any] | None] = []
        self.tool_calls = self

    def route(self, public_name: str) -> Any:
        return ("tool", "actor") if self.routes else None

    def unknown(self, kind: str, name: str) -> MCPError:
        return MCPError(INVALID_PARAMS, f"Unknown {kind}: {name}: withheld by pinning")

    async def run(self, call: ToolCall) -> dict[str, Any]:
        assert call.origin == "sandbox" and call.request_id == 3
        self.calls.append(call.arguments)
        if self.error is not None:
            raise self.error
        return self.answer


async def _call(front: FakeFront, *args: Any, **kwargs: Any) -> Any:
    mode = CodeMode(front, view=None, settle=None)  # type: ignore[arg-type]  # neither is read by a call
    ctx = SimpleNamespace(request_id=3)  # the run_code request's: its calls are attributed to it
    return await mode._inner_call(ctx, API, "tools.fx.read", args, kwargs)  # type: ignore[arg-type]


async def test_a_calls_arguments_go_out_under_their_json_keys_as_json() -> None:
    front = FakeFront()
    assert await _call(front, class_="x", n=(1, 2)) == "ok"
    assert front.calls == [{"class": "x", "n": [1, 2]}]


@pytest.mark.parametrize(
    ("front", "args", "says"),
    [
        (FakeFront(routes=False), (), "fx.read: Unknown tool: fx__read: withheld by pinning"),
        (FakeFront(), ("positional",), "fx.read takes keyword arguments only: fx.read(*, class_: str = ..."),
        (FakeFront(error=MCPError(INVALID_PARAMS, "bad n")), (), "fx.read: bad n"),
        (FakeFront(error=RuntimeError("Invalid structured content")), (), "fx.read: Invalid structured content"),
        (FakeFront(answer={"content": [{"type": "text", "text": "no such file"}], "isError": True}), (),
         "fx.read: no such file"),
    ],
)  # fmt: skip
async def test_a_call_the_view_refuses_or_the_tool_fails_raises_in_the_program(
    front: FakeFront, args: tuple[Any, ...], says: str
) -> None:
    with pytest.raises(ToolError) as caught:
        await _call(front, *args)
    assert str(caught.value).startswith(says)


def test_a_result_is_its_structured_content_when_the_tool_declares_a_schema_else_its_text() -> None:
    result = {
        "content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "x:/a", "text": "two"}},
            {"type": "resource_link", "uri": "x:/b", "name": "b"},
        ],
        "structuredContent": {"n": 1},
    }
    assert tool_value("fx.read", result, structured=True) == {"n": 1}
    assert tool_value("fx.read", result, structured=False) == "one\n[image content, image/png]\ntwo\n[resource x:/b]"
    with pytest.raises(ToolError, match="asked for input mid-call"):
        tool_value("fx.read", {"resultType": "input_required", "inputRequests": {}}, structured=False)
