"""A read stream that delegates to another one, for the three places that watch a transport's incoming items.

``ReadStreamView`` is what the SDK's dispatcher needs of a read stream
(``receive``, async iteration that ends at EOF, ``close``/``aclose``, async
context manager) plus the duck-typed ``last_context`` it reads to run each
message's handlers in the sender's ``contextvars`` (streamable HTTP). Subclasses
override ``receive`` to look at or replace items; everything else delegates.

Concurrency: none of its own; one reader task calls ``receive`` at a time.
"""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
from mcp.shared.message import SessionMessage


class ReadStreamView:
    """Delegates every read-stream operation to ``inner``; override ``receive`` to watch items."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def last_context(self) -> contextvars.Context | None:
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> SessionMessage | Exception:
        item: SessionMessage | Exception = await self._inner.receive()
        return item

    def __aiter__(self) -> ReadStreamView:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> ReadStreamView:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
