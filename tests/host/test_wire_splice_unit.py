"""``host.stdio.reader.HostSplice`` in-process: an answer owed to the host survives the cancellation of its writer."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import anyio
import trio

from supervisor.calls.splice import SplicedCall
from supervisor.host.stdio.reader import HostSplice
from supervisor.upstream.splice import UpstreamSplice
from tests.fakes import SpliceFront, SpliceTracker


async def test_a_spliced_answer_is_still_written_when_the_task_writing_it_is_cancelled(
    autojump_clock: trio.abc.Clock,
) -> None:
    # An upstream pump delivering an answer is cancelled when its generation ends (e.g. the
    # server was killed right after answering); the host must still get the answer.
    front, tracker = SpliceFront(), SpliceTracker()
    splice = HostSplice(cast(Any, front), tracker)
    send, receive = anyio.create_memory_object_stream[Any](0)
    splice.attach(send)
    call = SplicedCall(7, "mcp-supervisor/splice/1", cast(Any, None), cast(Any, None), 0.0, 60.0, splice)
    splice._by_host_id[7] = call  # what _take_call records when it splices a request
    got: list[bytes] = []
    with trio.fail_after(30), send, receive:
        async with trio.open_nursery() as nursery:

            async def late_reader() -> None:
                await trio.sleep(1.0)  # the host wire's writer is busy for a while
                got.append(await receive.receive())

            nursery.start_soon(late_reader)
            with trio.move_on_after(0.5):  # the generation ends: the delivering task is cancelled
                await splice.answer_line(call, "ok", b'{"answer":7}\n')
    assert got == [b'{"answer":7}\n']
    assert tracker.settled == [7]
    assert front.outcomes == ["ok"]


async def test_a_host_that_reads_slowly_still_gets_every_spliced_answer(autojump_clock: trio.abc.Clock) -> None:
    # Slowness is backpressure, not a reason to drop: the general path never drops an answer
    # because the host took long to read it, and neither may the splice.
    front, tracker = SpliceFront(), SpliceTracker()
    splice = HostSplice(cast(Any, front), tracker)
    send, receive = anyio.create_memory_object_stream[Any](0)
    splice.attach(send)
    calls = [SplicedCall(i, f"mcp-supervisor/splice/{i}", cast(Any, None), cast(Any, None), 0.0, 60.0, splice)
             for i in (1, 2)]  # fmt: skip
    for call in calls:
        splice._by_host_id[call.host_id] = call
    got: list[bytes] = []
    with trio.fail_after(600), send, receive:
        async with trio.open_nursery() as nursery:

            async def slow_reader() -> None:
                for _ in calls:
                    await trio.sleep(60.0)  # far beyond any grace a stop would get
                    got.append(await receive.receive())

            nursery.start_soon(slow_reader)
            for call in calls:
                await splice.answer_line(call, "ok", f'{{"answer":{call.host_id}}}\n'.encode())
    assert got == [b'{"answer":1}\n', b'{"answer":2}\n']
    assert tracker.settled == [1, 2]


async def test_every_call_a_lost_upstream_leaves_is_answered_even_when_failing_them_is_cancelled(
    autojump_clock: trio.abc.Clock,
) -> None:
    # The transport's watcher fails every spliced call when the server dies; the transport's own
    # exit then cancels the watcher. Once failing began, the calls are out of the splice's tables:
    # each must still get its answer, not only the one being written when the cancel came.
    front, tracker = SpliceFront(), SpliceTracker()
    front.server = SimpleNamespace(server_info_stamp={"name": "mcp-supervisor"})
    splice = HostSplice(cast(Any, front), tracker)
    upstream = UpstreamSplice("srv", timeout_sec=60.0)
    send, receive = anyio.create_memory_object_stream[Any](0)
    splice.attach(send)
    tool = SimpleNamespace(raw_name="echo")
    for i in (1, 2, 3):
        call = SplicedCall(i, upstream.new_id(), cast(Any, tool), cast(Any, None), 0.0, 60.0, splice, upstream=upstream)
        splice._by_host_id[i] = call
        upstream._pending[call.upstream_id] = call
    got: list[bytes] = []
    with trio.fail_after(30), send, receive:
        async with trio.open_nursery() as nursery:

            async def late_reader() -> None:
                await trio.sleep(1.0)  # the host wire's writer is busy for a while
                while True:
                    with trio.move_on_after(10.0):  # virtual time: long after any answer could come
                        got.append(await receive.receive())
                        continue
                    return

            nursery.start_soon(late_reader)
            with trio.move_on_after(0.5):  # the transport exits: the watcher failing the calls is cancelled
                await upstream.fail_all("process exited with code -9")
    assert sorted(json.loads(line)["id"] for line in got) == [1, 2, 3]
    assert all("connection lost during tools/call echo" in line.decode() for line in got)
    assert sorted(tracker.settled) == [1, 2, 3]
