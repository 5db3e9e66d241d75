"""The least a stdio proxy process can cost: ``python -m bench.relay_floor [--check | --ahead] -- ARGV...``.

A line relay with nothing of the sidecar in it: it starts ``ARGV`` as its one
upstream and copies bytes between its own stdin/stdout and the child's, with
one thread per direction doing blocking ``os.read`` / ``os.write`` on pipes
widened as the sidecar widens its own (``wire.pipes.PIPE_BYTES``), and glibc's
heap kept warm as the sidecar keeps it (``wire.heap``). No event loop, no
routing, no id mapping, no MCP: the host talks to the child as if directly,
one process further away.

``--check`` adds what DESIGN I12 asks of a proxy that must not pass garbage on:
each complete line is proven well-formed JSON with the sidecar's own proof
(``pydantic_core.from_json(line, cache_strings=False)``, as ``wire.json_spans``
calls it) before any of its bytes go on; a line that fails is dropped.

``--ahead`` proves each line too, but only after writing it all but its
newline, so the reader takes the bytes in while the proof runs; a line that
fails is ended with a byte no JSON parser takes. The reader then gets a line it
cannot parse, which the sidecar never lets happen (I12; a line cannot be
un-sent): this is the floor of a proxy that gives that guarantee up, measured
to show what the guarantee costs.

``bench.large_ratio`` puts them beside the direct client and the sidecar: the
bare relay is the floor of a proxy's cost for a 1 MB call (two more pipe hops
and their copies), the checked relay the floor of one that validates. The gap
from the checked relay to the sidecar is what the sidecar itself adds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import threading
from typing import Final, Literal

from pydantic_core import from_json

from supervisor.wire.heap import keep_large_buffers_warm
from supervisor.wire.pipes import PIPE_BYTES

Mode = Literal["bare", "check", "ahead"]
MODES: Final[dict[str, Mode]] = {"--check": "check", "--ahead": "ahead"}
UNPARSEABLE_END: Final = b"!\n"
"""How ``--ahead`` ends a line it wrote before its proof failed: a byte after a JSON value makes it no JSON."""


def _widen(fd: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _proven(line: bytes) -> bool:
    try:
        from_json(line, cache_strings=False)  # a final newline is JSON whitespace
    except ValueError:
        return False
    return True


def _relay_lines(lines: bytes, sink: int, mode: Mode) -> None:
    """Whole ``lines`` (each ending in a newline) to ``sink`` as ``mode`` says."""
    if lines.find(b"\n") != len(lines) - 1:  # several lines: each proven on its own
        proven = [line + b"\n" for line in lines[:-1].split(b"\n") if _proven(line)]
        _write_all(sink, b"".join(proven))
    elif mode == "ahead":  # one line (a 1 MB one is read whole): all but its end first
        _write_all(sink, memoryview(lines)[:-1])
        _write_all(sink, b"\n" if _proven(lines) else UNPARSEABLE_END)
    elif _proven(lines):  # proven in place, no copy
        _write_all(sink, lines)


def _copy(source: int, sink: int, mode: Mode) -> None:
    """Bytes from ``source`` to ``sink`` until end of file; unless ``bare``, as whole lines, proven."""
    held = b""
    while chunk := os.read(source, PIPE_BYTES):
        if mode == "bare":
            _write_all(sink, chunk)
            continue
        held = held + chunk if held else chunk
        end = held.rfind(b"\n") + 1
        if end:
            lines, held = held[:end], held[end:]
            _relay_lines(lines, sink, mode)
    os.close(sink)


def main() -> None:
    argv = sys.argv[1:]
    mode: Mode = MODES.get(argv[0], "bare") if argv else "bare"
    argv = argv[1:] if argv[:1] and argv[0] in MODES else argv
    argv = argv[1:] if argv[:1] == ["--"] else argv
    keep_large_buffers_warm()
    for fd in (0, 1):
        _widen(fd)
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    child_in, child_out = child.stdin.fileno(), child.stdout.fileno()
    for fd in (child_in, child_out):
        _widen(fd)
    threading.Thread(target=_copy, args=(0, child_in, mode), daemon=True).start()
    with contextlib.suppress(OSError):  # the host went away
        _copy(child_out, 1, mode)
    child.wait()


if __name__ == "__main__":
    main()
