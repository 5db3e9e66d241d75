"""What a spliced HTTP call costs at the least on trio: ``python -m bench.http_floor [--rate R] [--seconds S]``.

Three servers, each in a process of its own, take the same load: 32
kept-alive connections POSTing a plain 2026 ``tools/call`` at a fixed total
rate (``--rate``, default 900/s: the rate ``p2``'s SDK hosts reach at c32,
so each request is its own wake-up, as in ``p2``). Each round measures each
server's CPU per call in turn (user plus system, and the user part alone:
the rest is the kernel's), who goes first rotating; the end prints the
medians and each as a fraction of the sidecar's.

* ``bare``: a keep-alive HTTP/1.1 server on trio answering a fixed JSON body:
  one read and one write per request, nothing else.
* ``splice``: the shape of the sidecar's spliced call with nothing of ours in
  it: the body parsed, a line written to a stdio child that echoes it, the
  child's line read by a pump task that writes the answer to the socket
  itself (the detached answer, ``ops.http1_exchange.DETACH``), the
  connection's task only reading.
* ``sidecar``: ``python -m supervisor run`` with its HTTP front and the fixture
  over stdio (``p2``'s ``httpfront`` pair's sidecar).

The sidecar's CPU per call above ``splice``'s is this codebase's (the guard,
the SDK's request ladder, routing, the splice's proof of every line, metrics);
``splice`` itself is trio's and the kernel's. Not part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

import trio

from bench.call_pairs import FRONT_TOKEN
from bench.harness import bench_mark, cpu_split_sec, median, reap_marked
from tests.sidecar import MARK_ENV, fixture_server, http_supervisor_table, open_http_sidecar, write_settings

CONNECTIONS: Final = 32
_ANSWER: Final = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}]}}'
_RESPONSE: Final = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%b" % (
    len(_ANSWER),
    _ANSWER,
)
_ECHO_CHILD: Final = (
    "import sys\nfor line in sys.stdin.buffer:\n    sys.stdout.buffer.write(line)\n    sys.stdout.buffer.flush()"
)


# -- the two floors ------------------------------------------------------------------------------


async def _read_request(stream: trio.SocketStream, buffer: bytearray) -> bytes | None:
    """The next request's body off ``stream`` (None: the client left); what follows stays in ``buffer``."""
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    head = bytes(buffer[:end]).lower()
    at = head.find(b"content-length:")
    line_end = head.find(b"\r\n", at)
    length = int(head[at + 15 : line_end if line_end >= 0 else len(head)]) if at >= 0 else 0
    while len(buffer) < end + 4 + length:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    body = bytes(buffer[end + 4 : end + 4 + length])
    del buffer[: end + 4 + length]
    return body


async def _serve_bare(stream: trio.SocketStream) -> None:
    buffer = bytearray()
    while await _read_request(stream, buffer) is not None:
        await stream.send_all(_RESPONSE)


async def _serve_floor(kind: str) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(listeners[0].socket.getsockname()[1], flush=True)
    if kind == "bare":
        await trio.serve_listeners(_serve_bare, listeners)
        return
    child = await trio.lowlevel.open_process(
        [sys.executable, "-c", _ECHO_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert isinstance(child.stdin, trio.lowlevel.FdStream) and isinstance(child.stdout, trio.lowlevel.FdStream)
    to_child, from_child = child.stdin.fileno(), child.stdout.fileno()  # non-blocking, as trio opened them
    waiting: dict[int, int] = {}
    """Call number → the socket its answer is written to."""
    numbers = iter(range(1, 1 << 62))

    async def pump() -> None:
        buffer = bytearray()
        while True:
            await trio.lowlevel.wait_readable(from_child)
            buffer += os.read(from_child, 65536)
            while (end := buffer.find(b"\n")) >= 0:
                number = int(buffer[:end])
                del buffer[: end + 1]
                with contextlib.suppress(OSError):  # its client left at the end of the window: a traceback before
                    os.write(waiting.pop(number), _RESPONSE)  # the answer, written by the task that read it

    async def serve_spliced(stream: trio.SocketStream) -> None:
        buffer, fd = bytearray(), stream.socket.fileno()
        while (body := await _read_request(stream, buffer)) is not None:
            json.loads(body)
            number = next(numbers)
            waiting[number] = fd
            os.write(to_child, b"%d\n" % number)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump)
        await trio.serve_listeners(serve_spliced, listeners)


# -- the load --------------------------------------------------------------------------------------


def _request(port: int, name: str, number: int) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench.http_floor", "version": "1"},
    }
    params = {"name": name, "arguments": {"text": "x"}, "_meta": meta}
    body = json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params}).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nauthorization: Bearer {FRONT_TOKEN}\r\n"
        "content-type: application/json\r\naccept: application/json, text/event-stream\r\n"
        f"mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: {name}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _load(port: int, name: str, seconds: float, rate: float, pid: int) -> tuple[int, float, float]:
    """Calls answered in a window of ``seconds`` after a second's warm-up, and ``pid``'s CPU seconds meanwhile
    (user plus system, and user alone)."""
    calls = 0
    measuring = False

    async def client(k: int) -> None:
        nonlocal calls
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        buffer = bytearray()
        due = trio.current_time() + k / rate
        number = k << 40
        while True:
            await trio.sleep_until(due)
            due = max(due + CONNECTIONS / rate, trio.current_time())
            number += 1
            await stream.send_all(_request(port, name, number))
            while (end := buffer.find(b"\r\n\r\n")) < 0:
                buffer += await stream.receive_some(65536)
            head = bytes(buffer[:end]).lower()
            at = head.find(b"content-length:")
            line_end = head.find(b"\r\n", at)
            length = int(head[at + 15 : line_end if line_end >= 0 else len(head)])
            while len(buffer) < end + 4 + length:
                buffer += await stream.receive_some(65536)
            assert b'"result"' in buffer[end + 4 : end + 4 + length], bytes(buffer[: end + 4 + length])[:300]
            del buffer[: end + 4 + length]
            calls += measuring

    async with trio.open_nursery() as nursery:
        for k in range(CONNECTIONS):
            nursery.start_soon(client, k)
        await trio.sleep(1.0)
        measuring, (user_before, system_before) = True, cpu_split_sec(pid)
        await trio.sleep(seconds)
        user, system = cpu_split_sec(pid)
        measuring = False
        nursery.cancel_scope.cancel()
    return calls, user - user_before + system - system_before, user - user_before


