"""End to end: a 2026-era upstream is told the host's client capabilities, not the sidecar's (issue 30).

The fixture's ``caps`` tool answers the client capabilities its request came
with. A host that declares nothing (a bare ``mcp.Client``) and one that declares
sampling, elicitation and roots (the fidelity ``Recorder``) call it through the
sidecar, in both host eras and over both fronts, so the call takes each path:
the stdio splice (2026 host), the fast path (2026 host over HTTP) and the SDK
path (handshake-era host); to a server over HTTP, the fast path's own POST
(a host of either era, round 20). A handshake-era upstream was told what the sidecar
can relay at its ``initialize``, before any host connected, and that stays: a
server→host request the calling host cannot serve gets the error a direct
client would give (``tests/e2e/test_fidelity_routing.py``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Final

import pytest
import trio
from mcp.client.client import ConnectMode

from tests.fidelity_host import FRONTS, HOST_ERAS, Recorder
from tests.sidecar import (
    Host,
    fixture_server,
    http_supervisor_table,
    open_host,
    open_http_fixture,
    open_http_host,
    open_http_sidecar,
    scaled,
    text_of,
    write_settings,
)

pytestmark = pytest.mark.e2e

BOUND_SEC: Final = scaled(45)


@asynccontextmanager
async def _host(
    tmp_path: Path, front: str, mode: ConnectMode, *fixture_args: str, upstream: str = "stdio", **options: Any
) -> AsyncIterator[Host]:
    async with AsyncExitStack() as stack:
        if upstream == "stdio":
            server: dict[str, Any] = fixture_server("--tools", "caps", *fixture_args)
        else:
            server = {"url": (await stack.enter_async_context(open_http_fixture("--tools", "caps"))).url}
        async with _sidecar_host(tmp_path, front, mode, {"fx": server}, **options) as host:
            yield host


@asynccontextmanager
async def _sidecar_host(
    tmp_path: Path, front: str, mode: ConnectMode, servers: dict[str, Any], **options: Any
) -> AsyncIterator[Host]:
    if front == "stdio":
        async with open_host(write_settings(tmp_path, servers), mode, **options) as host:
            yield host
        return
    config = write_settings(tmp_path, servers, supervisor=http_supervisor_table())
    async with (
        open_http_sidecar(config) as sidecar,
        open_http_host(sidecar.url, sidecar.token, mode, **options) as host,
    ):
        yield host


async def _seen(host: Host) -> dict[str, Any]:
    await host.wait_tools(lambda names: "mcp__fx__caps" in names)
    seen: dict[str, Any] = json.loads(text_of(await host.call("mcp__fx__caps")))
    return seen


@pytest.mark.parametrize(
    ("front", "upstream"),
    [
        ("stdio", "stdio"),
        pytest.param("http", "stdio", marks=FRONTS[1].marks),
        ("stdio", "http"),
        pytest.param("http", "http", marks=FRONTS[1].marks),
    ],
)
@pytest.mark.parametrize("mode", HOST_ERAS)
async def test_a_2026_upstream_is_told_that_a_host_declaring_nothing_can_do_nothing_on_every_path(
    tmp_path: Path, mode: ConnectMode, front: str, upstream: str
) -> None:
    """Over HTTP upstream, a host of either era's call is our own POST (``upstream.http_calls``, round 20)."""
    with trio.fail_after(BOUND_SEC):
        async with _host(tmp_path, front, mode, upstream=upstream) as bare:
            seen = await _seen(bare)
    # The sidecar itself declares sampling (with tools), elicitation and roots: none of it may show.
    assert not {"sampling", "elicitation", "roots"} & set(seen), seen


async def test_a_2026_upstream_is_told_what_a_capable_host_declared_as_it_declared_it(tmp_path: Path) -> None:
    recorder = Recorder(name="full")
    with trio.fail_after(BOUND_SEC):
        async with _host(tmp_path, "stdio", "auto", **recorder.client_options(Host())) as full:
            seen = await _seen(full)
    assert {"sampling", "elicitation", "roots"} <= set(seen), seen
    assert "tools" not in seen["sampling"], "the host's own sampling capability, not the sidecar's (with tools)"


async def test_a_handshake_era_upstream_keeps_what_the_sidecar_declared_at_its_initialize(tmp_path: Path) -> None:
    with trio.fail_after(BOUND_SEC):
        async with _host(tmp_path, "stdio", "auto", "--legacy-only") as bare:
            seen = await _seen(bare)
            assert {"sampling", "elicitation", "roots"} <= set(seen), seen
