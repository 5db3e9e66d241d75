"""CPU cost of one long stdout line through each of the three line readers (issue 9, DESIGN I15).

``python -m bench.framing [MIB]`` (default 16): a real child process writes one
``MIB`` MiB line with no newline until its end, then a valid JSON-RPC
notification. Each reader must drop the long line (it is not JSON-RPC) and
deliver the notification. Printed per reader: the CPU seconds this process (or,
for the host wire, the reading child) spent until the notification arrived.

* ``upstream.stdio``: ``open_stdio_transport`` reading an upstream child.
* ``stdio_wire``: ``open_stdio_wire`` in a child process reading its own stdin.
* ``e2e_line_transport``: the tests' ``line_transport`` reading a child.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time

import trio

from supervisor.config.servers import ServerSettings
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.stdio import open_stdio_transport
from tests.sidecar import line_transport

NOTICE = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"done"}}\n'


def _writer_argv(mib: int) -> list[str]:
    """A child that writes the long line, then the notice, then waits for stdin to close."""
    code = (
        "import sys; out = sys.stdout.buffer; block = b'x' * 65536\n"
        f"for _ in range({mib} * 16): out.write(block)\n"
        f"out.write(b'\\n' + {NOTICE!r}); out.flush(); sys.stdin.read()\n"
    )
    return [sys.executable, "-c", code]


async def _upstream_stdio(mib: int) -> float:
    argv = _writer_argv(mib)
    settings = ServerSettings(name="long", command=argv[0], args=argv[1:])
    started = time.process_time()
    async with open_stdio_transport(settings, TransportHealth()) as (read, _write):
        await read.receive()
        spent = time.process_time() - started
    return spent


async def _e2e_line_transport(mib: int) -> float:
    proc = await trio.lowlevel.open_process(_writer_argv(mib), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    started = time.process_time()
    try:
        async with line_transport(proc) as (read, _write):
            await read.receive()
            spent = time.process_time() - started
    finally:
        proc.kill()
        await proc.wait()
    return spent


_WIRE_READER = """
import time, trio
from supervisor.wire.stdio import open_stdio_wire
async def main():
    started = time.process_time()
    async with open_stdio_wire() as (read, write):
        while isinstance(await read.receive(), Exception):
            pass
        print(time.process_time() - started, file=__import__("sys").stderr)
        await write.aclose()
trio.run(main)
"""


def _stdio_wire(mib: int) -> float:
    writer = subprocess.Popen(_writer_argv(mib), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    reader = subprocess.run(
        [sys.executable, "-c", _WIRE_READER], stdin=writer.stdout, capture_output=True, check=True, timeout=600
    )
    assert writer.stdin is not None
    writer.stdin.close()
    writer.wait()
    return float(reader.stderr.decode().split()[-1])


def main() -> None:
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    logging.basicConfig(level=logging.ERROR)
    print(f"upstream_stdio      {mib} MiB line: {trio.run(_upstream_stdio, mib):.3f} s CPU")
    print(f"e2e_line_transport  {mib} MiB line: {trio.run(_e2e_line_transport, mib):.3f} s CPU")
    print(f"stdio_wire          {mib} MiB line: {_stdio_wire(mib):.3f} s CPU")


if __name__ == "__main__":
    main()
