"""One generation's catalog listings, every page: ``tools/list`` on a raw path, the other kinds through the SDK.

``list_all`` fetches every page of one kind (tools, prompts, resources,
templates). Tools and prompts go through the shared response cache (I4);
resource lists always ``bypass`` it (I9). The result is an ``OwnedListing``:
every definition in it was parsed (or copied out of the cache) for this call
and is held by nobody else, so the Registry keeps it without a deep copy.

Why ``tools/list`` is raw: on a cold start of 50 servers x 100 tools the SDK's
``Client.list_tools`` was a third of the sidecar's CPU per server. It validates
the listing twice (against the negotiated revision's wire model, dumping it
back to a dict, then into the version-free model) and deep-copies it into the
response cache (``copy.deepcopy`` over every schema). The raw path sends the
request through the session's own stamp and dispatcher (``compat.sdk.send_raw_request``,
as ``Upstream._tool_sender`` does for calls), shapes the dict exactly as
``ClientSession.send_request`` does (``ttlMs`` clamp, later-revision keys
dropped), validates it against the revision's wire model without the dump,
parses it once, and lets the session absorb it (``x-mcp-header`` filter, output
schemas for ``call_tool``). Around that it repeats ``Client._cached_fetch``
with the client's own ``ClientResponseCache``: the same keys, arms, lifetimes,
``use``/``refresh``/``bypass`` semantics and eviction generations, so I4-I7
and the fleet store see no difference. What changes is the copy the cache
makes of a page on write and on every serve: on a serve, ``CachedToolsPage``
copies itself by a JSON round trip of its own fields (about a third of a deep
copy's cost), which is a full, independent copy; on a write, the stored page
shares the fetched page's tools (``SharedOnWrite``), which nobody changes.

A listing that fails validation raises ``pydantic.ValidationError`` as the
SDK's did (the caller's ``ErrorTranslator`` makes it an ``UpstreamProtocolError``:
the whole listing is refused).

Concurrency: plain coroutines in the caller's task; no nursery. Waits are
unbounded here: the caller (the ServerActor's mailbox worker) bounds a sync
with ``startup_timeout_sec``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import cache
from typing import Any, Final, Self, cast

import mcp_types as types
import trio
from mcp import Client, MCPError
from mcp.client.caching import CacheMode
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.methods import SERVER_RESULTS
from pydantic import TypeAdapter

from supervisor.catalog.registry import Definition, Kind, OwnedListing
from supervisor.compat.listing import absorb_tool_listing, response_cache, shape_inbound_result
from supervisor.compat.sdk import send_raw_request
from supervisor.config.servers import ServerSettings
from supervisor.errors import UpstreamProtocolError

MAX_LIST_PAGES: Final = 1000
"""A paginator that never ends cannot hang a sync."""
TOOLS_LIST: Final = "tools/list"
LIST_METHODS: Final[dict[Kind, str]] = {
    "tools": TOOLS_LIST,
    "prompts": "prompts/list",
    "resources": "resources/list",
    "templates": "resources/templates/list",
}
FALLBACK_VERSION: Final = "2025-11-25"
"""The revision ``ClientSession.send_request`` validates against before a version is negotiated."""

Translate = Callable[[str], AbstractContextManager[None]]
"""Opens the error translation of one request (``Upstream._translate_errors``)."""


class CachedToolsPage(types.ListToolsResult):
    """A ``tools/list`` page as the raw path parses it: the same model, with a cheap deep copy.

    The response cache deep-copies a page when it stores it and again each
    time it serves it. Here that copy re-parses the page's own JSON (unset
    fields left unset, so ``ttlMs`` presence survives), which is a complete,
    independent copy at about a third of ``copy.deepcopy``'s cost.
    """

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        return self.model_validate_json(self.model_dump_json(by_alias=True, exclude_unset=True), by_name=False)


class SharedOnWrite(CachedToolsPage):
    """What ``list_tools_page`` hands the cache's write: a page whose copy there shares its tools.

    The cache stores a deep copy of what it is given, lest the caller change
    it afterwards. The caller here hands the fetched tools to the Registry,
    which keeps them as they are (``Registered.source``: read, never changed),
    so the stored page may hold the same tool objects. It is a plain
    ``CachedToolsPage`` (its own list of them), and what the cache serves later
    is still a full copy of it. Saves one copy of every page fetched (~0.4 ms per
    100 tools; a twentieth of a cold start's CPU).
    """

    @classmethod
    def of(cls, page: types.ListToolsResult) -> SharedOnWrite:
        return cls.model_construct(page.model_fields_set, **page.__dict__)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> CachedToolsPage:  # type: ignore[override]
        return CachedToolsPage.model_construct(self.model_fields_set, **{**self.__dict__, "tools": list(self.tools)})


@cache
def _wire_model(version: str) -> TypeAdapter[Any] | None:
    """The negotiated revision's ``tools/list`` result model (None for a revision the SDK does not map)."""
    row = SERVER_RESULTS.get((TOOLS_LIST, version))
    return None if row is None else TypeAdapter(cast(Any, row))  # a model class or a union of them


def parse_tools_page(raw: dict[str, Any], version: str | None) -> CachedToolsPage:
    """Validate a raw ``tools/list`` result as the SDK would, and parse it once.

    Raises:
        pydantic.ValidationError: The result is not a valid listing for ``version``.
    """
    version = version or FALLBACK_VERSION
    raw = shape_inbound_result(TOOLS_LIST, version, raw)
    wire_model = _wire_model(version)
    if wire_model is not None:
        # The SDK also dumps this validation back to a dict and throws it away: the check is all it keeps.
        wire_model.validate_python(raw, by_name=False)
    return CachedToolsPage.model_validate(raw, by_name=False)


async def list_tools_page(client: Client, cursor: str | None, cache_mode: CacheMode) -> types.ListToolsResult:
    """One ``tools/list`` page, through the client's response cache as ``Client.list_tools`` serves it.

    Raises:
        MCPError: The server answered with an error, or the connection closed.
        pydantic.ValidationError: The listing is invalid.
    """
    session = client.session  # a closed client raises here, never serves from its cache
    cache = response_cache(client)

    async def send() -> types.ListToolsResult:
        raw = await send_raw_request(session, TOOLS_LIST, {} if cursor is None else {"cursor": cursor})
        page = parse_tools_page(raw, session.protocol_version)
        return absorb_tool_listing(session, page, complete=cursor is None and page.next_cursor is None)

    if cache is None or cache_mode == "bypass":
        return await send()
    if cursor is not None:
        # Continuation pages skip the cache; an expired cursor means the listing changed.
        try:
            return await send()
        except MCPError as exc:
            if exc.code == INVALID_PARAMS:
                await cache.evict_method(TOOLS_LIST)
            raise
    if cache_mode == "use" and (hit := await cache.read(TOOLS_LIST, "")) is not None:
        served = cast(types.ListToolsResult, hit)  # the cache's own copy: ours to absorb and hand over
        return absorb_tool_listing(session, served, complete=served.next_cursor is None)
    generation = cache.capture(TOOLS_LIST, "")
    page = await send()
    await cache.write(TOOLS_LIST, "", SharedOnWrite.of(page), generation, cache_mode)
    return page


async def _list_page(
    client: Client, kind: Kind, cursor: str | None, cache_mode: CacheMode
) -> tuple[list[Definition], str | None]:
    match kind:
        case "tools":
            tools = await list_tools_page(client, cursor, cache_mode)
            return list(tools.tools), tools.next_cursor
        case "prompts":
            prompts = await client.list_prompts(cursor=cursor, cache_mode=cache_mode)
            return list(prompts.prompts), prompts.next_cursor
        case "resources":
            resources = await client.list_resources(cursor=cursor, cache_mode="bypass")  # I9
            return list(resources.resources), resources.next_cursor
        case "templates":
            templates = await client.list_resource_templates(cursor=cursor, cache_mode="bypass")  # I9
            return list(templates.resource_templates), templates.next_cursor


async def list_all(
    client: Client, settings: ServerSettings, kind: Kind, cache_mode: CacheMode, translate: Translate
) -> OwnedListing:
    """Fetch every page of one kind's listing.

    Every page comes out of a fresh parse or the cache's own copy (the SDK's
    for prompts and resources, ``CachedToolsPage`` for tools), so nobody else
    holds the definitions: they are handed over as an ``OwnedListing``.

    Raises:
        UpstreamUnavailable: The connection died (from ``translate``).
        UpstreamProtocolError: The server answered with an error, an invalid
            listing, more than ``max_tools`` entries, or pages without end.
    """
    name = settings.name
    limit = settings.max_tools
    method = LIST_METHODS[kind]
    items = OwnedListing()
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        with translate(method):
            try:
                page_items, cursor = await _list_page(client, kind, cursor, cache_mode)
            except MCPError as exc:
                if kind == "templates" and exc.code == METHOD_NOT_FOUND:
                    return OwnedListing()  # resources without templates
                raise
        items.extend(page_items)
        if len(items) > limit:
            raise UpstreamProtocolError(
                name,
                f"server {name!r}: {method} listed more than {limit} entries (max_tools = {limit}); "
                "the listing was refused. Raise max_tools for this server or narrow it with enabled_tools",
            )
        if cursor is None:
            return items
        await trio.lowlevel.checkpoint()  # a long listing yields between pages (I15)
    raise UpstreamProtocolError(name, f"server {name!r}: {method} did not end after {MAX_LIST_PAGES} pages")
