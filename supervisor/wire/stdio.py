"""Cancellable stdio wire for MCP servers running under trio.

The SDK's `mcp.server.stdio.stdio_server()` reads stdin in a worker thread that
cannot be cancelled, so a process serving over it cannot stop while its peer is
idle (DESIGN.md §7). `open_stdio_wire` replaces it with trio `FdStream`s over
duplicates of fd 0 and fd 1, bridged to anyio memory streams of the shape
`Server.run` expects.

Stdin may be anything a launcher hands a child: a pipe, a socket, a terminal, a
regular file or ``/dev/null`` (``wire.pipes.PipeReader`` reads the last two without
epoll, which refuses them).

A peer that writes its requests and closes its end at once (``printf … |
server``, ``server < requests.jsonl``) still gets every answer, as the SDK's own
stdio servers give it: the wire counts the requests it reads and the answers it
writes (``Unanswered``), and its end of input reaches the server only once every
request read is answered on the wire, or after ``eof_grace_sec``.

Concurrency: the context manager owns one nursery with two tasks, a reader
(wire → `read` stream, one JSON-RPC message per line; unparseable lines are
delivered as exception values) and a writer (`write` stream → wire). The reader
closes its send side on EOF (once the requests read are answered, bounded),
which ends the server's read loop; the server closes the `write` stream when it
is done, which lets the writer drain and finish. On exit the writer gets a
bounded grace (`_DRAIN_GRACE_SEC`) to flush, then both tasks are cancelled.
While the wire is open, fd 0 reads /dev/null and fd 1 points at stderr, so
stray prints (ours or a child's) never corrupt the wire; both are restored on
exit.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Final

import anyio
import mcp_types
import pydantic_core
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from supervisor.wire.frames import LineBuffer, encode_batch
from supervisor.wire.host_pipes import HostPipes, open_host_pipes
from supervisor.wire.pipes import DirectWrite, PipeReader

__all__ = ["EOF_GRACE_SEC", "ReadStream", "Unanswered", "WriteStream", "decode_message", "open_stdio_wire"]

logger = logging.getLogger(__name__)


def decode_message(line: bytes | bytearray) -> mcp_types.JSONRPCMessage:
    """One line as a JSON-RPC message: parsed by ``pydantic_core.from_json``, then validated as Python.

    The same model ``jsonrpc_message_adapter.validate_json`` gives, and the same
    lines refused, but about four times faster on a listing's 14 KB (90 against
    390 us: the union validated in JSON mode costs more than parsing once).

    Raises:
        ValueError: Not JSON (``from_json``) or not a JSON-RPC message (pydantic's ``ValidationError``).
    """
    return mcp_types.jsonrpc_message_adapter.validate_python(pydantic_core.from_json(line), by_name=False)


ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]

Intercept = Callable[[bytes], bool]
"""Sees each incoming line first, synchronously; True takes it off the wire (``host.stdio.reader``)."""
Flush = Callable[[], None]
"""Writes what ``Intercept`` batched (``host.stdio.reader``): called after each chunk, and before the reader awaits."""
Linger = Callable[[], float]
"""How long the reader waits before its next read, so one wake-up takes several lines (``host.stdio.reader``, under
load)."""

_DRAIN_GRACE_SEC = 5.0
_READ_CHUNK_BYTES = 1 << 20  # a large request in a few wake-ups
EOF_GRACE_SEC: Final = 5.0
"""How long the end of input waits for the answers of the requests read before it (``open_stdio_wire``)."""
_OPEN_BY_DESIGN: Final = frozenset({"subscriptions/listen"})
"""Requests that stay open by design: the end of input does not wait for them."""


class Unanswered:
    """Ids of requests read off the wire whose answer has not been written to it yet.

    The wire's reader notes each request it delivers (``saw``), its writer each
    answer it has written (``answered``); a splice that takes a request off the
    wire and answers it itself says so (``track``, ``settle``). A host's
    ``notifications/cancelled`` settles the request it names: JSON-RPC owes it no
    answer. Synchronous: every method is atomic under trio.
    """

    def __init__(self) -> None:
        self._ids: set[mcp_types.RequestId] = set()
        self._idle = trio.Event()
        self._idle.set()

    def saw(self, item: SessionMessage | Exception) -> None:
        if not isinstance(item, SessionMessage):
            return
        message = item.message
        if isinstance(message, mcp_types.JSONRPCRequest) and message.method not in _OPEN_BY_DESIGN:
            self.track(message.id)
        elif isinstance(message, mcp_types.JSONRPCNotification) and message.method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            if isinstance(request_id, str | int):
                self.settle(request_id)

    def track(self, request_id: mcp_types.RequestId) -> None:
        """A request taken off the wire before the server saw it (a splice answers it)."""
        if not self._ids:
            self._idle = trio.Event()
        self._ids.add(request_id)

    def settle(self, request_id: mcp_types.RequestId) -> None:
        self._ids.discard(request_id)
        if not self._ids:
            self._idle.set()

    def answered(self, message: SessionMessage | bytes) -> None:
        """``message`` was written: if it answers a request, that request is settled."""
        if isinstance(message, bytes) or not self._ids:
            return  # a line framed already: its writer (the splice) settles its own requests
        answer = message.message
        if isinstance(answer, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError) and answer.id is not None:
            self.settle(answer.id)

    @property
    def idle(self) -> bool:
        return not self._ids

    async def wait_idle(self) -> None:
        await self._idle.wait()


async def _pump_wire_to_stream(
    wire: trio.lowlevel.FdStream | HostPipes,
    out: MemoryObjectSendStream[SessionMessage | Exception],
    intercept: Intercept | None = None,
    flush: Flush | None = None,
    linger: Linger | None = None,
    *,
    unanswered: Unanswered | None = None,
    eof_grace_sec: float = EOF_GRACE_SEC,
    replay: Sequence[bytes] = (),
) -> None:
    """Split the wire into lines and deliver each as a parsed message (or its parse error).

    A line ``intercept`` takes (returns True for) is not parsed or delivered;
    ``flush`` runs once the chunk's lines are handled and before each wait for
    the server, so what ``intercept`` batched never waits on anything.
    ``linger``, asked before each read, says how long to wait before reading.
    At EOF, ``out`` stays open until every request read is answered, or for
    ``eof_grace_sec``. ``wire`` may be the host pipes a prelude read from: their
    reader and line buffer go on where it stopped, after the lines it left
    (``replay``), which are delivered first, as if just read.
    """
    if isinstance(wire, HostPipes):
        lines, reader = wire.lines, wire.reader
    else:
        lines, reader = LineBuffer(), PipeReader(wire, _READ_CHUNK_BYTES)  # no cap: the host is the party we serve
    unanswered = Unanswered() if unanswered is None else unanswered
    async with out:
        if replay and not await _deliver_lines(iter(replay), out, intercept, flush, unanswered):
            return
        while True:
            try:
                chunk = await reader.receive(linger() if linger is not None else 0.0)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not chunk:
                await _answers_before_eof(unanswered, eof_grace_sec)
                return  # EOF: closing `out` ends the server's read loop.
            lines.feed(chunk)
            if not await _deliver_lines(_lines_of(lines), out, intercept, flush, unanswered):
                return


def _lines_of(lines: LineBuffer) -> Iterator[bytes]:
    while (line := lines.next_line()) is not None:
        yield line


async def _deliver_lines(
    lines: Iterator[bytes],
    out: MemoryObjectSendStream[SessionMessage | Exception],
    intercept: Intercept | None,
    flush: Flush | None,
    unanswered: Unanswered,
) -> bool:
    """Deliver each of ``lines`` (those ``intercept`` does not take) to ``out``; False once ``out`` is closed."""
    for line in lines:
        if not line.strip() or (intercept is not None and intercept(line)):
            continue
        item: SessionMessage | Exception
        try:
            item = SessionMessage(decode_message(line))
        except Exception as exc:  # a parse error travels to the server as a value
            item = exc
        if flush is not None:
            flush()
        unanswered.saw(item)
        try:
            await out.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
    if flush is not None:
        flush()
    return True


async def _answers_before_eof(unanswered: Unanswered, grace_sec: float) -> None:
    """Wait (bounded) until every request read is answered on the wire: the peer's end of input comes after them."""
    if unanswered.idle:
        return
    with trio.move_on_after(grace_sec) as scope:
        await unanswered.wait_idle()
    if scope.cancelled_caught:
        logger.warning("stdin closed; requests still unanswered after %gs are cancelled", grace_sec)


async def _pump_stream_to_wire(
    source: MemoryObjectReceiveStream[SessionMessage],
    wire: trio.lowlevel.FdStream,
    drained: trio.Event,
    direct: DirectWrite | None = None,
    *,
    unanswered: Unanswered | None = None,
) -> None:
    """Write each outgoing message as one JSON line; set `drained` when the source closes.

    ``direct``'s batch, if any, goes first: it was accepted before whatever woke this task.
    Each answer written settles its request in ``unanswered``.
    """
    written: list[SessionMessage | bytes] = []
    unanswered = Unanswered() if unanswered is None else unanswered
    try:
        async with source:
            async for message in source:
                data = encode_batch(message, source, written)
                if direct is not None and direct.pending:
                    data = direct.take() + data
                try:
                    await wire.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    logger.debug("stdio wire closed by peer; dropping outgoing messages")
                    for lost in written:
                        unanswered.answered(lost)  # never written, and never will be: nobody waits for them
                    return
                for sent in written:
                    unanswered.answered(sent)
                written.clear()
            if direct is not None and (rest := direct.take()):
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await wire.send_all(rest)
    finally:
        if direct is not None:
            direct.take()  # what could not be written is dropped, as queued messages are
        drained.set()


@asynccontextmanager
async def open_stdio_wire(
    intercept: Intercept | None = None,
    direct: DirectWrite | None = None,
    flush: Flush | None = None,
    linger: Linger | None = None,
    *,
    unanswered: Unanswered | None = None,
    eof_grace_sec: float = EOF_GRACE_SEC,
    pipes: HostPipes | None = None,
    replay: Sequence[bytes] = (),
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """Serve MCP frames over this process's stdin/stdout, cancellably.

    Args:
        intercept: Sees each incoming line before it is parsed; a line it takes
            (returns True for) never reaches ``read``. ``write`` also accepts
            ``bytes``: a line framed already.
        direct: Bound to the wire while it is open, so short lines can bypass
            the writer task when it is idle; the writer writes its batch first.
        flush: Called by the reader after each chunk and before it waits for
            the server (``intercept``'s batched writes).
        linger: Asked by the reader before each read: seconds to wait first,
            so that one wake-up takes several lines (0: read when readable).
        unanswered: The requests read and not answered yet (a splice that
            answers requests itself shares it); a fresh one by default.
        eof_grace_sec: How long the end of input waits for their answers.
        pipes: The host pipes (``wire.host_pipes``) a prelude already read
            from: borrowed, not closed; the reader goes on from their state.
            None: stdin and stdout are taken over for the block.
        replay: Lines read before (by the prelude), delivered first.

    Yields:
        `(read, write)`: `read` yields each incoming `SessionMessage` (or the
        exception raised parsing a malformed line); `write` accepts outgoing
        messages. Pass both to `Server.run`, which closes them.
    """
    serve = partial(
        _serve_pipes,
        hooks=(intercept, direct, flush, linger),
        unanswered=Unanswered() if unanswered is None else unanswered,
        eof_grace_sec=eof_grace_sec,
        replay=replay,
    )
    if pipes is not None:
        async with serve(pipes) as streams:
            yield streams
        return
    async with open_host_pipes() as owned, serve(owned) as streams:
        yield streams


@asynccontextmanager
async def _serve_pipes(
    pipes: HostPipes,
    *,
    hooks: tuple[Intercept | None, DirectWrite | None, Flush | None, Linger | None],
    unanswered: Unanswered,
    eof_grace_sec: float,
    replay: Sequence[bytes],
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """The reader and writer tasks over ``pipes`` for the block (``open_stdio_wire``'s own part)."""
    intercept, direct, flush, linger = hooks
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    drained = trio.Event()
    reader = partial(_pump_wire_to_stream, unanswered=unanswered, eof_grace_sec=eof_grace_sec, replay=replay)
    writer = partial(_pump_stream_to_wire, unanswered=unanswered)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader, pipes, read_send, intercept, flush, linger)
        nursery.start_soon(writer, write_recv, pipes.wire_out, drained, direct)
        if direct is not None:
            direct.bind(pipes.wire_out.fileno(), write_send)
        try:
            yield read_recv, write_send
        finally:
            # The server normally closed `write_send` already; closing is idempotent.
            if direct is not None:
                direct.unbind()
            write_send.close()
            read_recv.close()
            with trio.CancelScope(shield=True), trio.move_on_after(_DRAIN_GRACE_SEC):
                await drained.wait()
            nursery.cancel_scope.cancel(reason="stdio wire closed")
