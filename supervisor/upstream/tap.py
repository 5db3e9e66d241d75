"""What an upstream generation's transport shows the sidecar before the SDK sees it (DESIGN I13, I15).

``tapped`` wraps a transport's read stream in ``TappedReadStream``, which

* shows every notification to the generation's ``Tap`` first, in wire order
  and without awaiting (progress and request-scoped log notices then reach
  their host call before its result does; the SDK would hand them to
  separately spawned tasks), and
* refuses a listing of more than ``max_tools`` entries from a count, before
  the SDK validates thousands of models in one go.

Concurrency: runs in the transport reader's task; nothing here awaits except
the inner stream.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

import mcp_types as types
from mcp.shared.message import SessionMessage

from supervisor.compat.sdk import TransportStreams
from supervisor.wire.streams import ReadStreamView

logger = logging.getLogger(__name__)

Tap = Callable[[types.JSONRPCNotification, contextvars.Context | None], None]


LISTING_KEYS: Final = ("tools", "prompts", "resources", "resourceTemplates")


def refuse_oversized_listing(item: SessionMessage, limit: int) -> SessionMessage:
    """Turn a listing of more than ``limit`` entries into an error before the SDK validates it (I15).

    Validating 100,000 tool models takes seconds of CPU in one go; counting a
    list does not. The sync then fails with the count, and the previous
    generation stays (I2).
    """
    message = item.message
    if not isinstance(message, types.JSONRPCResponse) or not isinstance(message.result, dict):
        return item
    for key in LISTING_KEYS:
        listing = message.result.get(key)
        if isinstance(listing, list) and len(listing) > limit:
            error = types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"a listing page of {len(listing)} {key} exceeds max_tools = {limit}",
            )
            return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error))
    return item


class TappedReadStream(ReadStreamView):
    """A transport's read stream that shows every notification to ``tap`` first, in wire order.

    It also refuses oversized listings (``refuse_oversized_listing``) before they are validated.
    """

    def __init__(self, inner: Any, tap: Tap, max_listing: int) -> None:
        super().__init__(inner)
        self._tap = tap
        self._max_listing = max_listing

    async def receive(self) -> SessionMessage | Exception:
        item = await super().receive()
        if isinstance(item, SessionMessage):
            if isinstance(item.message, types.JSONRPCNotification):
                try:
                    self._tap(item.message, self.last_context)
                except Exception:  # the tap must never cost the connection
                    logger.exception("notification tap failed")
            else:
                item = refuse_oversized_listing(item, self._max_listing)
        return item


@asynccontextmanager
async def tapped(
    transport: AbstractAsyncContextManager[TransportStreams], tap: Tap, max_listing: int
) -> AsyncIterator[TransportStreams]:
    async with transport as (read_stream, write_stream):
        tapped: Any = TappedReadStream(read_stream, tap, max_listing)
        yield tapped, write_stream
