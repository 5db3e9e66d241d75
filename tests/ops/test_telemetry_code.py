"""A program's calls in ``run_code`` are traced as a host's own, each under the ``run_code`` call (I18, issue 58).

In-process, as ``test_telemetry_paths.py``: a real ``Supervisor`` and a code
view's ``Front`` over the traced upstream (a low-level SDK ``Server`` over
streamable HTTP, with the SDK's own middleware), a real ``mcp.Client`` host
that sends its trace context, the program run in the real sandbox, and
everything exported through the production pipeline into memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest
import trio
from mcp import Client
from opentelemetry.trace import SpanKind

from supervisor.telemetry import conventions as C
from tests.ops.otel_support import (
    HOST_META,
    TRACE_ID,
    Recorded,
    as_traced_host,
    hex_span,
    hex_trace,
    in_memory_front,
    parent_of,
    serve_sidecar,
    serve_traced_upstream,
)
from tests.sidecar import scaled, write_settings

pytest.importorskip("pydantic_monty")
pytestmark = pytest.mark.e2e  # the sandbox's worker processes

BOUND_SEC: Final = scaled(30)
PROGRAM: Final = """
from tools import up
first = await up.echo(text="a")
try:
    await up.fail(text="b")
except RuntimeError as exc:
    second = str(exc)
first + " | " + second
"""


async def test_I18_each_call_a_program_makes_is_an_internal_span_under_run_code_with_its_client_span_under_it(
    tmp_path: Path,
) -> None:
    with Recorded.start() as recorded, trio.fail_after(BOUND_SEC):
        async with serve_traced_upstream() as upstream:
            config = write_settings(
                tmp_path, {"up": {"url": upstream.url}}, supervisor={"log_level": "warning"},
                views={"code": {"catalog": "code"}},
            )  # fmt: skip
            async with serve_sidecar(config, view="code") as sidecar, Client(in_memory_front(sidecar.front)) as host:
                with as_traced_host():
                    result = await host.call_tool("run_code", {"code": PROGRAM}, meta=HOST_META)
    assert not result.is_error, result
    assert result.content[0].text == "a | up.fail: failed: b"  # type: ignore[union-attr]

    run_code = recorded.one("tools/call run_code", SpanKind.SERVER)
    assert hex_trace(run_code) == TRACE_ID, "run_code is on the host's trace"
    assert C.SERVER not in (run_code.attributes or {}), "a program's call does not annotate the run_code span"
    for public, raw, outcome in (("mcp__up__echo", "echo", "ok"), ("mcp__up__fail", "fail", "tool_error")):
        inner = recorded.one(f"tools/call {public}", SpanKind.INTERNAL)
        client = recorded.one(f"tools/call {raw}", SpanKind.CLIENT)
        upstream_server = recorded.one(f"tools/call {raw}", SpanKind.SERVER)
        assert parent_of(inner) == hex_span(run_code), f"{public}: a child of the run_code call's span"
        assert parent_of(client) == hex_span(inner), f"{raw}: the upstream request under the program's call"
        assert parent_of(upstream_server) == hex_span(client), f"{raw}: the upstream parents on our CLIENT span"
        assert hex_trace(inner) == hex_trace(client) == hex_trace(upstream_server) == TRACE_ID
        attributes = inner.attributes or {}
        assert attributes[C.TOOL_NAME] == public and attributes[C.SERVER] == "up"
        assert attributes[C.OUTCOME] == outcome and attributes[C.GENERATION] == 1
    assert len(upstream.metas) == 2
