"""A handshake-era HTTP session's plain call to a 2026-era server off the splice, run on the fast path (issue 29).

``host.http_handshake_calls`` takes a handshake-era session's plain
``tools/call`` POST; when ``path_of`` says ``"fast"`` for it (the server's
generation is 2026-era and has no splice ready: a server over HTTP, as a
rule), ``FastCall.serve`` runs it in the POST's own task through the fast
path's runner (``ToolCalls.call_tool_wire``: routing, ``tool_timeout_sec``,
errors, the unknown-tool heal, metrics, the input rounds run in the sidecar,
the result in the handshake shape) instead of the SDK's session transport,
dispatcher, server runner and client: 2,845 us of sidecar CPU per call before
(``python -m bench --quick p2``, pair ``httpboth_h2025``).

The call's context is built on the session's connection
(``compat.sdk.request_context_on``), with the call's ``PostAsker`` as its
channel: its log messages ride the call's own response as events, in order
with its answer, and an input round's questions are asked there, the host's
reply POST settling them (``HandshakeCalls``). While it runs, the response
pings every ``PING_SEC`` of silence, as the splice's does. A hang-up leaves
the call running, its answer going nowhere (the era cancels by notice; the
SDK's transport does the same), and fails its questions; the host's
``notifications/cancelled`` cancels it (``cancel``), and it is answered
``REQUEST_CANCELLED``, as the SDK's transport answers. What it raises is the
SDK dispatcher's error (``host.tool_calls.handshake_error_data``).

Concurrency: ``serve`` runs in the POST's task; its nursery holds the
keepalive watcher, cancelled once the answer is written. ``cancel`` is
synchronous, from the cancel POST's task. ``done`` is called once, when the
call is over, answered or not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import trio
from mcp.server.streamable_http import REQUEST_CANCELLED

from supervisor.compat.sdk import request_context_on
from supervisor.host.http_answers import PING_SEC, PostAnswer
from supervisor.host.tool_calls import handshake_error_data
from supervisor.wire.codec import to_json

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from starlette.types import Receive, Send

    from supervisor.catalog.registry import RegisteredTool
    from supervisor.host.front import Front
    from supervisor.server_actor import ServerActor


class Asker(Protocol):
    """The call's channel to its host (``http_handshake_calls.PostAsker``): the session, and its response."""

    connection: Connection
    stream: PostAnswer | None

    def close(self) -> None: ...

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None: ...

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]: ...


@dataclass(eq=False)
class FastCall:
    """One handshake-era session's call on the fast path, run by its POST's task (``serve``)."""

    front: Front
    asker: Asker
    host_id: str | int
    params: dict[str, Any]
    routed: tuple[RegisteredTool, ServerActor]
    arguments: dict[str, Any] | None
    headers: list[tuple[bytes, bytes]]
    """Sent with the answer (the session's ``Mcp-Session-Id``)."""
    done: Callable[[], None]
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)

    def cancel(self) -> None:
        """The host's ``notifications/cancelled``: the call ends, answered ``REQUEST_CANCELLED``."""
        self.scope.cancel()

    async def serve(self, receive: Receive, send: Send) -> None:
        """Run the call, ping while it is silent, and write its answer on the POST's response."""
        stream = self.asker.stream = PostAnswer(send, self.headers)
        meta = self.params.get("_meta")
        ctx = request_context_on(
            self.asker.connection, "tools/call", self.host_id, self.params, outbound=self.asker, meta=meta
        )
        tool, actor = self.routed
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._keep_alive, stream, receive)
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": self.host_id}
                with self.scope:
                    try:
                        reply["result"] = await self.front.tool_calls.call_tool_wire(
                            ctx, tool, actor, self.arguments, own_span="http"
                        )
                    except Exception as exc:  # what the SDK's dispatcher maps, mapped the same way
                        reply["error"] = handshake_error_data(exc).model_dump(mode="json", exclude_none=True)
                if self.scope.cancelled_caught:
                    reply["error"] = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}
                await stream.answer(to_json(reply), 200)
                nursery.cancel_scope.cancel()
        finally:
            self.asker.close()  # a question still waiting for the host fails: the call is over
            self.done()

    async def _keep_alive(self, stream: PostAnswer, receive: Receive) -> None:
        """Ping every ``PING_SEC`` of silence; at a hang-up, stop, and fail the call's questions (the call goes on)."""
        while True:
            with trio.move_on_after(PING_SEC):
                message = await receive()
                if message["type"] == "http.disconnect":
                    self.asker.close()
                    return
                continue
            await stream.ping()
