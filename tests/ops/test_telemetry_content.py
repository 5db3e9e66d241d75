"""Never leak (DESIGN I18): no argument, result or error message in a span without ``capture_content``, no secret ever.

The canary approach of the OAuth tests (``tests/auth/test_oauth_e2e.py``): every
secret and every piece of content the test puts in carries ``CANARY``, and the
test greps everything the span pipeline exported for it. In-process, over the
SDK and fast paths (the splice's are in ``test_telemetry_splice.py``, real
processes in ``tests/e2e/test_tracing.py``). Also: the exporter's redaction on
its own, the duration metrics, and the catalog-sync and fleet-store helpers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import pytest
import trio
import trio.testing
from mcp import Client, MCPError
from mcp.client.client import ConnectMode
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from supervisor.config.loader import load_settings
from supervisor.root import Supervisor
from supervisor.serve import secret_values
from supervisor.telemetry import conventions as C
from supervisor.telemetry.sdk import MASK, redacted
from supervisor.telemetry.spans import TELEMETRY
from supervisor.telemetry.work import note_listing, store_span, sync_span
from tests.fakes import FakeServer, tool
from tests.ops.otel_support import (
    CANARY,
    Recorded,
    everything_exported,
    in_memory_front,
    serve_sidecar,
    serve_traced_upstream,
)
from tests.sidecar import write_settings
from tests.test_reload import Fleet, _server, _settings, running

BOUND_SEC: Final = 20
HEADER_SECRET: Final = f"{CANARY}-header-value"
BEARER_SECRET: Final = f"{CANARY}-bearer-token"
ARGUMENT: Final = f"{CANARY}-argument"


async def _call_everything(tmp_path: Path, mode: ConnectMode, *, capture_content: bool) -> Recorded:
    async with serve_traced_upstream() as upstream:
        table = {"url": upstream.url, "http_headers": {"X-Api-Key": HEADER_SECRET}, "bearer_token_env_var": "UP_TOKEN"}
        config = write_settings(tmp_path, {"up": table}, supervisor={"log_level": "warning"})
        with pytest.MonkeyPatch.context() as env:
            env.setenv("UP_TOKEN", BEARER_SECRET)
            secrets = secret_values(load_settings(config))
            assert HEADER_SECRET in secrets and BEARER_SECRET in secrets
            with Recorded.start(capture_content=capture_content, secrets=secrets) as recorded:
                async with serve_sidecar(config) as sidecar, Client(in_memory_front(sidecar.front), mode=mode) as host:
                    await host.call_tool("mcp__up__echo", {"text": ARGUMENT})
                    await host.call_tool("mcp__up__secret", {})
                    await host.call_tool("mcp__up__fail", {"text": ARGUMENT})
                    with pytest.raises(MCPError):
                        await host.call_tool("mcp__up__boom", {"text": ARGUMENT})
                # The upstream really got the secrets (so they were there to leak).
                assert any(h.get("x-api-key") == HEADER_SECRET for h in upstream.headers)
                assert any(h.get("authorization") == f"Bearer {BEARER_SECRET}" for h in upstream.headers)
    return recorded


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_I18_no_argument_result_error_message_token_or_header_reaches_a_span_by_default(
    tmp_path: Path, mode: ConnectMode
) -> None:
    with trio.fail_after(BOUND_SEC):
        recorded = await _call_everything(tmp_path, mode, capture_content=False)
    exported = everything_exported(recorded.spans())
    assert recorded.named("tools/call echo", SpanKind.CLIENT), "the calls were traced"
    assert CANARY not in exported


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_I18_capture_content_records_arguments_and_results_but_never_a_token_or_a_header(
    tmp_path: Path, mode: ConnectMode
) -> None:
    with trio.fail_after(BOUND_SEC):
        recorded = await _call_everything(tmp_path, mode, capture_content=True)
    exported = everything_exported(recorded.spans())
    assert HEADER_SECRET not in exported and BEARER_SECRET not in exported
    for kind, name in ((SpanKind.SERVER, "tools/call mcp__up__echo"), (SpanKind.CLIENT, "tools/call echo")):
        attributes = recorded.one(name, kind).attributes or {}
        assert json.loads(str(attributes[C.ARGUMENTS])) == {"text": ARGUMENT}, (kind, name)
    result = recorded.one("tools/call secret", SpanKind.CLIENT).attributes or {}
    assert f"{CANARY}-result" in str(result[C.RESULT])
    assert f"boom: {ARGUMENT}" in exported, "with capture on, a JSON-RPC error's message is the status description"


async def test_the_exporter_masks_a_configured_secret_wherever_it_turns_up_and_drops_content_unless_captured() -> None:
    with Recorded.start(secrets=[HEADER_SECRET]) as recorded:
        tracer = trace.get_tracer("a-test")
        with tracer.start_as_current_span(f"name {HEADER_SECRET}", attributes={"a": f"x{HEADER_SECRET}y"}) as span:
            span.set_attribute(C.ARGUMENTS, "{}")
            span.set_status(trace.Status(trace.StatusCode.ERROR, f"failed: {ARGUMENT}"))
            span.record_exception(ValueError(ARGUMENT))
        (exported,) = recorded.spans()
    assert exported.name == f"name {MASK}"
    assert (exported.attributes or {}) == {"a": f"x{MASK}y"}, "masked; the content attribute dropped"
    assert exported.status.description is None
    ((event),) = exported.events
    assert dict(event.attributes or {}) == {"exception.type": "ValueError"}
    TELEMETRY.capture_content = True
    try:
        assert redacted(exported).status.description is None, "what was dropped stays dropped"
    finally:
        TELEMETRY.capture_content = False


async def test_the_duration_metrics_follow_the_conventions_on_the_sdk_and_fast_paths(tmp_path: Path) -> None:
    with trio.fail_after(BOUND_SEC):
        async with serve_traced_upstream() as upstream:
            config = write_settings(tmp_path, {"up": {"url": upstream.url}}, supervisor={"log_level": "warning"})
            with Recorded.start() as recorded:
                async with serve_sidecar(config) as sidecar:
                    for mode in ("auto", "legacy"):
                        async with Client(in_memory_front(sidecar.front), mode=mode) as host:
                            await host.call_tool("mcp__up__echo", {"text": "x"})
                            await host.call_tool("mcp__up__fail", {"text": "x"})
    server = [p.attributes for p in recorded.histogram_points(C.SERVER_DURATION)]
    client = [p.attributes for p in recorded.histogram_points(C.CLIENT_DURATION)]
    calls = [a for a in server if a.get(C.TOOL_NAME) == "mcp__up__fail"]
    assert calls and all(a[C.ERROR_TYPE] == "tool_error" and a[C.METHOD] == "tools/call" for a in calls)
    assert {a[C.OPERATION] for a in calls} == {"execute_tool"}
    echo = [a for a in client if a.get(C.TOOL_NAME) == "echo"]
    assert echo and {(a[C.SERVER], a[C.TRANSPORT], a[C.PROTOCOL_VERSION]) for a in echo} == {
        ("up", "tcp", "2026-07-28")
    }
    assert C.GENERATION not in echo[0] and C.REQUEST_ID not in echo[0], "no high-cardinality labels"
    listed = [a for a in client if a.get(C.METHOD) == "tools/list" and a.get(C.SERVER) == "up"]
    assert listed, "the SDK's own request spans (a sync's tools/list), renamed, are metered too"


async def test_a_sync_span_records_the_cache_mode_and_whether_each_listing_was_served_from_the_cache() -> None:
    with Recorded.start() as recorded:
        with sync_span("up", "reconnect", "use", generation=2) as sync:
            note_listing("tools", "use", True)
            note_listing("prompts", "use", False)
            sync.finished(ok=True)
        with sync_span("up", "initial", "refresh") as sync:
            note_listing("tools", "refresh", False)
            sync.finished(ok=False)
    first, second = recorded.named("mcp_supervisor.sync")
    assert dict(first.attributes or {}) == {
        C.SERVER: "up",
        C.GENERATION: 2,
        "mcp_supervisor.sync.reason": "reconnect",
        "mcp_supervisor.sync.cache_mode": "use",
        "mcp_supervisor.sync.cache_hits": ("tools",),
        "mcp_supervisor.sync.cache_misses": ("prompts",),
        "mcp_supervisor.sync.cache_hit": True,
    }
    assert (second.attributes or {})["mcp_supervisor.sync.cache_hit"] is False
    assert (second.attributes or {})[C.ERROR_TYPE] == "sync_failed"


async def test_the_sync_and_store_helpers_cost_nothing_while_telemetry_is_off() -> None:
    with Recorded.start() as recorded:
        TELEMETRY.on = False
        with sync_span("up", "initial", "refresh") as sync, store_span("read"):
            note_listing("tools", "refresh", False)
            sync.finished(ok=False)
    assert recorded.spans() == []


async def test_a_fleet_store_call_is_a_client_span_naming_the_operation_and_never_its_keys() -> None:
    with Recorded.start() as recorded:
        with store_span("read"):
            pass
        with pytest.raises(trio.TooSlowError), store_span("write"):
            raise trio.TooSlowError
    read, write = recorded.spans()
    assert (read.name, read.kind, dict(read.attributes or {})) == (
        "mcp_supervisor.catalog_store read",
        SpanKind.CLIENT,
        {"db.system.name": "redis", "db.operation.name": "read"},
    )
    assert (write.attributes or {})[C.ERROR_TYPE] == "timeout"


async def test_every_sync_of_a_server_is_a_span_naming_its_reason_and_cache_mode(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer([tool("echo")], name="a")
    supervisor = Supervisor(_settings(_server("a")), connector=Fleet(a=fake).connect)
    with Recorded.start() as recorded, trio.fail_after(60):
        async with running(supervisor):
            await supervisor.wait_first_attempts()
    (sync,) = recorded.named("mcp_supervisor.sync")
    attributes = dict(sync.attributes or {})
    assert (attributes[C.SERVER], attributes["mcp_supervisor.sync.reason"]) == ("a", "initial")
    assert attributes["mcp_supervisor.sync.cache_mode"] in ("use", "refresh")
