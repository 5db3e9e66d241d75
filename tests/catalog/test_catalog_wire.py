"""The first-page tools/list (``catalog.wire_form``): the SDK's own wire form, made once per tool, never stale."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp.server import Server
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.runner import ServerRunner
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS

from supervisor.catalog.registry import Registry
from supervisor.catalog.wire_form import ToolsListWireCache
from supervisor.config.models import Settings
from supervisor.host.front import Front
from supervisor.host.relay import Relay
from supervisor.root import Supervisor
from tests.fakes import tool

MODERN = "2026-07-28"
ENVELOPE = {
    PROTOCOL_VERSION_META_KEY: MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "h", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class _Ctx:
    def __init__(self, method: str, protocol_version: str, params: dict[str, Any] | None, initialized: bool) -> None:
        self.method = method
        self.protocol_version = protocol_version
        self.params = params
        self.session = SimpleNamespace(_connection=SimpleNamespace(initialize_accepted=initialized))


def _ctx(
    method: str = "tools/list",
    protocol_version: str = MODERN,
    params: dict[str, Any] | None = None,
    *,
    initialized: bool = True,
) -> ServerRequestContext[Any, Any]:
    if params is None and protocol_version in MODERN_PROTOCOL_VERSIONS:
        params = {"_meta": {**ENVELOPE, PROTOCOL_VERSION_META_KEY: protocol_version}}
    return cast("ServerRequestContext[Any, Any]", _Ctx(method, protocol_version, params, initialized))


def _cache(registry: Registry, server: Server[Any] | None = None, **kwargs: Any) -> ToolsListWireCache:
    server = server or Server("mcp-supervisor", version="1.2.3")
    return ToolsListWireCache(
        registry, settled=kwargs.pop("settled", lambda: True), stamp=lambda: server.server_info_stamp, **kwargs
    )


async def _sdk_only(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
    raise AssertionError(f"the SDK was asked for {ctx.method} {ctx.params}")


async def _first_page(cache: ToolsListWireCache, protocol_version: str = MODERN) -> dict[str, Any]:
    """A host's first-page list through the middleware, which must answer it without the SDK."""
    answer = await cache(_ctx(protocol_version=protocol_version), _sdk_only)
    assert isinstance(answer, dict)
    return answer


def _varied_tools() -> list[types.Tool]:
    """Tools using every field a version may keep, drop or reshape."""
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return [
        tool("plain"),
        types.Tool(
            name="rich",
            title="Rich",
            description="d\u00e9j\u00e0",
            input_schema=schema,
            output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
            annotations=types.ToolAnnotations(title="A", read_only_hint=True, open_world_hint=False),
            icons=[types.Icon(src="https://example.com/i.png", mime_type="image/png", sizes=["16x16"])],
            execution=types.ToolExecution(task_support="optional"),
            _meta={"vendor/x": {"y": [1, 2]}},
        ),
    ]


async def test_the_answer_is_the_sdks_own_wire_form_in_every_protocol_version() -> None:
    registry = Registry()
    registry.swap("a", _varied_tools())
    registry.swap("b", [tool("z", "last")])
    server: Server[Any] = Server("mcp-supervisor", version="1.2.3")
    cache = _cache(registry, server)
    runner = ServerRunner(server, cast(Any, None), None)
    for version in SUPPORTED_PROTOCOL_VERSIONS:
        sdk = runner._serialize("tools/list", version, types.ListToolsResult(tools=registry.tools()))
        assert cache.answer(version) == sdk, version
        assert await _first_page(cache, version) == sdk, version


async def test_a_change_of_one_server_makes_only_that_servers_wire_forms_again() -> None:
    registry = Registry()
    registry.swap("a", [tool("1"), tool("2"), tool("3")])
    registry.swap("b", [tool("4"), tool("5")])
    cache = _cache(registry)
    first = await _first_page(cache)
    assert cache.forms_made == 5
    registry.swap("b", [tool("4"), tool("6", "new")])
    second = await _first_page(cache)
    assert cache.forms_made == 7, "only b's new generation"
    assert [t["name"] for t in second["tools"]] == ["mcp__a__1", "mcp__a__2", "mcp__a__3", "mcp__b__4", "mcp__b__6"]
    assert first["tools"][0] is second["tools"][0], "a's forms were kept"
    await _first_page(cache, "2025-11-25")
    assert cache.forms_made == 12, "another version: every form once more"


