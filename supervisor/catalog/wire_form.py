"""The host's first-page ``tools/list`` answer, built from per-tool wire forms and kept per Registry version.

With thousands of tools, turning the catalog into its wire form through the
SDK (model → dict → per-version validation and sieve → ``serverInfo`` stamp)
costs far more than anything else the Front does: 40-60 ms for 5,000 tools,
on the host's critical path when it is the first answer after a cold start.
This Front middleware answers a first-page ``tools/list`` itself:

* each tool's wire form, per protocol version, is made once per Registry
  entry (``Registered.wire``), by the SDK's own per-version sieve
  (``serialize_server_result``) run over every entry still lacking it in one
  batch. An entry lives for one generation of its server, so a change of one
  server re-makes only that server's forms;
* the answer is the SDK's own envelope for an empty listing in that version
  (cache fields, ``resultType`` and the ``serverInfo`` stamp in the 2026 era)
  around those forms, so it is exactly what the SDK's pipeline would give
  (``tests/catalog/test_catalog_wire.py`` compares them for every supported version);
* ``warm`` makes the forms of new entries for every version a host speaks, as
  servers swap in during a cold start, so the first answer is a join. A host
  counts from its first request that passes here (``initialize``'s negotiated
  version, or any request's), not from its first list: a host lists at once,
  but that list waits for the servers still starting, and forms made only
  then were 40 ms of the answer's critical path with 5,000 tools (issue 11).

Middleware runs before the SDK's own checks of a request, so the middleware
makes them first: a request the SDK would refuse (malformed params, or a
handshake-era connection that has not initialized) goes to the SDK, which
refuses it. Before answering, the middleware waits as the Front's own list
handler does (``wait``: servers still on their first attempt, bounded). An answer built
after start-up settled is kept until the Registry's version moves. A tool the
sieve refuses, a cursor, or any other method goes through the SDK unchanged.

It sits innermost in ``Server.middleware``, so the OpenTelemetry span still
wraps every request; the runner copies a middleware's dict before it goes on,
so a kept answer is never mutated. Synchronous bookkeeping only; no locks.

``encoded`` gives the same answer as JSON bytes, encoded once per version, for
the stdio wire splice (``host.stdio.reader``), which writes a first-page listing to a
stdio host without the SDK re-validating and re-encoding 5,000 tools.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import SERVER_INFO_META_KEY
from mcp_types import methods as sdk_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS
from pydantic import ValidationError

from supervisor.catalog.registry import RegisteredTool
from supervisor.compat.sdk import connection_of

logger = logging.getLogger(__name__)

_METHOD = "tools/list"


async def _no_wait() -> None:
    return None


def sdk_would_refuse(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the SDK refuses this request before any handler runs (its params, or no handshake yet).

    Middleware runs ahead of those checks, so an answer a middleware gives must make them first.
    """
    if not connection_of(ctx.session).initialize_accepted:
        return True
    try:
        sdk_methods.validate_client_request(ctx.method, ctx.protocol_version, ctx.params)
    except (ValidationError, KeyError, ValueError):
        return True
    return False


class ListedTools(Protocol):
    """What the cache lists: a Registry or a view of it (``catalog.views.CatalogView``)."""

    @property
    def version(self) -> int: ...

    def tool_entries(self) -> list[RegisteredTool]: ...


