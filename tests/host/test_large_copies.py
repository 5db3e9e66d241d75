"""A 1 MB message crosses the sidecar with as few copies of itself as can be (issue 11).

* ``LineBuffer``: a large whole-lines read (a view of the pump's reused
  buffer) is copied once without its final newline, so a read that is one line
  is copied once, into the line, where it was copied into a held chunk and then
  cut out of it again. Lines must come out as before: several per read, ``\\r\\n``,
  the cap, a read fed before every line was taken, the held length.
* ``DirectWrite.write_pieces``: a large line built as pieces around a view of
  the line read is written with one ``writev`` while the pipe's writer task is
  parked, after the batch, never joined; a busy writer refuses it, and what a
  full pipe does not take reaches the writer whole and in order. The wire
  splice writes its large requests and answers that way.

Copies are counted with ``tracemalloc`` (the peak of what one step allocates),
not timed.
"""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Callable, Coroutine
from types import SimpleNamespace
from typing import Any, NamedTuple, TypeVar, cast

import anyio
import trio
import trio.testing
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from supervisor.calls.splice import SplicedCall
from supervisor.host.stdio.reader import HostSplice
from supervisor.upstream.splice import UpstreamSplice
from supervisor.wire.codec import load
from supervisor.wire.frames import LineBuffer
from supervisor.wire.pipes import CUT_FROM_COPY_BYTES, DirectWrite
from tests.fakes import SpliceFront, SpliceTracker
from tests.pipes import host_wire_writer, nonblocking_pipe, read_available
from tests.sidecar import scaled

MIB = 1024 * 1024
LARGE = 900_000
"""A large member whose line fits a 1 MiB pipe (the most an unprivileged process may ask for)."""
T = TypeVar("T")