async def test_warming_makes_new_forms_ahead_in_every_version_a_host_has_spoken_before_it_lists() -> None:
    registry = Registry()
    cache = _cache(registry)
    registry.swap("a", [tool("1")])
    cache.warm()
    assert cache.forms_made == 0, "no host has spoken yet: nothing to make ahead"

    async def initialize(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        return {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}

    async def discover(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        return {"supportedVersions": [MODERN]}

    # A handshake-era host counts in the version it was given, a 2026-era one in its request's.
    await cache(_ctx("initialize", "2025-11-25", {"protocolVersion": "2025-11-25"}, initialized=False), initialize)
    await cache(_ctx("server/discover"), discover)
    await cache(_ctx("ping", "1999-01-01", {}), discover)  # not a version anyone speaks: never made ahead
    assert cache.host_versions == {"2025-06-18", MODERN}
    cache.warm()
    assert cache.forms_made == 2, "a's tool in 2025-06-18 and 2026-07-28, before either host listed"
    registry.swap("b", [tool("2"), tool("3")])
    cache.warm()
    assert cache.forms_made == 6, "b's two tools in both versions"
    answer = await _first_page(cache)
    await _first_page(cache, "2025-06-18")
    assert cache.forms_made == 6, "both answers were joins"
    assert [t["name"] for t in answer["tools"]] == ["mcp__a__1", "mcp__b__2", "mcp__b__3"]


async def test_answers_are_kept_per_registry_version_and_protocol_once_start_up_settled() -> None:
    registry = Registry()
    registry.swap("srv", [tool("a")])
    settled = False
    cache = _cache(registry, settled=lambda: settled)
    unsettled = await _first_page(cache)
    assert await _first_page(cache) is not unsettled, "not kept before start-up settles"
    assert cache.encoded(MODERN) is None
    settled = True
    kept = await _first_page(cache)
    assert await _first_page(cache) is kept
    assert await _first_page(cache, "2025-11-25") is not kept
    encoded = cache.encoded(MODERN)
    assert encoded is not None and b"mcp__srv__a" in encoded
    registry.swap("srv", [tool("a"), tool("b")])
    assert cache.encoded(MODERN) is None, "never the old generation"
    fresh = await _first_page(cache)
    assert [t["name"] for t in fresh["tools"]] == ["mcp__srv__a", "mcp__srv__b"]


async def test_the_first_answer_waits_as_the_list_handler_does_and_lists_what_came_meanwhile() -> None:
    registry = Registry()

    async def wait() -> None:
        registry.swap("late", [tool("t")])

    cache = _cache(registry, wait=wait)
    answer = await _first_page(cache)
    assert [t["name"] for t in answer["tools"]] == ["mcp__late__t"]


@pytest.mark.parametrize(
    ("method", "params", "initialized"),
    [
        ("tools/list", {"cursor": "c"}, True),
        ("prompts/list", None, True),
        ("tools/call", {"name": "x"}, True),
        ("tools/list", None, False),  # before the handshake: the SDK refuses it
        ("tools/list", {"_meta": 5}, True),  # malformed: the SDK refuses it
    ],
)
async def test_a_cursor_another_method_or_a_list_the_sdk_refuses_goes_to_the_sdk(
    method: str, params: dict[str, Any] | None, initialized: bool
) -> None:
    registry = Registry()
    registry.swap("srv", [tool("a")])
    cache = _cache(registry)
    await _first_page(cache)  # a kept answer is no reason to skip the SDK's checks

    async def sdk(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        return {"from": "sdk"}

    assert await cache(_ctx(method, params=params, initialized=initialized), sdk) == {"from": "sdk"}


async def test_a_definition_the_sieve_refuses_leaves_the_answer_to_the_sdk() -> None:
    registry = Registry()
    registry.claim("admin", "mcp__bad", types.Tool.model_construct(name="mcp__bad", input_schema={"type": "string"}))

    async def sdk(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        return {"from": "sdk"}

    assert await _cache(registry)(_ctx(), sdk) == {"from": "sdk"}


async def test_the_front_makes_new_forms_as_servers_swap_in_so_the_first_answer_is_a_join() -> None:
    supervisor = Supervisor(Settings(mcp_servers={}))
    front = Front(supervisor, Relay())
    cache = front.tools_list_cache
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run)
            await nursery.start(front.run)
            await trio.testing.wait_all_tasks_blocked()  # the change notifier is waiting
            await _first_page(cache)  # a host listed in the 2026 era
            supervisor.registry.swap("a", [tool("1"), tool("2")])
            await trio.testing.wait_all_tasks_blocked()  # the change notifier ran
            assert cache.forms_made == 2
            answer = await _first_page(cache)
            nursery.cancel_scope.cancel()
    assert cache.forms_made == 2, "the answer made no form of its own"
    assert [t["name"] for t in answer["tools"]] == ["a__1", "a__2"]
