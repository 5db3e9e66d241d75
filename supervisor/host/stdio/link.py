"""The Front over stdio: the one host that started us, on our stdin/stdout.

``StdioHostLink.run`` serves the Front's MCP server over the cancellable stdio
wire (``wire.stdio``). The wire tracks every request the host sent and every
answer written back (``wire.stdio.Unanswered``, shared with the splice), which
gives two guarantees:

* **EOF with requests pending.** A host that writes its requests and then
  closes stdin (``printf … | mcp-supervisor run``, ``run < requests.jsonl``)
  still gets every answer: the end of input reaches the server only once the
  pending requests are answered, or after ``shutdown_grace_sec``.
* **Graceful stop.** ``wait_idle`` returns when every request has been
  answered *on the wire* (not merely when its handler returned: the SDK writes
  the answer after that), so cancelling the connection then loses nothing.

Listen streams (``subscriptions/listen``) stay open by design and are not
counted; the Front ends them on shutdown.

Plain 2026-era ``tools/call`` requests for 2026-era stdio upstreams skip the
SDK altogether: the wire splice (``host.stdio.reader.HostSplice``) takes them off the
wire and answers them on it, tracked in the same unanswered set. First-page
``tools/list`` requests too, in either era (``_HandshakeWatch`` tells the
splice a handshake-era host's version).

Concurrency: ``run`` owns a nursery with the relay task (server → wire) next
to the server, outside the host scope, so answers produced before the scope
was cancelled still reach the wire. ``close`` cancels the host scope and waits
at most ``HOST_CLOSE_GRACE_SEC``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import anyio
import mcp_types as types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from supervisor.host.change_notices import EncodedAnswer
from supervisor.host.front import Front
from supervisor.host.stdio.prelude import REPLAYED_INITIALIZE_ID, Handover, Prelude
from supervisor.host.stdio.reader import HostSplice
from supervisor.host.stdio.snapshots import SnapshotWriter
from supervisor.wire.stdio import Unanswered, WriteStream, open_stdio_wire
from supervisor.wire.streams import ReadStreamView

logger = logging.getLogger(__name__)

HOST_CLOSE_GRACE_SEC: Final = 5.0
"""How long closing the host connection (flushing the last answers) may take before it is cancelled."""


class _HandshakeWatch:
    """Tells the wire splice the version a handshake-era host negotiated, read off the SDK's own traffic.

    The host's ``initialize`` requests are noted as the SDK reads them, and the
    version is taken from the SDK's answer to one: the SDK commits it before it
    answers, so from then on a list the splice answers is answered in the version
    the SDK would use. A later ``initialize`` moves it the same way.
    """

    def __init__(self, splice: HostSplice) -> None:
        self._splice = splice
        self._initialize_ids: set[types.RequestId] = set()

    def saw(self, item: SessionMessage | Exception) -> None:
        if isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
                self._initialize_ids.add(message.id)

    def answered(self, message: SessionMessage) -> None:
        if not self._initialize_ids:
            return
        answer = message.message
        if not isinstance(answer, types.JSONRPCResponse | types.JSONRPCError) or answer.id is None:
            return
        if answer.id in self._initialize_ids:
            self._initialize_ids.discard(answer.id)
            version = answer.result.get("protocolVersion") if isinstance(answer, types.JSONRPCResponse) else None
            if version in HANDSHAKE_PROTOCOL_VERSIONS:
                self._splice.handshake_version = version


class _WatchedReader(ReadStreamView):
    """The wire's read stream, showing the handshake watch each request the SDK reads."""

    def __init__(self, inner: Any, watch: _HandshakeWatch) -> None:
        super().__init__(inner)
        self._watch = watch

    async def receive(self) -> SessionMessage | Exception:
        item = await super().receive()
        self._watch.saw(item)
        return item


