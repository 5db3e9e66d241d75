"""The wire splice's Python per call, without pipes: ``python -m bench.splice_python [--calls N]``.

Drives one ``HostSplice`` and one ``UpstreamSplice`` in process with the real
lines of a p2 echo call (the host's request, the fixture's answer, as captured
with ``strace``): ``on_line`` of the request, the request line taken off the
upstream's stdin queue, ``claim`` and ``deliver`` of the answer, the answer
taken off the host's queue. Routing, the stdio link's tracker and the metrics
are the real ones' shapes (plain fakes: a dict lookup, a set, a counter).
Prints microseconds per call (best of a few repeats). It measures the Python
the splice runs per call, which the sidecar's CPU per call in ``python -m
bench p2`` also contains beside the pumps, the scheduler and the syscalls.
Not part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import trio
import trio.testing

from supervisor.host.stdio.reader import HostSplice
from supervisor.ops.metrics import _CallCollector
from supervisor.upstream.splice import UpstreamSplice

REQUEST = (
    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mcp__fx__echo","arguments":{"text":"x"},'
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":'
    b'{"name":"mcp","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{}}}}'
)
ANSWER = (
    b'{"jsonrpc":"2.0","id":"%s","result":{"content":[{"text":"x","type":"text"}],"isError":false,'
    b'"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fixture","version":"1.0.0"}}}}'
)
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp-supervisor", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {
        "sampling": {"tools": {}}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": True},
    },
}  # fmt: skip


@dataclass
class _Definition:
    output_schema: Any = None


@dataclass
class _Tool:
    raw_name: str = "echo"
    owner: str = "fx"
    source: _Definition = field(default_factory=_Definition)


class _Upstream:
    def __init__(self, splice: UpstreamSplice) -> None:
        self.splice = splice


class _Actor:
    def __init__(self, upstream: _Upstream) -> None:
        self.ready_upstream = upstream

    def heal_unknown_tool(self, raw_name: str, exc: Exception) -> None: ...


class _Server:
    server_info_stamp = {"name": "mcp-supervisor", "version": "0.1.0"}


class _Front:
    def __init__(self, routes: dict[str, Any]) -> None:
        self._routes = routes
        self.shutting_down = False
        self.server = _Server()
        self.calls = _CallCollector()

    def route(self, name: str) -> Any:
        return self._routes.get(name)

    def note_call(self, tool: Any, outcome: Any, seconds: float) -> None:
        self.calls.add(tool.owner, outcome, seconds)


class _Tracker:
    def __init__(self) -> None:
        self.ids: set[str | int] = set()

    def track(self, request_id: str | int) -> None:
        self.ids.add(request_id)

    def settle(self, request_id: str | int) -> None:
        self.ids.discard(request_id)


async def _main(calls: int, repeats: int) -> None:
    child_read, child_write = os.pipe()
    host_read, host_write = os.pipe()
    upstream = UpstreamSplice("fx", 60.0)
    to_child, child_queue = anyio.create_memory_object_stream[Any](64)
    upstream.attach(to_child, child_write)
    upstream.set_envelope(ENVELOPE)
    tool = _Tool()
    front = _Front({"mcp__fx__echo": (tool, _Actor(_Upstream(upstream)))})
    host = HostSplice(cast(Any, front), _Tracker())
    to_host, host_queue = anyio.create_memory_object_stream[Any](0)
    host.attach(to_host.clone())
    host.direct.bind(host_write, to_host)
    best = float("inf")
    request_id = 0
    async with trio.open_nursery() as nursery:
        # The pumps' writer tasks, parked on their empty queues: what lets DirectWrite write at once.
        nursery.start_soon(child_queue.receive)
        nursery.start_soon(host_queue.receive)
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                request_id += 1
                assert host.on_line(REQUEST % request_id)
                host.flush_requests()  # the host pump's hook after its chunk
                sent = os.read(child_read, 1 << 16)
                upstream_id = sent[sent.index(b'"id":"') + 6 : sent.index(b'","method"')]
                claimed = upstream.claim(ANSWER % upstream_id)
                assert claimed is not None
                await upstream.deliver(*claimed)
                host.flush()  # the upstream pump's hook after its chunk
                os.read(host_read, 1 << 16)
            best = min(best, (time.perf_counter() - start) / calls)
        nursery.cancel_scope.cancel()
    for fd in (child_read, child_write, host_read, host_write):
        os.close(fd)
    print(f"splice Python per call: {best * 1e6:.2f} us (best of {repeats} x {calls})")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.splice_python", description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    trio.run(_main, args.calls, args.repeats)


if __name__ == "__main__":
    main()
