"""The whole ``tools/call`` matrix, end to end: every stage of a call, in every combination (issue 47, item 4).

Host era (2026-07-28 through ``mcp.Client`` mode ``auto``, or the 2025-11-25
handshake, mode ``legacy``) x upstream era (the fixture server speaking 2026,
or handshake-only) x front (stdio, HTTP) x upstream transport (a stdio child, a
streamable-HTTP URL) x telemetry (off, on). For each combination, eight checks:

1. ``view-wall``: a tool the host's view leaves out answers as unknown and never reaches the upstream (I16);
2. ``transform``: a renamed tool with a hidden argument reaches the upstream by its raw name, the default injected;
3. ``pinned``: a tool whose definition changed since it was pinned is refused, and never reaches the upstream (I17);
4. ``trace``: the host's trace context continues (I18): off, it reaches the upstream unchanged; on, our SERVER span
   parents on the host's span and the upstream's request carries our CLIENT span's context;
5. ``progress``: every progress notice reaches the host's callback, before the result;
6. ``cancel``: the host cancels a hanging call; the upstream's request is cancelled; the next call succeeds;
7. ``question``: a tool that asks the host mid-call (elicitation) gets the host's answer (input rounds where the
   eras differ);
8. ``heal``: a tool the upstream dropped silently fails with the upstream's own -32602, is never re-sent, and the
   sidecar re-lists that server (I8).

The cells share processes by group (``tests/call_matrix.py``): the first test
item of a (front x telemetry) group runs the whole group once, the others
replay their cell's outcome, so each item passes, fails or skips by its own id.
The items are plain functions that run the group in ``trio.run`` themselves:
pytest-trio runs one trio run per test, and a group outlives a test.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Final, cast

import anyio
import mcp_types as types
import pytest
import trio
from mcp import MCPError

from tests.call_matrix import (
    DROPPED,
    ERAS,
    FRONTS,
    HIDDEN,
    PLAIN,
    TELEMETRY,
    TRANSPORTS,
    WITHHELD,
    Cell,
    Check,
    Group,
    Outcomes,
    Target,
    run_group,
)
from tests.fidelity_host import HTTP_CLIENT_LEAKS_ASYNCGENS
from tests.sidecar import scaled, text_of, wait_until

pytestmark = [pytest.mark.e2e, HTTP_CLIENT_LEAKS_ASYNCGENS]

SPANS_BOUND_SEC: Final = scaled(15)
WAIT_SEC: Final = scaled(10)
"""How long a check waits for what it caused upstream (under its cell's own deadline)."""


async def _error_of(target: Target, tool: str, arguments: dict[str, Any] | None = None) -> tuple[int, str]:
    with pytest.raises(MCPError) as caught:
        await target.host.call(tool, arguments or {"text": "x"})
    return caught.value.error.code, caught.value.error.message


# -- the checks --------------------------------------------------------------------------


async def view_wall(target: Target) -> None:
    hidden = target.public(HIDDEN)
    assert hidden not in await target.host.tool_names()
    unknown = target.public("no_such_tool")
    hidden_error = await _error_of(target, hidden)
    unknown_error = await _error_of(target, unknown)
    assert hidden_error == (unknown_error[0], unknown_error[1].replace(unknown, hidden)), "a hidden tool is unknown"
    assert target.calls(HIDDEN) == [], "the call of a tool the view leaves out reached the upstream"


async def transform(target: Target) -> None:
    before = len(target.calls("add"))
    result = await target.host.call(target.public("plus"), {"x": 2})
    assert not result.is_error, result
    assert text_of(result) == "42"
    assert [call["arguments"] for call in target.calls("add")[before:]] == [{"a": 2, "b": 40}]
    assert target.calls("plus") == [], "the public name went upstream"


async def pinned(target: Target) -> None:
    withheld = target.public(WITHHELD)
    assert withheld not in await target.host.tool_names()
    _code, message = await _error_of(target, withheld)
    assert "withheld by pinning: its definition changed since it was approved" in message, message
    assert target.calls(WITHHELD) == [], "a withheld tool's call reached the upstream"


async def trace(target: Target) -> None:
    trace_id, host_span = secrets.token_hex(16), secrets.token_hex(8)
    meta: dict[str, Any] = {
        "traceparent": f"00-{trace_id}-{host_span}-01",
        "tracestate": "cell=matrix",
        "baggage": "cell=matrix",
    }
    before = len(target.calls(PLAIN))
    result = await target.host.session.call_tool(
        target.public(PLAIN), {"text": "traced"}, meta=cast(types.RequestParamsMeta, meta)
    )
    assert text_of(result) == "traced"
    (arrived,) = [call["meta"] or {} for call in target.calls(PLAIN)[before:]]
    receiver = target.receiver
    if receiver is None:
        assert {key: arrived.get(key) for key in meta} == meta, "the host's trace context did not pass unchanged"
        return

    def ours(name: str, kind: str) -> list[Any]:
        return [
            span
            for span in receiver.spans
            if span.service == "mcp-supervisor"
            and span.trace_id == trace_id
            and span.name == name
            and span.kind == kind
        ]

    server_name, client_name = f"tools/call {target.public(PLAIN)}", f"tools/call {PLAIN}"
    await receiver.wait_for(
        lambda: ours(server_name, "SPAN_KIND_SERVER") and ours(client_name, "SPAN_KIND_CLIENT"),
        what=f"the SERVER and CLIENT spans of trace {trace_id}",
        bound_sec=SPANS_BOUND_SEC,
    )
    (server,) = ours(server_name, "SPAN_KIND_SERVER")
    (client,) = ours(client_name, "SPAN_KIND_CLIENT")
    assert server.parent_id == host_span, "the SERVER span does not parent on the host's span"
    assert client.parent_id == server.span_id
    assert arrived.get("traceparent") == f"00-{trace_id}-{client.span_id}-01", "the upstream missed our CLIENT span"
    assert arrived.get("tracestate") == meta["tracestate"], "the trace's vendor state was lost on the way"
    assert arrived.get("baggage") == meta["baggage"], "the host's baggage did not go on as it came"


async def progress(target: Target) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await target.host.session.call_tool(target.public("progress"), {"steps": 3}, progress_callback=on_progress)
    at_result = list(seen)
    assert text_of(result) == "progressed 3"
    assert at_result == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")], "progress missing before the result"


async def cancel(target: Target) -> None:
    # Counted, not compared by id: two sidecars' sessions to one HTTP upstream number their requests alike.
    calls, cancelled = len(target.calls("hang")), len(target.events("request_cancelled"))
    scope = anyio.CancelScope()

    async def call() -> None:
        with scope:
            await target.host.session.call_tool(target.public("hang"), {})
        assert scope.cancelled_caught, "the hanging call returned"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await wait_until(
            lambda: len(target.calls("hang")) > calls, what="the hanging call upstream", bound_sec=WAIT_SEC
        )
        scope.cancel()
    (upstream,) = target.calls("hang")[calls:]
    await wait_until(
        lambda: (
            [(e["id"], e["tool"]) for e in target.events("request_cancelled")[cancelled:]] == [(upstream["id"], "hang")]
        ),
        what="the upstream request cancelled",
        bound_sec=WAIT_SEC,
    )
    assert text_of(await target.host.call(target.public(PLAIN), {"text": "after"})) == "after"


async def question(target: Target) -> None:
    asked = len(target.events("asked"))
    result = await target.host.call(target.public("elicit"))
    assert not result.is_error, result
    assert text_of(result) == f'elicited: accept {{"name": "{target.recorder.name}"}}'
    # The upstream asked once, in its own era: an input round (2026), or a request to the host (handshake).
    era = {"era": "2026"} if target.cell.server == "modern" else {}
    asked_as = [{k: v for k, v in e.items() if k not in ("event", "pid")} for e in target.events("asked")[asked:]]
    assert asked_as == [{"method": "elicitation/create", **era}]


async def heal(target: Target) -> None:
    victim = DROPPED[target.cell.host]
    public = target.public(victim)
    assert text_of(await target.host.call(target.public("drop_tool"), {"name": victim})) == "dropped"
    assert public in await target.host.tool_names(), "nobody was told: the sidecar's catalog still lists it"
    lists = target.lists()
    assert await _error_of(target, public) == (types.INVALID_PARAMS, f"Unknown tool: {victim}")
    await wait_until(lambda: target.lists() > lists, what="the sidecar to re-list the server", bound_sec=WAIT_SEC)
    await target.host.wait_tools(lambda names: public not in names, bound_sec=WAIT_SEC, poll_sec=0.1)
    assert len(target.calls(victim)) == 1, "the failed call was re-sent"


CHECKS: Final[dict[str, Check]] = {
    "view-wall": view_wall,
    "transform": transform,
    "pinned": pinned,
    "trace": trace,
    "progress": progress,
    "cancel": cancel,
    "question": question,
    "heal": heal,
}

# -- the matrix --------------------------------------------------------------------------

XFAIL: Final[dict[str, str]] = {}
"""Cell id -> why the sidecar fails it today (a real bug, reported)."""

ALL_CELLS: Final = [
    Cell(front, host, server, transport, telemetry, check)
    for front in FRONTS
    for telemetry in TELEMETRY
    for host in ERAS
    for server in ERAS
    for transport in TRANSPORTS
    for check in CHECKS
]
_PARAMS: Final = [
    pytest.param(
        cell,
        id=cell.id,
        marks=[pytest.mark.xfail(strict=True, reason=XFAIL[cell.id])] if cell.id in XFAIL else [],
    )
    for cell in ALL_CELLS
]
_outcomes: dict[Group, Outcomes] = {}


def _group_outcomes(group: Group, request: pytest.FixtureRequest, tmp_path: Path) -> Outcomes:
    """The group's outcomes; the first item of a group to run runs the group's selected cells (its processes end
    with that item)."""
    if group not in _outcomes:
        outcomes = _outcomes[group] = Outcomes()
        selected = {
            item.callspec.params["cell"]
            for item in request.session.items
            if isinstance(item, pytest.Function)
            and item.originalname == request.node.originalname
            and hasattr(item, "callspec")
        }
        cells = [cell for cell in ALL_CELLS if cell.group == group and cell in selected]
        try:
            trio.run(run_group, group, tmp_path, CHECKS, cells, outcomes)
        except BaseException as error:
            outcomes.group_error = error
            raise
    return _outcomes[group]


@pytest.mark.parametrize("cell", _PARAMS)
def test_call_matrix(cell: Cell, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    _group_outcomes(cell.group, request, tmp_path).replay(cell)