class StdioHostLink:
    """The one host that started us, over our stdin/stdout."""

    def __init__(
        self,
        front: Front,
        stop: trio.Event,
        *,
        grace_sec: float,
        prelude: Prelude | None = None,
        snapshots: SnapshotWriter | None = None,
    ) -> None:
        """``prelude``: what answered the host while the sidecar started (its wire and lines are taken over);
        ``snapshots``: keeps the view's snapshot on disk for the next start's prelude (the file backend)."""
        self._front = front
        self._stop = stop
        self._grace_sec = grace_sec
        self._prelude = prelude
        self._snapshots = snapshots
        self._scope = trio.CancelScope()
        self._done = trio.Event()
        self._unanswered = Unanswered()
        self.splice = HostSplice(front, self._unanswered)
        """The wire splice's host end (tests read ``splice.taken``)."""
        self._watch = _HandshakeWatch(self.splice)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the host until it hangs up or ``close``; either way, set the stop event."""
        front, splice = self._front, self.splice
        handover = await self._prelude.hand_over() if self._prelude is not None else None
        if handover is not None:
            self._take_over(handover)
        try:
            async with (
                open_stdio_wire(
                    splice.on_line,
                    splice.direct,
                    splice.flush_requests,
                    splice.linger_sec,
                    unanswered=self._unanswered,
                    eof_grace_sec=self._grace_sec,
                    pipes=handover.pipes if handover is not None else None,
                    replay=handover.lines if handover is not None else (),
                ) as (wire_read, wire_write),
                trio.open_nursery() as relay_nursery,
            ):
                self.splice.attach(wire_write.clone())
                if self._snapshots is not None:
                    front.lists.on_answer = self._snapshots.poke
                    relay_nursery.start_soon(self._snapshots.serve)
                # The relay lives outside the host scope: answers the server produced
                # before that scope was cancelled still reach the wire.
                write_stream, to_relay = anyio.create_memory_object_stream[SessionMessage](0)
                relay_nursery.start_soon(self._relay_to_host, to_relay, wire_write)
                read_stream: Any = _WatchedReader(wire_read, self._watch)
                with self._scope:
                    async with trio.open_nursery() as calls:
                        splice.fast.nursery = calls  # the fast-path calls taken off the wire run here
                        task_status.started()
                        await front.server.run(read_stream, write_stream, front.init_options)
                        splice.fast.nursery = None
                        calls.cancel_scope.cancel()  # as the SDK's server cancels its handlers at its end
                write_stream.close()  # the server closes it too; this ends the relay on every path
                self.splice.attach(None)  # closes its clone of the wire, so the writer can drain and end
                relay_nursery.cancel_scope.cancel()  # the snapshot writer's work ends with the host
            if not self._scope.cancel_called:
                logger.info("host closed the connection; stopping")
        finally:
            self._stop.set()
            self._done.set()

    def _take_over(self, handover: Handover) -> None:
        """Go on from where the prelude stopped: its host's version, what it declared, what it answered (I22)."""
        lists = self._front.lists
        lists.startup_facts = handover.facts
        lists.startup_snapshot = handover.snapshot
        if handover.handshake_version is not None:
            # The replayed initialize reaches the SDK first, but a line behind it may reach the splice before the
            # SDK's answer to it has been seen (``_HandshakeWatch``): the splice knows the version from here.
            self.splice.handshake_version = handover.handshake_version
            lists.declared_facts = handover.facts
        for answer in handover.answered:
            self._front.received.answered_from_disk(answer.kind, EncodedAnswer(answer.version, answer.digest))

    def refuse_new(self) -> None:
        """Nothing to do: there is one host, and the Front refuses its new calls."""

    async def wait_idle(self) -> None:
        await self._unanswered.wait_idle()

    async def close(self) -> None:
        self._scope.cancel("mcp-supervisor is stopping")
        with trio.move_on_after(HOST_CLOSE_GRACE_SEC):
            await self._done.wait()

    async def _relay_to_host(self, source: MemoryObjectReceiveStream[SessionMessage], wire: WriteStream) -> None:
        """Forward the server's messages to the wire (whose writer settles the requests they answer)."""
        async with source, wire:
            async for message in source:
                if self._replayed_initialize_answer(message):
                    continue
                try:
                    await wire.send(message)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    logger.debug("host wire closed; dropping outgoing messages")
                    self._unanswered.answered(message)  # never written: nobody waits for it any more
                self._watch.answered(message)

    def _replayed_initialize_answer(self, message: SessionMessage) -> bool:
        """Whether ``message`` is the SDK's answer to the prelude's replayed ``initialize`` (the host has its own)."""
        answer = message.message
        if not isinstance(answer, types.JSONRPCResponse | types.JSONRPCError) or answer.id != REPLAYED_INITIALIZE_ID:
            return False
        self._unanswered.settle(REPLAYED_INITIALIZE_ID)
        self._watch.answered(message)
        if isinstance(answer, types.JSONRPCError):
            logger.error(
                "the SDK refused the host's initialize that the prelude had answered (%s); "
                "the host's session may not work: please report this", answer.error.message,
            )  # fmt: skip
        return True