class ToolsListWireCache:
    """Answer a first-page ``tools/list`` from per-tool wire forms, kept per Registry version.

    Args:
        registry: Whose tools are listed (a view), and whose ``version`` decides freshness.
        settled: Whether an answer may be kept now (the first answers of a cold
            start wait for servers still starting; those are never kept).
        stamp: The ``serverInfo`` stamp of a 2026-era result (a fresh dict per call).
        wait: What the Front's list handler waits for before it answers.
        answered: Called in the step that makes each first-page answer (the Front's record of what hosts hold, I22).
    """

    def __init__(
        self,
        registry: ListedTools,
        *,
        settled: Callable[[], bool],
        stamp: Callable[[], dict[str, Any]],
        wait: Callable[[], Awaitable[None]] = _no_wait,
        answered: Callable[[], None] = lambda: None,
    ) -> None:
        self._registry = registry
        self.answered = answered
        self._settled = settled
        self._stamp = stamp
        self._wait = wait
        self._version = -1
        self._by_protocol: dict[str, dict[str, Any]] = {}
        self._encoded: dict[str, bytes] = {}
        self._envelopes: dict[str, dict[str, Any]] = {}
        self._host_versions: set[str] = set()
        """Every protocol version a host has spoken: ``warm`` makes their forms ahead."""
        self.forms_made = 0
        """How many per-tool wire forms were made (tests count the work)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != _METHOD or (ctx.params and ctx.params.get("cursor")):
            result = await call_next(ctx)
            self._note_host_version(ctx, result)
            return result
        version = ctx.protocol_version
        if sdk_would_refuse(ctx):
            return await call_next(ctx)
        self._check_version()
        cached = self._by_protocol.get(version)
        if cached is not None:
            self.answered()
            return cached
        self._note_host_version(ctx, None)
        await self._wait()
        answer = self.answer(version)
        if answer is None:
            return await call_next(ctx)  # the SDK's handler answers, and records it
        self.answered()
        return answer

    @property
    def host_versions(self) -> frozenset[str]:
        """The protocol versions hosts have spoken so far (``warm`` makes forms in each)."""
        return frozenset(self._host_versions)

    def _note_host_version(self, ctx: ServerRequestContext[Any, Any], result: HandlerResult) -> None:
        """Remember the version a host speaks (``initialize``: the one it was given), so ``warm`` serves it."""
        version = result.get("protocolVersion") if ctx.method == "initialize" and isinstance(result, dict) else None
        version = version if isinstance(version, str) else ctx.protocol_version
        if version in SUPPORTED_PROTOCOL_VERSIONS:  # never a made-up version: the set stays small
            self._host_versions.add(version)

    def answer(self, version: str) -> dict[str, Any] | None:
        """The first-page answer in ``version`` for the Registry as it is now; None if the SDK must build it."""
        self._check_version()
        cached = self._by_protocol.get(version)
        if cached is not None:
            return cached
        entries = self._registry.tool_entries()
        try:
            envelope = self._envelope(version)
            self._make_forms(version, entries)
        except (ValidationError, KeyError, ValueError):
            logger.debug("tools/list in %s left to the SDK: a definition does not fit its surface", version)
            return None
        answer = {**envelope, "tools": [entry.wire[version] for entry in entries]}
        if version in MODERN_PROTOCOL_VERSIONS:
            answer["_meta"] = {**answer.get("_meta", {}), SERVER_INFO_META_KEY: self._stamp()}
        if self._settled():
            self._by_protocol[version] = answer
        return answer

    def warm(self) -> None:
        """Make the wire forms of entries that lack them, in every version a host has spoken."""
        if not self._host_versions:
            return
        entries = self._registry.tool_entries()
        for version in self._host_versions:
            try:
                self._make_forms(version, entries)
            except (ValidationError, KeyError, ValueError):
                logger.debug("tools/list forms in %s not made ahead: a definition does not fit its surface", version)

    def encoded(self, protocol_version: str) -> bytes | None:
        """The kept first-page answer for ``protocol_version`` as JSON bytes, or None if none is kept."""
        self._check_version()
        encoded = self._encoded.get(protocol_version)
        if encoded is None:
            cached = self._by_protocol.get(protocol_version)
            if cached is None:
                return None
            encoded = self._encoded[protocol_version] = json.dumps(cached, separators=(",", ":")).encode()
        return encoded

    def _check_version(self) -> None:
        if self._version != self._registry.version:
            self._version = self._registry.version
            self._by_protocol.clear()
            self._encoded.clear()

    def _envelope(self, version: str) -> dict[str, Any]:
        """The SDK's wire form of an empty listing in ``version``, without its stamp (made once per version)."""
        envelope = self._envelopes.get(version)
        if envelope is None:
            empty = types.ListToolsResult(tools=[]).model_dump(by_alias=True, mode="json", exclude_none=True)
            envelope = sdk_methods.serialize_server_result(_METHOD, version, empty)
            if version in MODERN_PROTOCOL_VERSIONS:
                envelope.setdefault("resultType", "complete")
            del envelope["tools"]
            self._envelopes[version] = envelope
        return envelope

    def _make_forms(self, version: str, entries: list[RegisteredTool]) -> None:
        """Give every entry lacking one its wire form in ``version``, through the SDK's sieve in one batch.

        The forms are made of the definitions as transformed (``shown``: the
        upstream's own without a transform) and renamed in the form: a tool's
        name is a plain string on every surface, so the sieve treats the raw
        name as it would the public one, and no renamed model is made for it (``Registered.definition``).
        """
        missing = [entry for entry in entries if version not in entry.wire]
        if not missing:
            return
        dumped = types.ListToolsResult(tools=[entry.shown for entry in missing]).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        forms = sdk_methods.serialize_server_result(_METHOD, version, dumped)["tools"]
        for entry, form in zip(missing, forms, strict=True):
            form["name"] = entry.key
            entry.wire[version] = form
        self.forms_made += len(missing)


def prompts_answer(prompts: list[types.Prompt], version: str, stamp: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The first-page ``prompts/list`` answer in ``version`` as the SDK's pipeline makes it (sieve, then stamp).

    What the view snapshot keeps for the prelude (``host.stdio.snapshots``); few prompts, so nothing is kept per entry.

    Raises:
        pydantic.ValidationError, KeyError, ValueError: A prompt does not fit the version's surface.
    """
    dumped = types.ListPromptsResult(prompts=prompts).model_dump(by_alias=True, mode="json", exclude_none=True)
    answer = sdk_methods.serialize_server_result("prompts/list", version, dumped)
    if version in MODERN_PROTOCOL_VERSIONS:
        answer.setdefault("resultType", "complete")
        answer["_meta"] = {**answer.get("_meta", {}), SERVER_INFO_META_KEY: stamp()}
    return answer