async def _until_ready(port: int, name: str) -> None:
    """Return once a call is answered with the tool's result (the server's first attempt done), bounded."""
    with trio.fail_after(30):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            while True:
                await stream.send_all(_request(port, name, 1))
                answer = b""
                while not answer.endswith(b"}"):  # one small JSON answer, its head and body in order
                    answer += await stream.receive_some(65536)
                if b'"isError":true' not in answer.replace(b" ", b""):
                    return
                await trio.sleep(0.05)


async def _measure_floor(kind: str, seconds: float, rate: float) -> tuple[float, float]:
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "bench.http_floor", "--serve", kind], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        port = int((await proc.stdout.receive_some(64)).strip())
        calls, cpu, user = await _load(port, "echo", seconds, rate, proc.pid)
    finally:
        proc.kill()
        await proc.wait()
    return cpu / calls * 1e6, user / calls * 1e6


async def _measure_sidecar(seconds: float, rate: float, workdir: Path) -> tuple[float, float]:
    config = write_settings(
        workdir, {"fx": fixture_server("--tools", "echo")}, supervisor={"log_level": "info", **http_supervisor_table()}
    )
    async with open_http_sidecar(config, token=FRONT_TOKEN) as sidecar:
        port = int(sidecar.url.rsplit(":", 1)[1].split("/")[0])
        await _until_ready(port, "mcp__fx__echo")
        calls, cpu, user = await _load(port, "mcp__fx__echo", seconds, rate, sidecar.process.pid)
    return cpu / calls * 1e6, user / calls * 1e6


async def _main(rounds: int, seconds: float, rate: float) -> None:
    os.environ.setdefault(MARK_ENV, bench_mark())
    kinds = ["bare", "splice", "sidecar"]
    per_call: dict[str, list[float]] = {kind: [] for kind in kinds}
    user_per_call: dict[str, list[float]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for round_number in range(rounds):
                order = kinds[round_number % 3 :] + kinds[: round_number % 3]
                for kind in order:
                    if kind == "sidecar":
                        us, user_us = await _measure_sidecar(seconds, rate, Path(tmp))
                    else:
                        us, user_us = await _measure_floor(kind, seconds, rate)
                    per_call[kind].append(us)
                    user_per_call[kind].append(user_us)
                figures = (f"{k} {per_call[k][-1]:.0f} us ({user_per_call[k][-1]:.0f} user)" for k in kinds)
                print(f"round {round_number + 1}: " + "   ".join(figures))
        finally:
            await reap_marked("bench.http_floor")
    sidecar = median(per_call["sidecar"])
    print(f"CPU per call at {rate:.0f} calls/s over {CONNECTIONS} connections (median of {rounds} rounds):")
    for kind in kinds:
        us, user_us = median(per_call[kind]), median(user_per_call[kind])
        print(f"  {kind:8} {us:6.0f} us ({user_us:4.0f} us user)   {us / sidecar:.2f} of the sidecar's")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.http_floor", description=__doc__)
    parser.add_argument("--rate", type=float, default=900.0, help="calls per second, all connections together")
    parser.add_argument("--seconds", type=float, default=5.0, help="each measuring window")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", choices=["bare", "splice"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        trio.run(_serve_floor, args.serve)
        return
    trio.run(_main, args.rounds, args.seconds, args.rate)


if __name__ == "__main__":
    main()
