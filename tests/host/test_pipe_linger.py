"""Pumps under load linger before they read, so one wake-up takes several lines (issue 11).

* ``PipeReader.receive(linger_sec)`` sleeps first, then takes what arrived
  without parking; after a linger that found nothing the next read parks at once.
* The host wire's reader asks its ``linger`` before each read, and so does an
  upstream's stdout pump (its splice's ``linger_sec``).
* The splice asks for a linger only with ``LINGER_FROM_CALLS`` calls in flight,
  so a lone call (c1) never waits.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
import trio
import trio.testing
from mcp.shared.message import SessionMessage

from supervisor.calls.splice import LINGER_FROM_CALLS, LINGER_SEC, SplicedCall
from supervisor.config.servers import ServerSettings
from supervisor.host.stdio.reader import HostSplice
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.splice import UpstreamSplice
from supervisor.upstream.stdio import open_stdio_transport
from supervisor.wire.pipes import PipeReader
from supervisor.wire.stdio import _pump_wire_to_stream
from tests.sidecar import MARK_ENV, scaled


@contextmanager
def _pipe() -> Iterator[tuple[trio.lowlevel.FdStream, int]]:
    read_fd, write_fd = os.pipe()
    stream = trio.lowlevel.FdStream(read_fd)  # owns read_fd (closed by aclose or its finalizer)
    try:
        yield stream, write_fd
    finally:
        os.close(write_fd)


async def test_a_lingering_reader_takes_what_arrives_while_it_waits_in_one_read(
    mock_clock: trio.testing.MockClock,
) -> None:
    with _pipe() as (stream, write_fd), trio.fail_after(scaled(5)):
        reader = PipeReader(stream, 1 << 16)
        got: list[bytes] = []

        async def read() -> None:
            got.append(bytes(await reader.receive(linger_sec=1.0)))

        os.write(write_fd, b"first\n")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            assert got == [], "a lingering reader does not read at once, though the pipe is readable"
            os.write(write_fd, b"second\n")
            mock_clock.jump(1.0)
        assert got == [b"first\nsecond\n"]
        await stream.aclose()


async def test_after_a_linger_that_found_nothing_the_next_read_parks_at_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    with _pipe() as (stream, write_fd), trio.fail_after(scaled(60)):
        reader = PipeReader(stream, 1 << 16)
        async with trio.open_nursery() as nursery:

            async def late_writer() -> None:
                await trio.sleep(5.0)
                os.write(write_fd, b"late\n")

            nursery.start_soon(late_writer)
            start = trio.current_time()
            assert bytes(await reader.receive(linger_sec=1.0)) == b"late\n"
            assert trio.current_time() - start == 5.0  # lingered 1 s in vain, then parked until the write
        os.write(write_fd, b"waiting\n")
        start = trio.current_time()
        assert bytes(await reader.receive(linger_sec=1.0)) == b"waiting\n"
        assert trio.current_time() - start == 0.0, "after a linger in vain the next read does not linger"
        os.write(write_fd, b"again\n")
        start = trio.current_time()
        assert bytes(await reader.receive(linger_sec=1.0)) == b"again\n"
        assert trio.current_time() - start == 1.0, "and the one after lingers again"
        await stream.aclose()


async def test_a_lingering_reader_is_cancellable_while_it_waits() -> None:
    with _pipe() as (stream, write_fd), trio.fail_after(scaled(5)):
        reader = PipeReader(stream, 1 << 16)
        os.write(write_fd, b"waiting\n")
        with trio.CancelScope() as scope:
            scope.cancel()
            await reader.receive(linger_sec=3600.0)
        assert scope.cancelled_caught
        await stream.aclose()


async def test_the_host_wire_reader_lingers_as_long_as_it_is_told_before_each_read(
    mock_clock: trio.testing.MockClock,
) -> None:
    with _pipe() as (stream, write_fd), trio.fail_after(scaled(5)):
        lines: list[bytes] = []
        chunks: list[list[bytes]] = []

        def intercept(line: bytes) -> bool:
            lines.append(line)
            return True

        def flush() -> None:  # called once per chunk read
            chunks.append(list(lines))
            lines.clear()

        send, receive = anyio.create_memory_object_stream[Any](0)
        os.write(write_fd, b"one\n")
        async with receive, trio.open_nursery() as nursery:
            nursery.start_soon(_pump_wire_to_stream, stream, send, intercept, flush, lambda: 1.0)
            await trio.testing.wait_all_tasks_blocked()
            os.write(write_fd, b"two\n")
            mock_clock.jump(1.0)
            await trio.testing.wait_all_tasks_blocked()
            assert chunks == [[b"one", b"two"]]
            nursery.cancel_scope.cancel()
        await stream.aclose()


def test_an_upstream_asks_its_pump_to_linger_only_with_many_calls_in_flight() -> None:
    splice = UpstreamSplice("srv", 60.0)
    send, receive = anyio.create_memory_object_stream[Any](LINGER_FROM_CALLS + 1)
    splice.attach(send, None)
    splice.set_envelope({"io.modelcontextprotocol/protocolVersion": "2026-07-28"})
    host = cast(Any, None)
    calls = []
    with send, receive:  # nothing here awaits: it cannot hang
        for index in range(LINGER_FROM_CALLS):
            assert splice.linger_sec() == 0.0, f"{index} calls in flight: read at once"
            call = SplicedCall(index, splice.new_id(), cast(Any, None), cast(Any, None), 0.0, 60.0, host)
            assert splice.submit(call, "echo", None)
            calls.append(call)
        assert splice.linger_sec() == LINGER_SEC
        answer = b'{"jsonrpc":"2.0","id":"%s","result":{"content":[]}}' % calls[0].upstream_id.encode()
        assert splice.claim(answer) is not None
        assert splice.linger_sec() == 0.0


def test_a_host_asks_its_wire_reader_to_linger_only_with_many_calls_in_flight() -> None:
    splice = HostSplice(cast(Any, None), cast(Any, None))
    for index in range(LINGER_FROM_CALLS):
        assert splice.linger_sec() == 0.0, f"{index} calls in flight: read at once"
        splice._by_host_id[index] = cast(SplicedCall, None)  # what _take_call records for a spliced call
    assert splice.linger_sec() == LINGER_SEC
    del splice._by_host_id[0]  # answered (answer_line) or cancelled (_take_cancel)
    assert splice.linger_sec() == 0.0


class _AskedSplice(UpstreamSplice):
    """Counts how often the stdout pump asks how long to linger (and says: not at all)."""

    asked = 0

    def linger_sec(self) -> float:
        self.asked += 1
        return 0.0


@pytest.mark.e2e
async def test_an_upstream_stdout_pump_asks_its_splice_how_long_to_linger_before_it_reads() -> None:
    notice = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}'
    code = f"import sys\nsys.stdout.buffer.write({notice!r} + b'\\n')\nsys.stdout.flush()\nsys.stdin.read()\n"
    settings = ServerSettings(
        name="fx", command=sys.executable, args=["-c", code], env={MARK_ENV: os.environ[MARK_ENV]}
    )
    splice = _AskedSplice("fx", 60.0)
    with trio.fail_after(scaled(15)):
        async with open_stdio_transport(settings, TransportHealth(), splice=splice) as (read, _write):
            item = await read.receive()
            assert isinstance(item, SessionMessage)
            assert isinstance(item.message, types.JSONRPCNotification)
    assert splice.asked >= 1
