"""A detached answer on the HTTP front's server (``ops.http1_exchange.DETACH``), and the guard's count of it.

The wire splice's answers are written by the upstream's stdout pump, not by
the POST's task (issue 29): the app detaches its answer and returns, another
task writes it without waiting, and the connection's task only reads. Each
test serves a small app on loopback port 0 (``test_http1_server.serving``)
and talks to it over a real connection, its answers parsed by h11.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from pydantic import SecretStr
from starlette.types import Receive, Scope, Send

from supervisor.ops.http import HttpGuard
from supervisor.ops.http1_exchange import DETACH, IDLE_SEC, MAX_HEAD_BYTES, SendNow
from tests.ops.test_http1_server import BOUND_SEC, echo, post, read_answers, serving, until_closed


class Recorder:
    """A detached answer's ``Watcher``: what it heard, in order, and its ``send_now`` once the app detached."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, float]] = []
        self.send_now: SendNow | None = None
        self.detached = trio.Event()
        self._changed = trio.Event()

    def silent(self) -> None:
        self._hear("silent")

    def hung_up(self) -> None:
        self._hear("hung_up")

    def ended(self) -> None:
        self._hear("ended")

    def _hear(self, kind: str) -> None:
        self.heard.append((kind, trio.current_time()))
        self._changed.set()
        self._changed = trio.Event()

    async def until_heard(self, count: int) -> None:
        """Return once it heard ``count`` things."""
        while len(self.heard) < count:
            await self._changed.wait()

    @property
    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.heard]


def detaching(recorder: Recorder, *, silent_sec: float = 60.0) -> Any:
    """An app that reads the body, detaches its answer to ``recorder`` and returns; a second request is echoed."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if recorder.send_now is not None:
            await echo(scope, receive, send)
            return
        message = await receive()
        assert not message.get("more_body")
        recorder.send_now = scope["extensions"][DETACH](recorder, silent_sec)
        recorder.detached.set()

    return app


async def calling(served: Any, recorder: Recorder, then: bytes = b"") -> trio.SocketStream:
    """A connection whose first request's answer the app detached (``then``: more sent with it)."""
    stream: trio.SocketStream = await served.connect()
    await stream.send_all(post(b"/mcp", b"call") + then)
    await recorder.detached.wait()
    return stream


def answer(send_now: SendNow, body: bytes, *, length: bool = True) -> None:
    headers = [(b"content-length", b"%d" % len(body))] if length else []
    send_now({"type": "http.response.start", "status": 200, "headers": headers})
    send_now({"type": "http.response.body", "body": body, "more_body": False})


async def test_a_detached_answer_is_written_by_another_task_at_once_and_the_connection_then_serves_the_next() -> None:
    recorder = Recorder()
    with trio.fail_after(BOUND_SEC):
        async with serving(detaching(recorder)) as served:
            stream = await calling(served, recorder)
            await trio.testing.wait_all_tasks_blocked()  # the app returned; its connection's task reads
            assert recorder.send_now is not None and recorder.heard == []
            answer(recorder.send_now, b"the answer")  # in this task, which never waits for it
            assert recorder.kinds == ["ended"]  # its last bytes ended it, in the task that wrote them
            ((first, body),) = await read_answers(stream, 1)
            assert (first.status_code, body) == (200, b"the answer")
            await stream.send_all(post(b"/mcp", b"next"))  # kept alive: the connection's read was the next wait
            ((_, echoed),) = await read_answers(stream, 1)
    assert echoed == b"POST /mcp? next"
    assert recorder.kinds == ["ended"]


async def test_a_request_sent_while_a_detached_answer_is_due_is_served_once_it_is_written() -> None:
    recorder = Recorder()
    pipelined = post(b"/mcp", b"x" * (2 * MAX_HEAD_BYTES))  # more than the server keeps before it stops reading
    with trio.fail_after(BOUND_SEC):
        async with serving(detaching(recorder)) as served:
            stream = await calling(served, recorder, pipelined)
            await trio.testing.wait_all_tasks_blocked()
            assert recorder.send_now is not None
            answer(recorder.send_now, b"first")
            (_, first), (_, second) = await read_answers(stream, 2)
    assert first == b"first" and second == b"POST /mcp? " + b"x" * (2 * MAX_HEAD_BYTES)


