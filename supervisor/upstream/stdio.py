"""Stdio transport for one upstream generation: a child in its own process group.

``open_stdio_transport`` spawns the configured command with
``start_new_session=True`` and yields the ``(read, write)`` stream pair an
``mcp.Client`` drives. It differs from the SDK's ``stdio_client`` on purpose
(DESIGN §7, "Process death and orphans"):

* Death is detected by watching the process (``proc.wait()``), not only stdout
  EOF, so a grandchild that inherited the pipes cannot hide a dead server.
  On death the read side is closed at once (in-flight requests fail in
  milliseconds) and ``TransportHealth.lost`` is set for the ServerActor.
* Every exit path first cancels each spliced call still in flight on the
  server's stdin (``notifications/cancelled``, bounded), then takes down the
  whole process group with ``upstream.process_group.terminate_group``: close stdin, a short grace, SIGTERM to the group,
  a bounded grace, SIGKILL to the group, raced against the group ending. The
  cleanup is shielded and bounded, so neither a cancelled caller nor a wedged
  child can leak or hang it (I11). The context manager returns only once the
  leader is reaped and no live process is left in its group (or after the kill
  escalation ran out, which is logged as an error), so a new generation never
  overlaps the previous child.
* Stdout is framed by ``wire.frames.LineBuffer``: linear however long a line, and
  a line over ``_MAX_LINE_BYTES`` loses the transport as soon as it grows past
  the cap. Lines that are not JSON-RPC are dropped with a rate-limited warning
  instead of reaching the session; stderr is relayed into the log prefixed
  with the server name, rate-limited, so a flooding child cannot flood us.
* The child's environment is minimal: PATH, HOME, locale, proxy and CA-bundle
  variables, plus the configured ``env``. Nothing else leaks from the sidecar
  (``upstream.spawn``, which also starts the first generation's child early).

Nursery: the transport owns one nursery for its pump tasks (stdout, stdin,
stderr, process watcher); all of them end when the context exits.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, Final

import anyio
import mcp_types as types
import trio
from mcp.shared.message import SessionMessage

from supervisor.compat.sdk import TransportStreams
from supervisor.config.servers import ServerSettings
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.process_group import terminate_group
from supervisor.upstream.spawn import spawn_stdio_server
from supervisor.wire.frames import LineBuffer, encode_batch
from supervisor.wire.pipes import PipeReader, widen_pipe
from supervisor.wire.stdio import decode_message

if TYPE_CHECKING:
    from supervisor.calls.splice import SpliceHost
    from supervisor.upstream.spawn import EarlyServers
    from supervisor.upstream.splice import UpstreamSplice

logger = logging.getLogger(__name__)

_MAX_LINE_BYTES: Final = 64 * 1024 * 1024
"""A stdout line longer than this is garbage, not a message; the transport is declared lost."""
_READ_CHUNK_BYTES: Final = 1 << 20
"""Up to this much of the child's stdout per read: a 1 MB answer in a few wake-ups, not sixteen."""
_STDIN_QUEUE: Final = 64
COURTESY_WRITE_SEC: Final = 0.05
"""How long a closing transport may take to write its spliced calls' cancellations to the server's stdin."""
"""Messages queued for the child's stdin: the SDK's and the wire splice's lines wait here to be batched."""
_STDERR_LINES_PER_SEC: Final = 50
_GARBAGE_WARNINGS_PER_SEC: Final = 5


class _RateLimiter:
    """At most ``per_sec`` events per one-second window; counts what it suppressed."""

    def __init__(self, per_sec: int) -> None:
        self._per_sec = per_sec
        self._window_start = -math.inf
        self._count = 0
        self.suppressed = 0

    def allow(self) -> bool:
        now = trio.current_time()
        if now - self._window_start >= 1.0:
            self._window_start = now
            self._count = 0
        self._count += 1
        if self._count <= self._per_sec:
            return True
        self.suppressed += 1
        return False

    def take_suppressed(self) -> int:
        suppressed, self.suppressed = self.suppressed, 0
        return suppressed


_SCREEN_LINES_FROM_BYTES: Final = 1 << 20
"""Lines this long are screened for oversized listings before they are parsed."""
_ENTRY_MARKERS: Final = (b'"inputSchema"', b'"uriTemplate"')
"""Keys every tool, resp. every resource template, carries exactly once."""
_ID_PATTERN: Final = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def screen_oversized_listing(line: bytes, max_entries: int) -> bytes:
    """Replace a listing with more than ``max_entries`` entries by an error answer, without parsing it (I15).

    Parsing a 17 MB listing of 100,000 tools costs about 1.6 s of CPU and
    700 MB in one go, stalling every server and the host; counting a marker
    that each entry carries exactly once costs about 15 ms. Lines that are not
    such listings pass unchanged (the count is then an upper bound at most).
    """
    entries = max(line.count(marker) for marker in _ENTRY_MARKERS)
    if entries <= max_entries:
        return line
    found = _ID_PATTERN.search(line, 0, 4096)
    if found is None:
        return b""  # not an answer we can refuse: drop it (the request then times out)
    message = f"a listing of {entries} entries exceeds max_tools = {max_entries} (refused before parsing)"
    error = {"code": types.INTERNAL_ERROR, "message": message}
    return b'{"jsonrpc":"2.0","id":' + found.group(1) + b',"error":' + json.dumps(error).encode() + b"}"


async def _write_courtesy_cancels(proc: trio.Process, lines: bytes) -> None:
    """Tell the server its spliced calls are cancelled before its stdin closes (bounded; best effort)."""
    if not lines or proc.stdin is None:
        return
    with trio.move_on_after(COURTESY_WRITE_SEC), suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        await proc.stdin.send_all(lines)


