"""``wire.locks``: a free lock or token is taken without a checkpoint; a busy one is waited for in arrival order."""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel
import trio.testing

from supervisor.wire.locks import QuickLimiter, QuickLock
from tests.sidecar import scaled

BOUND_SEC = scaled(5)


@pytest.mark.parametrize("make", [QuickLock, lambda: QuickLimiter(1)], ids=["lock", "limiter"])
async def test_a_free_one_is_taken_without_a_checkpoint_and_a_busy_one_in_arrival_order(make: object) -> None:
    guard = make()  # type: ignore[operator]
    order: list[str] = []
    with trio.testing.assert_no_checkpoints():
        async with guard:
            order.append("free")
    await guard.__aenter__()  # held: the others queue behind it

    async def waiter(name: str) -> None:
        async with guard:
            order.append(name)
            await trio.lowlevel.checkpoint()  # held across a checkpoint: a newcomer must not get in meanwhile

    released = trio.Event()

    async def newcomer() -> None:
        await released.wait()
        async with guard:  # arrives once the lock was handed to "first": waits behind "second"
            order.append("newcomer")

    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter, "first")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(waiter, "second")
            nursery.start_soon(newcomer)
            await trio.testing.wait_all_tasks_blocked()
            await guard.__aexit__(None, None, None)  # released while both wait
            released.set()
    assert order == ["free", "first", "second", "newcomer"]


async def test_the_limiter_lets_as_many_in_as_it_has_tokens() -> None:
    limiter = QuickLimiter(2)
    inside: list[int] = []
    leave = trio.Event()

    async def borrower(number: int) -> None:
        async with limiter:
            inside.append(number)
            await leave.wait()
            inside.remove(number)

    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            for number in range(6):
                nursery.start_soon(borrower, number)
            await trio.testing.wait_all_tasks_blocked()
            assert len(inside) == 2  # the other four wait for a token
            leave.set()
    assert inside == []


async def test_a_waiter_cancelled_while_it_waits_leaves_the_lock_free_once_released() -> None:
    lock = QuickLock()
    await lock.__aenter__()
    waiting = trio.CancelScope()

    async def waiter() -> None:
        with waiting:
            async with lock:
                raise AssertionError("taken while held")

    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            waiting.cancel()  # it leaves the queue
    assert waiting.cancelled_caught and lock.locked()
    await lock.__aexit__(None, None, None)  # nobody waits any more: free
    assert not lock.locked()
    with trio.testing.assert_no_checkpoints():
        async with lock:
            assert lock.locked()