async def test_a_client_that_leaves_before_its_detached_answer_is_heard_as_hung_up_then_ended() -> None:
    recorder = Recorder()
    with trio.fail_after(BOUND_SEC):
        async with serving(detaching(recorder)) as served:
            stream = await calling(served, recorder)
            await stream.aclose()
            await recorder.until_heard(2)
            assert recorder.kinds == ["hung_up", "ended"]
            assert recorder.send_now is not None
            answer(recorder.send_now, b"too late")  # nothing is written, nothing raised
    assert recorder.kinds == ["hung_up", "ended"]


async def test_a_silent_detached_answer_tells_its_watcher_every_silent_sec_and_its_connection_idles_after_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    with trio.fail_after(BOUND_SEC * 10):
        async with serving(detaching(recorder, silent_sec=15.0)) as served:
            stream = await calling(served, recorder)
            began = trio.current_time()
            await recorder.until_heard(2)
            assert [at - began for _, at in recorder.heard] == [pytest.approx(15.0), pytest.approx(30.0)]
            assert recorder.send_now is not None
            answer(recorder.send_now, b"late but whole")
            answered = trio.current_time()
            ((_, body),) = await read_answers(stream, 1)
            assert body == b"late but whole"
            assert await until_closed(stream) == b""  # idle after the answer: closed without a word
            assert trio.current_time() - answered == pytest.approx(IDLE_SEC, abs=0.01)
    assert recorder.kinds == ["silent", "silent", "ended"]


async def test_a_detached_answer_larger_than_the_socket_takes_arrives_whole_in_order_and_ends_after_its_last_byte() -> (
    None
):
    recorder = Recorder()
    big = bytes(range(256)) * (32 * 1024)  # 8 MiB: more than a loopback socket's buffers hold
    with trio.fail_after(BOUND_SEC):
        async with serving(detaching(recorder)) as served:
            stream = await calling(served, recorder)
            send_now = recorder.send_now
            assert send_now is not None
            send_now({"type": "http.response.start", "status": 200, "headers": []})  # chunked: streamed
            send_now({"type": "http.response.body", "body": big, "more_body": True})
            send_now({"type": "http.response.body", "body": b"the end", "more_body": False})
            assert recorder.heard == []  # the rest is its connection's task's to write: not over yet
            ((response, body),) = await read_answers(stream, 1)
            await recorder.until_heard(1)
    assert response.status_code == 200 and body == big + b"the end"
    assert recorder.kinds == ["ended"]


async def test_the_guard_counts_a_detached_post_in_flight_until_its_answer_ends() -> None:
    recorder = Recorder()
    guard = HttpGuard(
        detaching(recorder), token=SecretStr("t"), names={"127.0.0.1"}, paths={"/mcp"}, max_body_bytes=1024
    )
    idle = trio.Event()

    async def waiting_idle() -> None:
        await guard.wait_idle()
        idle.set()

    with trio.fail_after(BOUND_SEC):
        async with serving(guard) as served, trio.open_nursery() as nursery:
            stream = await served.connect()
            await stream.send_all(post(b"/mcp", b"call", b"authorization: Bearer t\r\n"))
            await recorder.detached.wait()
            nursery.start_soon(waiting_idle)
            await trio.testing.wait_all_tasks_blocked()
            assert not idle.is_set()  # the app returned, but its answer is not written yet
            assert recorder.send_now is not None
            answer(recorder.send_now, b"done")
            await idle.wait()
            ((_, body),) = await read_answers(stream, 1)
    assert body == b"done" and recorder.kinds == ["ended"]