@asynccontextmanager
async def open_stdio_transport(
    settings: ServerSettings,
    health: TransportHealth,
    *,
    parent_env: Mapping[str, str] | None = None,
    splice: UpstreamSplice | None = None,
    early: EarlyServers | None = None,
) -> AsyncIterator[TransportStreams]:
    """Spawn ``settings.command`` (or take its early process) and yield the stream pair an ``mcp.Client`` drives.

    With ``early``, the process started for this server before the SDK import
    (``upstream.spawn``) is taken if there is one, and owned from then on exactly
    like one spawned here.

    With ``splice``, the wire splice (``host.stdio.reader``) queues request lines on
    stdin and takes its answers off stdout before they are parsed; its calls
    are failed when the child dies or the transport closes.

    Raises:
        OSError: The command could not be started (not found, not executable, bad cwd).
    """
    name = settings.name
    proc = early.take(settings) if early is not None else None
    if proc is None:
        proc = await spawn_stdio_server(settings, parent_env)
    for pipe in (proc.stdin, proc.stdout):
        widen_pipe(pipe)
    # Unbuffered towards the session (it applies its own backpressure); a short queue towards the
    # child, so the wire splice can queue a line without waiting and a burst is written in one batch.
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[Any](_STDIN_QUEUE)
    if splice is not None:
        stdin = proc.stdin
        splice.attach(write_stream, stdin.fileno() if isinstance(stdin, trio.lowlevel.FdStream) else None)

    async def pump_stdout() -> None:
        assert proc.stdout is not None
        garbage = _RateLimiter(_GARBAGE_WARNINGS_PER_SEC)
        lines = LineBuffer(max_line_bytes=_MAX_LINE_BYTES)
        answered: list[SpliceHost] = []
        """Hosts the chunk's spliced answers went to: their batched lines are written in one go (``flush``)."""

        def flush() -> None:
            for host in answered:
                host.flush()
            answered.clear()

        async with to_session:
            reader = PipeReader(proc.stdout, _READ_CHUNK_BYTES)
            while chunk := await reader.receive(splice.linger_sec() if splice is not None else 0.0):
                lines.feed(chunk)
                while (line := lines.next_line()) is not None:
                    if not line.strip():
                        continue
                    if splice is not None and splice.expecting:
                        if (claimed := splice.claim(line)) is not None:
                            if claimed[0].host not in answered:  # one host in practice: a short list
                                answered.append(claimed[0].host)
                            await splice.deliver(*claimed)
                            continue
                        if b'"notifications/message"' in line and (host := await splice.deliver_notice(line)):
                            if host not in answered:
                                answered.append(host)
                            continue
                        if b'"notifications/progress"' in line and (host := await splice.deliver_progress(line)):
                            if host not in answered:
                                answered.append(host)
                            continue
                    flush()  # before waiting on the session
                    if len(line) >= _SCREEN_LINES_FROM_BYTES:
                        line = screen_oversized_listing(line, settings.max_tools)
                    try:
                        message = decode_message(line)
                    except ValueError:  # not JSON, or not JSON-RPC (pydantic's ValidationError)
                        if garbage.allow():
                            logger.warning("server=%s sent a non-JSON-RPC line on stdout: %.200r", name, line)
                        continue
                    try:
                        await to_session.send(SessionMessage(message))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return
                flush()
                if lines.overlong:
                    health.mark_lost(f"stdout line longer than {_MAX_LINE_BYTES} bytes")
                    return
        health.mark_lost("stdout closed")

    async def pump_stdin() -> None:
        assert proc.stdin is not None
        direct = splice.direct if splice is not None else None
        async with from_session:
            try:
                async for session_message in from_session:
                    data = encode_batch(session_message, from_session)
                    if direct is not None and direct.pending:
                        data = direct.take() + data  # the splice's batch was accepted before this woke us
                    await proc.stdin.send_all(data)
                if direct is not None and (rest := direct.take()):
                    await proc.stdin.send_all(rest)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                health.mark_lost("stdin closed")
            finally:
                if direct is not None:
                    direct.take()  # requests the child never got: fail_all answers their calls

    async def pump_stderr() -> None:
        assert proc.stderr is not None
        limiter = _RateLimiter(_STDERR_LINES_PER_SEC)
        buffer = b""
        async for chunk in proc.stderr:
            *lines, buffer = (buffer + chunk).split(b"\n")
            buffer = buffer[-8192:]
            for line in lines:
                if limiter.allow():
                    if suppressed := limiter.take_suppressed():
                        logger.warning("server=%s: %d stderr lines suppressed", name, suppressed)
                    logger.info("[%s] %s", name, line.decode(errors="replace").rstrip())

    async def watch_process() -> None:
        code = await proc.wait()
        health.mark_lost(f"process exited with code {code}")
        # Wake the session now even if a grandchild keeps the stdout pipe open.
        to_session.close()
        if splice is not None:
            await splice.fail_all(health.reason)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump_stdout)
            nursery.start_soon(pump_stdin)
            nursery.start_soon(pump_stderr)
            nursery.start_soon(watch_process)
            if splice is not None:
                nursery.start_soon(splice.serve_deadlines)
            try:
                yield read_stream, write_stream
            finally:
                with trio.CancelScope(shield=True):
                    if splice is not None:
                        await _write_courtesy_cancels(proc, splice.courtesy_cancels("the client is closing"))
                    await terminate_group(name, proc)
                    if splice is not None:
                        await splice.fail_all("transport closed")
                nursery.cancel_scope.cancel()
    finally:
        for stream in (read_stream, write_stream, to_session, from_session):
            stream.close()
        if proc.poll() is None:
            # Only reachable if the nursery itself failed before the cleanup above ran.
            with trio.CancelScope(shield=True):
                await terminate_group(name, proc)
