"""The one place that touches coredis's private API (STYLE: private names live in one compat module).

coredis 6.9 creates six anyio memory streams per connection in
``BaseConnection.__init__`` and closes them only when ``run`` gets past
``_connect()``. A connection attempt that fails there (Redis down, a missing
unix socket) leaves them open, and each is reported as a ``ResourceWarning``
when collected: one burst per probe of an unreachable store. ``patch_connection_cleanup``
wraps ``run`` so that a failed attempt closes them. Idempotent; the assumption
(the six stream attributes) is checked by ``tests/fleet/test_fleet_store.py``.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from coredis.connection._base import BaseConnection

CONNECTION_STREAMS: Final = (
    "_write_buffer_in",
    "_write_buffer_out",
    "_push_message_buffer_in",
    "_push_message_buffer_out",
    "_streamed_message_buffer_in",
    "_streamed_message_buffer_out",
)


def patch_connection_cleanup() -> None:
    """Make a failed connection attempt close its buffers (once per process)."""
    original = BaseConnection.run
    if getattr(original, "_supervisor_patched", False):
        return

    @functools.wraps(original)
    async def run(self: BaseConnection, *args: Any, **kwargs: Any) -> None:
        try:
            await original(self, *args, **kwargs)
        finally:
            # On success the streams were closed by run's own ``async with``; closing again is a no-op.
            for name in CONNECTION_STREAMS:
                stream = getattr(self, name, None)
                if stream is not None:
                    stream.close()

    run._supervisor_patched = True  # type: ignore[attr-defined]
    BaseConnection.run = run  # type: ignore[method-assign]
