"""``compat.anyio.receiver_waiting`` reads anyio's private receiver count: it must say what ``statistics()`` says."""

from __future__ import annotations

import anyio
import trio
import trio.testing

from supervisor.compat.anyio import receiver_waiting


async def test_the_receiver_count_read_from_anyio_matches_its_statistics_parked_or_not() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](0)
    with trio.fail_after(5):
        async with send, receive, trio.open_nursery() as nursery:
            assert not receiver_waiting(send)
            assert send.statistics().tasks_waiting_receive == 0
            nursery.start_soon(receive.receive)
            await trio.testing.wait_all_tasks_blocked()
            assert receiver_waiting(send)
            assert send.statistics().tasks_waiting_receive == 1
            send.send_nowait(b"x")  # hands it over: nobody waits any more
            assert not receiver_waiting(send)
            assert send.statistics().tasks_waiting_receive == 0