def _peak_allocated(step: Callable[[], T]) -> tuple[T, int]:
    """What ``step`` returns and the most memory it held allocated at once."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        value = step()
        return value, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def _drain(buffer: LineBuffer) -> list[bytes]:
    lines = []
    while (line := buffer.next_line()) is not None:
        lines.append(line)
    return lines


def test_a_one_line_read_of_a_mib_is_copied_once_into_the_line_and_survives_the_buffers_reuse() -> None:
    storage = bytearray(b"x" * MIB + b"\n")
    buffer = LineBuffer()

    def feed_and_cut() -> list[bytes]:
        buffer.feed(memoryview(storage))
        return _drain(buffer)

    lines, peak = _peak_allocated(feed_and_cut)
    storage[:] = b"y" * len(storage)  # the pump's next read reuses its buffer
    assert lines == [b"x" * MIB]
    assert peak < 1.5 * MIB, f"{peak} bytes allocated at once: the line was copied twice"
    assert buffer.copied_bytes == 0
    assert len(buffer) == 0


def test_a_large_read_of_several_lines_gives_each_line_and_its_empty_and_crlf_lines() -> None:
    big = b"a" * CUT_FROM_COPY_BYTES
    storage = bytearray(b"one\r\n" + big + b"\n\n" + b"last\r\n")
    buffer = LineBuffer()
    buffer.feed(memoryview(storage))
    storage[:] = b"z" * len(storage)
    assert _drain(buffer) == [b"one", big, b"", b"last"]
    assert len(buffer) == 0
    assert buffer.scanned_bytes == len(storage)


def test_a_large_read_whose_last_line_is_empty_gives_that_empty_line() -> None:
    big = b"b" * CUT_FROM_COPY_BYTES
    buffer = LineBuffer()
    buffer.feed(memoryview(bytearray(big + b"\n\n")))
    assert _drain(buffer) == [big, b""]


def test_lines_left_in_a_large_read_keep_their_order_and_their_newline_when_more_is_fed() -> None:
    big = b"c" * CUT_FROM_COPY_BYTES
    buffer = LineBuffer()
    buffer.feed(memoryview(bytearray(b"first\n" + big + b"\n")))
    assert buffer.next_line() == b"first"
    assert len(buffer) == len(big) + 1, "the implied newline is held too"
    buffer.feed(memoryview(bytearray(b"next\n")))
    assert _drain(buffer) == [big, b"next"]
    assert len(buffer) == 0


def test_the_cap_trips_on_the_last_line_of_a_large_read_whose_newline_is_implied() -> None:
    buffer = LineBuffer(max_line_bytes=CUT_FROM_COPY_BYTES)
    buffer.feed(memoryview(bytearray(b"ok\n" + b"d" * (CUT_FROM_COPY_BYTES + 1) + b"\n")))
    assert buffer.next_line() == b"ok"
    assert buffer.next_line() is None
    assert buffer.overlong
    assert len(buffer) == 0
    buffer = LineBuffer(max_line_bytes=CUT_FROM_COPY_BYTES)
    buffer.feed(memoryview(bytearray(b"e" * CUT_FROM_COPY_BYTES + b"\n")))
    assert buffer.next_line() == b"e" * CUT_FROM_COPY_BYTES, "exactly at the cap passes"
    assert not buffer.overlong


async def test_a_line_in_pieces_is_written_after_the_batch_in_one_writev_while_the_writer_is_parked() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](0)
    direct = DirectWrite()
    member = memoryview(b'"' + b"m" * LARGE + b'"')
    pieces: list[bytes | memoryview] = [b'{"head":', member, b"}\n"]
    with trio.fail_after(scaled(5)), nonblocking_pipe(MIB) as (read_fd, write_fd), send, receive:
        direct.bind(write_fd, send)
        assert not direct.write_pieces(pieces), "no writer parked: queue it"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive.receive)
            await trio.testing.wait_all_tasks_blocked()
            assert direct.try_write(b"batched first\n")
            written, peak = _peak_allocated(lambda: direct.write_pieces(pieces))
            assert written
            assert peak < LARGE / 2, f"{peak} bytes allocated: the line was joined"
            assert (direct.writes, direct.written) == (2, 2), "the batch's write, then one writev"
            send.send_nowait(b"after\n")  # the writer was still parked: nothing was handed over
        assert read_available(read_fd) == b"batched first\n" + b"".join(pieces)


def test_a_line_in_pieces_is_refused_while_the_writer_holds_something() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](1)
    direct = DirectWrite()
    with nonblocking_pipe(MIB) as (read_fd, write_fd), send, receive:  # nothing here awaits: no bound needed
        direct.bind(write_fd, send)
        send.send_nowait(b"queued\n")
        assert not direct.write_pieces([b"big", memoryview(b"x" * 100), b"\n"])
        assert read_available(read_fd) == b""


async def test_what_a_full_pipe_does_not_take_of_a_line_in_pieces_reaches_the_writer_whole_and_in_order() -> None:
    send, receive = anyio.create_memory_object_stream[Any](0)
    direct = DirectWrite()
    pieces: list[bytes | memoryview] = [b"<", memoryview(b"p" * 300_000), b"q" * 5000, memoryview(b"r" * 300_000)]
    pieces.append(b">\n")
    line = b"".join(pieces)
    with trio.fail_after(scaled(10)), nonblocking_pipe(1 << 16) as (read_fd, write_fd), send, receive:
        filler = os.write(write_fd, b"f" * 1000)
        direct.bind(write_fd, send)
        got = bytearray()

        async def host() -> None:
            while len(got) < filler + len(line) + len(b"after\n"):
                await trio.lowlevel.wait_readable(read_fd)
                got.extend(read_available(read_fd))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(host_wire_writer, receive, write_fd, direct)
            await trio.testing.wait_all_tasks_blocked()
            assert direct.write_pieces(pieces)  # the pipe takes 63 KiB; the writer gets the rest
            assert not direct.write_pieces([b"would overtake\n"]), "the writer holds the rest: later lines queue"
            nursery.start_soon(host)
            await send.send(b"after\n")
            send.close()
    assert bytes(got[filler:]) == line + b"after\n"


def _finished_at_once(coroutine: Coroutine[Any, Any, None]) -> bool:
    """Run ``coroutine`` up to its first wait; whether it finished without one."""
    try:
        coroutine.send(None)
    except StopIteration:
        return True
    coroutine.close()
    return False


class _Splice(NamedTuple):
    """A host splice on an in-memory host wire (its ``send``/``receive``), beside an upstream splice."""

    front: SpliceFront
    tracker: SpliceTracker
    host: HostSplice
    send: MemoryObjectSendStream[Any]
    receive: MemoryObjectReceiveStream[Any]
    upstream: UpstreamSplice


def _splice(wire_queue: int = 0) -> _Splice:
    front, tracker = SpliceFront(), SpliceTracker()
    host = HostSplice(cast(Any, front), tracker)
    send, receive = anyio.create_memory_object_stream[Any](wire_queue)
    host.attach(send)
    host._stamp = {"name": "mcp-supervisor", "version": "0"}
    return _Splice(front, tracker, host, send, receive, UpstreamSplice("fx", 60.0))


def _echo_call(splice: _Splice, host_id: int) -> SplicedCall:
    """A spliced ``echo`` call from the host (not yet in the host's table)."""
    tool = SimpleNamespace(raw_name="echo")
    return SplicedCall(host_id, splice.upstream.new_id(), cast(Any, tool), cast(Any, None), 0.0, 60.0, splice.host)


def _answer_line(upstream_id: str, text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return json.dumps({"jsonrpc": "2.0", "id": upstream_id, "result": result}, separators=(",", ":")).encode()


async def test_a_large_answer_goes_to_an_idle_host_wire_in_one_writev_without_a_join() -> None:
    splice = _splice()
    front, tracker, host, send, receive, upstream = splice
    call = _echo_call(splice, 7)
    host._by_host_id[7] = call
    text = "t" * LARGE
    with trio.fail_after(scaled(5)), nonblocking_pipe(MIB) as (read_fd, write_fd), send, receive:
        host.direct.bind(write_fd, send)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive.receive)
            await trio.testing.wait_all_tasks_blocked()
            message, spans = load(_answer_line(call.upstream_id, text), "result")
            # Only the delivery (assembling and writing) is measured: the line was read and proven before.
            at_once, peak = _peak_allocated(lambda: _finished_at_once(upstream.deliver(call, message, spans)))
            assert at_once, "an idle wire is written without waiting"
            assert host.direct.writes == 1
            send.send_nowait(b"end\n")
        answer = json.loads(read_available(read_fd))
    assert peak < LARGE / 2, f"{peak} bytes allocated: the answer was joined"
    assert answer["id"] == 7 and answer["result"]["content"][0]["text"] == text
    assert answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"] == host._stamp
    assert tracker.settled == [7] and front.outcomes == ["ok"]
    assert not host._by_host_id


async def test_a_large_answer_to_a_busy_host_wire_is_queued_whole_and_one_the_host_cancelled_is_not_written() -> None:
    splice = _splice(wire_queue=1)
    front, tracker, host, send, receive, upstream = splice
    calls = [_echo_call(splice, n) for n in (1, 2)]
    host._by_host_id[1] = calls[0]  # the second was cancelled by the host: no longer in the table
    text = "u" * CUT_FROM_COPY_BYTES * 2
    with trio.fail_after(scaled(5)), nonblocking_pipe(MIB) as (read_fd, write_fd), send, receive:
        host.direct.bind(write_fd, send)  # nobody receives: the writer is busy
        for call in calls:
            message, spans = load(_answer_line(call.upstream_id, text), "result")
            assert spans is not None
            await upstream.deliver(call, message, spans)
        queued = receive.receive_nowait()
        assert json.loads(queued)["result"]["content"][0]["text"] == text
        assert json.loads(queued)["id"] == 1
        assert read_available(read_fd) == b""
        try:
            receive.receive_nowait()
        except anyio.WouldBlock:
            pass
        else:
            raise AssertionError("an answer the host cancelled was written")
    assert tracker.settled == [1] and front.outcomes == ["ok"]


async def test_a_large_request_goes_to_an_idle_upstream_stdin_in_one_writev_without_a_join() -> None:
    upstream = UpstreamSplice("fx", 60.0)
    host = HostSplice(cast(Any, SpliceFront()), SpliceTracker())
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    arguments = {"text": "v" * LARGE}
    params = {"name": "mcp__fx__echo", "arguments": arguments, "_meta": envelope}
    line = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}).encode()
    send, receive = anyio.create_memory_object_stream[Any](8)
    with trio.fail_after(scaled(5)), nonblocking_pipe(MIB) as (read_fd, write_fd), send, receive:
        upstream.attach(send, write_fd)
        upstream.set_envelope(envelope)
        call = SplicedCall(3, upstream.new_id(), cast(Any, None), cast(Any, None), 0.0, 60.0, host)
        message, spans = load(line, "params")
        assert spans is not None
        _, start, end = spans.inner["arguments"]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive.receive)
            await trio.testing.wait_all_tasks_blocked()
            sent, peak = _peak_allocated(
                lambda: upstream.submit(call, "echo", message["params"]["arguments"], spans.text[start:end])
            )
            assert sent
            assert upstream.direct.writes == 1
            send.send_nowait(b"end\n")
        request = json.loads(read_available(read_fd))
    assert peak < LARGE / 2, f"{peak} bytes allocated: the request was joined"
    assert request == {
        "jsonrpc": "2.0",
        "id": call.upstream_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": arguments, "_meta": envelope},
    }
    assert upstream.expecting


async def test_a_large_answer_the_host_cancelled_is_not_written_even_to_an_idle_host_wire() -> None:
    splice = _splice()
    front, tracker, host, send, receive, upstream = splice
    call = _echo_call(splice, 5)  # not in the table
    with trio.fail_after(scaled(5)), nonblocking_pipe(MIB) as (read_fd, write_fd), send, receive:
        host.direct.bind(write_fd, send)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive.receive)
            await trio.testing.wait_all_tasks_blocked()
            message, spans = load(_answer_line(call.upstream_id, "w" * CUT_FROM_COPY_BYTES * 2), "result")
            await upstream.deliver(call, message, spans)
            send.send_nowait(b"end\n")
        assert read_available(read_fd) == b""
    assert tracker.settled == [] and front.outcomes == []
