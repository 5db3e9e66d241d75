"""A POST served to an ASGI app as ``ops.http1_exchange.Exchange`` serves it, detached answers included.

The HTTP front's own answers are unit-tested by calling the app directly, with
a ``receive`` and ``send`` of the test's own. ``post`` gives the app the
server's ``DETACH`` extension too, with its rules: the detached answer's
``send_now`` records each message at once (in the caller's task), the
answer's last message ends it (``Watcher.ended``, in that task), and while it
is incomplete the watcher hears ``silent`` every ``silent_sec`` and
``hung_up`` (then ``ended``) once the host hangs up. ``tests/ops/test_http1_server.py``
holds the real server to the same rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from supervisor.ops.http1_exchange import DETACH

Watch = Callable[[dict[str, Any]], None]


async def post(
    app: Any,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    *,
    hang_up: trio.Event | None = None,
    watch: Watch | None = None,
) -> list[dict[str, Any]]:
    """POST ``body`` to ``app``; the messages it sent, in order, once its answer is over.

    The host stays until the answer is complete, or hangs up once ``hang_up`` is set.
    ``watch`` sees each message as it is sent.
    """
    sent: list[dict[str, Any]] = []
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    complete = trio.Event()
    ended = trio.Event()
    detached: list[tuple[Any, float]] = []

    def record(message: dict[str, Any]) -> None:
        sent.append(message)
        if watch is not None:
            watch(message)
        if not message.get("more_body", True):
            complete.set()

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await _first(complete, hang_up)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        record(message)

    def detach(watcher: Any, silent_sec: float) -> Callable[[dict[str, Any]], None]:
        assert not detached, "an answer detached twice"
        detached.append((watcher, silent_sec))

        def send_now(message: dict[str, Any]) -> None:
            if ended.is_set():
                return
            record(message)
            if complete.is_set():
                ended.set()
                watcher.ended()

        return send_now

    scope = {"type": "http", "method": "POST", "headers": headers, "extensions": {DETACH: detach}}
    await app(scope, receive, send)
    if detached:
        watcher, silent_sec = detached[0]
        while not ended.is_set():
            with trio.move_on_after(silent_sec) as quiet:
                await _first(ended, hang_up)
            if ended.is_set():
                break
            if hang_up is not None and hang_up.is_set():
                ended.set()
                watcher.hung_up()
                watcher.ended()
            elif quiet.cancelled_caught:
                watcher.silent()
    return sent


async def _first(event: trio.Event, other: trio.Event | None) -> None:
    """Return once ``event`` or ``other`` is set."""
    if other is None:
        await event.wait()
        return
    async with trio.open_nursery() as nursery:

        async def waiting(on: trio.Event) -> None:
            await on.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(waiting, event)
        nursery.start_soon(waiting, other)
