"""What the stdio wire splice's two halves share about one call in flight (issue 11).

The host half (``supervisor.host.stdio.reader.HostSplice``) takes a ``tools/call``
off the host wire and the upstream half (``supervisor.upstream.splice.UpstreamSplice``)
writes it to a stdio upstream and recognises its answer. Neither imports the
other: the upstream half sees the host half and the actor only through the
protocols below, and both meet in ``SplicedCall``.

Concurrency: a ``SplicedCall`` is changed only in synchronous code, by the half
that holds it at that moment (the host wire's reader task, or the upstream's
stdout pump).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol

import mcp_types as types
from mcp import MCPError

from supervisor.calls.attribution import HostCall
from supervisor.calls.results import CallOutcome
from supervisor.catalog.registry import RegisteredTool
from supervisor.telemetry.spans import SplicedTrace
from supervisor.wire.large import Pieces
from supervisor.wire.pipes import DirectWrite

ID_PREFIX: Final = "mcp-supervisor/splice/"
"""Request ids the splice mints upstream; an answer line that carries one is the splice's."""

LINGER_FROM_CALLS: Final = 8
"""Spliced calls in flight (per host, resp. per upstream) from which that side's pump lingers before it reads."""
LINGER_SEC: Final = 1.5e-3
"""How long a pump under load waits before it reads (``PipeReader.receive``), so one wake-up takes several lines.

With many calls in flight on two busy cores, the host writes one request at a
time and an SDK server one answer at a time, and a pump that reads the moment
its pipe turns readable pays a wake-up (about a third of the splice's CPU per
call) for nearly every line. Waiting first cut reads per call at c32 from about
1.3 to about 0.6 and the sidecar's CPU per call by about a quarter (the host's
and the server's too: they get answers, resp. requests, in bigger batches).
Below ``LINGER_FROM_CALLS`` calls in flight nothing waits, so c1 latency is
untouched. At or above it a line waits about ``LINGER_SEC`` per pump it crosses,
rounded up to whole milliseconds: trio's run loop sleeps in ``epoll_wait``,
whose timeout is whole milliseconds, so a sidecar with nothing else to do wakes
after 2 ms here; a busy one, at the first pass of its run loop after the
deadline. With the host keeping that many calls in flight, fewer wake-ups mean
more calls per second and so, by Little's law, less time per call.

Measured back to back at c32 (issue 11, round 4; ``python -m bench p2``'s c32
rounds, direct and sidecar alternating): 0.3 ms (1 ms in effect) gave 72-128 us
of sidecar CPU per call and ratios from 0.70 to 0.91 over seven runs; 1.5 ms gave
55-72 us and 0.75-0.89 over five; 3 ms 50-61 us (two runs). c8 and c12 were no
worse (0.62 / 0.62 against 0.58 / 0.61). A ``timerfd`` waking at exactly 0.3 ms
was worse than both (140-152 us, ratio 0.64-0.67): it is the batching that pays.
"""


class SpliceHost(Protocol):
    """What the upstream half needs of the host half that sent a call (``HostSplice``)."""

    def batched(self, direct: DirectWrite) -> None: ...

    def flush(self) -> None: ...

    def restamp(self, result: dict[str, Any]) -> dict[str, Any]: ...

    async def answer(self, call: SplicedCall, outcome: CallOutcome, message: dict[str, Any]) -> None: ...

    async def answer_line(self, call: SplicedCall, outcome: CallOutcome, line: bytes) -> None: ...

    def answer_now(self, call: SplicedCall, outcome: CallOutcome, pieces: Pieces) -> bool: ...

    async def fail(self, call: SplicedCall, outcome: CallOutcome, kind: str, text: str) -> None: ...

    async def notice(self, call: SplicedCall, params: dict[str, Any]) -> bool: ...

    async def progress(self, call: SplicedCall, params: dict[str, Any]) -> None: ...

    def adopt(self, call: SplicedCall) -> HostCall | None: ...


class SpliceOwner(Protocol):
    """What the splice needs of the actor that owns the called tool (``ServerActor``)."""

    def heal_unknown_tool(self, raw_name: str, error: MCPError) -> None: ...

    async def finish_input_rounds(
        self, raw_name: str, arguments: dict[str, Any] | None, first: dict[str, Any], call: HostCall
    ) -> types.CallToolResult: ...


class SpliceUpstream(Protocol):
    """What the host half needs of the generation's splice it sent a call on (``UpstreamSplice``)."""

    def abandon(self, call: SplicedCall, reason: str) -> None: ...


@dataclass(eq=False, slots=True)
class SplicedCall:
    """One host ``tools/call`` in flight on the splice."""

    host_id: str | int
    upstream_id: str
    tool: RegisteredTool
    actor: SpliceOwner
    started: float
    deadline: float
    host: SpliceHost
    done: bool = False
    upstream: SpliceUpstream | None = None
    """The generation's splice it was sent on (a host's cancel goes there, even if the server moved on)."""
    trace: SplicedTrace | None = None
    """Its SERVER and CLIENT spans, while telemetry is on (``telemetry.spans``); None otherwise."""
    log_level: types.LoggingLevel | None = None
    """The level a handshake-era host wants a 2026-era upstream's log messages of this call at (None: none)."""
    arguments: Any = None
    """What went upstream as ``arguments`` (kept for the input rounds of a handshake-era host's call)."""
    arguments_text: memoryview | None = None
    """Their text instead, when the request was large (decoded only if an input round needs them)."""
    host_meta: dict[str, Any] | None = None
    """A 2026-era host's ``_meta`` (its envelope), kept only for a call to a handshake-era upstream (``adopt``)."""
    counted: bool = False
    """Whether it is counted in flight on its server (``CallTracker.spliced``: a handshake-era upstream's)."""
    adopted: HostCall | None = None
    """The call as a ``HostCall``, once a handshake-era upstream's request to the host needed one (``adopt``)."""
    progress_token: Any = None
    """The host's progress token (None: it asked for none); the upstream's notices of the call carry ours, its id."""
    failure: tuple[str, str] | None = None
    """How it failed upstream, if it did: the ``UpstreamError``'s kind and text (warned of when it settles)."""

    def adopt(self) -> HostCall | None:
        """``calls.attribution.Adoptable``: built by the host half the first time, then the same one."""
        if self.adopted is None:
            self.adopted = self.host.adopt(self)
        return self.adopted
