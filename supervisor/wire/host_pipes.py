"""This process's stdin and stdout as the host wire, before anything parses a message (issue 57; no SDK).

``open_host_pipes`` duplicates fd 0 and fd 1 into trio ``FdStream``s, widens
them (a pipe's capacity can be set from either end), points fd 0 at
``/dev/null`` and fd 1 at stderr while they are open, so a stray print (ours or
a child's) never corrupts the wire, and restores both on exit. ``HostPipes``
also carries the read side's state, its ``PipeReader`` and ``LineBuffer``: the
stdio front's prelude (``host.stdio.prelude``) reads the host's first lines
through them before the SDK is even imported, and the stdio wire
(``wire.stdio.open_stdio_wire``) goes on from the very byte the prelude stopped
at, a partial line included.

Whoever opens the pipes closes them; the wire that borrows them does not.
Nothing here awaits but the shielded close.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final

import trio

from supervisor.wire.frames import LineBuffer
from supervisor.wire.pipes import PipeReader, widen_pipe

READ_CHUNK_BYTES: Final = 1 << 20
"""A large request in a few wake-ups."""


@dataclass(eq=False)
class HostPipes:
    """The host wire's two ends and its read state (module docstring)."""

    wire_in: trio.lowlevel.FdStream
    wire_out: trio.lowlevel.FdStream
    reader: PipeReader
    lines: LineBuffer = field(default_factory=LineBuffer)  # no cap: the host is the party this process serves


@asynccontextmanager
async def open_host_pipes() -> AsyncIterator[HostPipes]:
    """Take over stdin and stdout as the host wire for the block; restore them after it."""
    saved_stdin = os.dup(0)
    saved_stdout = os.dup(1)
    wire_in = trio.lowlevel.FdStream(os.dup(0))
    wire_out = trio.lowlevel.FdStream(os.dup(1))
    for pipe in (wire_in, wire_out):
        widen_pipe(pipe)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    try:
        yield HostPipes(wire_in, wire_out, PipeReader(wire_in, READ_CHUNK_BYTES))
    finally:
        with trio.CancelScope(shield=True):
            await wire_in.aclose()
            await wire_out.aclose()
        os.dup2(saved_stdin, 0)
        os.dup2(saved_stdout, 1)
        os.close(saved_stdin)
        os.close(saved_stdout)
