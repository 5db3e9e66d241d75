"""The capabilities a view declares (issue 57, item 4), and the prelude's answers held to the SDK's, field by field.

A host builds tools on what a server declares: Claude Code adds three resource
tools (2,082 bytes in every model request) for a server that declares
``resources``. A view declares a kind only when it serves it.

The prelude (``host.stdio.prelude``) answers ``initialize`` and
``server/discover`` before the SDK is imported, with ``host.capabilities``. The
SDK answers them too, through the Front's server and its capability middleware
(``host.lists``), for the HTTP front and for any host the prelude leaves to it.
These tests run a real Front in process over memory streams and compare the two
answers in every protocol version, for each set of facts the Registry gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
import trio
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from supervisor.catalog.disk import ALL_FACTS, ViewFacts
from supervisor.config.models import Settings
from supervisor.host import capabilities
from supervisor.host.capabilities import declared, discover_result, initialize_result, instructions
from supervisor.host.front import Front
from supervisor.host.relay import Relay
from supervisor.root import Supervisor

BOUND_SEC = 10.0
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "h", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
FACTS = {
    "none": ViewFacts(prompts=False, resources=False, templates=False),
    "prompts": ViewFacts(prompts=True, resources=False, templates=False),
    "resources": ViewFacts(prompts=False, resources=True, templates=False),
    "templates": ViewFacts(prompts=False, resources=False, templates=True),
    "all": ALL_FACTS,
}


def test_the_copied_protocol_versions_and_envelope_keys_are_the_sdks() -> None:
    assert capabilities.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    assert capabilities.MODERN_VERSIONS == MODERN_PROTOCOL_VERSIONS
    assert capabilities.SERVER_INFO_META_KEY == types.SERVER_INFO_META_KEY
    assert capabilities.PROTOCOL_VERSION_META_KEY == types.PROTOCOL_VERSION_META_KEY
    assert {types.CLIENT_INFO_META_KEY, types.CLIENT_CAPABILITIES_META_KEY} < capabilities.ENVELOPE_KEYS


def test_a_view_declares_only_the_kinds_it_serves() -> None:
    assert declared(FACTS["none"]) == {"logging": {}, "tools": {"listChanged": True}}
    assert set(declared(FACTS["prompts"])) == {"logging", "tools", "prompts", "completions"}
    assert set(declared(FACTS["resources"])) == {"logging", "tools", "resources"}
    assert declared(FACTS["templates"])["resources"] == {"listChanged": True, "subscribe": True}
    assert set(declared(FACTS["templates"])) == {"logging", "tools", "resources", "completions"}


def _facts_in(supervisor: Supervisor, facts: ViewFacts) -> None:
    """Make the Registry's catalog show ``facts`` (owner ``x``; no server pending, so the live facts count)."""
    listings: dict[Any, list[Any]] = {"tools": [types.Tool(name="t", input_schema={"type": "object"})]}
    listings["prompts"] = [types.Prompt(name="p")] if facts.prompts else []
    listings["resources"] = [types.Resource(uri="fixture://r", name="r")] if facts.resources else []
    listings["templates"] = [types.ResourceTemplate(uri_template="fixture://{x}", name="t")] if facts.templates else []
    supervisor.registry.swap_many("x", listings)


@asynccontextmanager
async def _front(facts: ViewFacts) -> AsyncIterator[tuple[Any, Any]]:
    """A Front over memory streams: yields its (send, receive) ends, as a host sees them."""
    relay = Relay()
    supervisor = Supervisor(Settings(), host=relay)
    _facts_in(supervisor, facts)
    front = Front(supervisor, relay)
    to_front, front_reads = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    front_writes, from_front = anyio.create_memory_object_stream[SessionMessage](8)
    async with to_front, from_front, trio.open_nursery() as nursery:
        nursery.start_soon(front.server.run, front_reads, front_writes, front.init_options)
        yield to_front, from_front
        nursery.cancel_scope.cancel()


async def _ask(facts: ViewFacts, method: str, params: dict[str, Any]) -> dict[str, Any]:
    with trio.fail_after(BOUND_SEC):
        async with _front(facts) as (send, receive):
            request = types.JSONRPCRequest(jsonrpc="2.0", id=1, method=method, params=params)
            await send.send(SessionMessage(request))
            answer = (await receive.receive()).message
    assert isinstance(answer, types.JSONRPCResponse), answer
    result: dict[str, Any] = answer.result
    return result


@pytest.mark.parametrize("facts", FACTS)
@pytest.mark.parametrize("requested", [*HANDSHAKE_PROTOCOL_VERSIONS, "1999-01-01"])
async def test_the_preludes_initialize_is_the_sdks_through_the_front(requested: str, facts: str) -> None:
    params = {"protocolVersion": requested, "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}
    sdk = await _ask(FACTS[facts], "initialize", params)
    assert initialize_result(requested, FACTS[facts], instructions("")) == sdk


@pytest.mark.parametrize("facts", FACTS)
async def test_the_preludes_server_discover_is_the_sdks_through_the_front(facts: str) -> None:
    sdk = await _ask(FACTS[facts], "server/discover", {"_meta": ENVELOPE})
    assert discover_result(FACTS[facts], instructions("")) == sdk
