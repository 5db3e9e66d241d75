"""The stdio wire splice: a ``tools/call`` crossing as bytes, stdio host to stdio upstream (issues 11, 29).

Between a host on our stdin/stdout and a stdio upstream, of either era each, a
plain ``tools/call`` needs no SDK at all: the host's request line is parsed once
(``json.loads``), routed, and written to the upstream's stdin with our own
request id (and, to a 2026-era upstream, our client's ``_meta`` envelope); the
upstream's answer line is recognised by that id in its stdout pump before
anything parses it as a message, and written to the host with the host's id,
in the host's era's shape: a 2026-era host gets our ``serverInfo`` stamp and a
``resultType`` (``host.pipeline.stages.shaped``), a handshake-era host neither. No
task is spawned, no channel is crossed and no model is built per call. Where
the eras differ in more than shape (a server's questions mid-call, log levels,
input rounds), ``host.pipeline.rounds`` does what the SDK path would. What a call
must keep is done here, with the same texts as the general path:

* routing and the shutdown refusal; a call the splice does not carry (the
  table in ``host.pipeline.paths`` says which) is left to the SDK
  (``HostSplice.on_line`` returns False; a 2026-era host's fast-path call is run off
  the wire: ``host.stdio.tasks``), and so is anything not queued at once;
* ``tool_timeout_sec``: each upstream's calls share one timeout, so deadlines
  come in order and one task (``UpstreamSplice.serve_deadlines``) times out the
  oldest, sending the upstream a courtesy ``notifications/cancelled``;
* the host's ``notifications/cancelled`` for a spliced call is forwarded with
  our id, and the call is answered never, as JSON-RPC wants;
* a dead transport answers every spliced call with the general path's error
  result (``UpstreamUnavailable``'s text), an invalid result with
  ``UpstreamProtocolError``'s, and a JSON-RPC error passes through unchanged,
  -32602 first triggering the unknown-tool heal (I8);
* metrics and the rate-limited failure warning (``Front.note_call``), and the
  stdio link's unanswered-request tracking (EOF waits for spliced calls too);
* trace context (I18): a host's ``traceparent``, ``tracestate`` and ``baggage``
  in ``_meta`` keep a call on the splice. With telemetry off they go upstream
  as they came (one check, no span work); on, the call gets a SERVER span
  parented on them and a CLIENT span whose context goes upstream instead
  (``telemetry.spans.SplicedTrace``), both ended where the call is.

Under load (``LINGER_FROM_CALLS`` calls in flight) the host wire's reader and
the upstream's stdout pump wait ``LINGER_SEC`` before each read
(``linger_sec``), so one wake-up takes several lines: a bounded wait, asked for
before every read, that a lone call never pays.

A first-page ``tools/list`` from a stdio host is answered on the splice too,
from the catalog wire cache's encoded bytes (``catalog.wire_form``) for the host's
protocol version (a 2026-era host's envelope names it; a handshake-era host's
is the one the SDK negotiated with it), when that cache holds the current
Registry version and the wire's writer can take the answer at once; otherwise
the SDK answers (and fills the cache).

Concurrency: ``HostSplice.on_line`` runs synchronously in the host wire's reader
task; ``UpstreamSplice.claim`` in the upstream's stdout pump, which then writes
the answer: straight onto the host pipe while the host wire's writer is idle
(batched per chunk, or a large answer as pieces), else by awaiting that writer
(so a host that stops reading slows that upstream's replies, as it would slow
them on the general path). Tables are changed only in synchronous code. The
deadline task lives in the upstream transport's nursery.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from mcp.server.connection import Connection
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)
from outcome import Outcome

from supervisor.calls.attribution import HostCall
from supervisor.calls.splice import LINGER_FROM_CALLS, LINGER_SEC, SplicedCall
from supervisor.compat.sdk import request_context_on
from supervisor.host.pipeline.paths import path_of, plain_call
from supervisor.host.pipeline.rounds import (
    HandshakeRounds,
    Promotion,
    first_round_answer,
    log_notice_line,
)
from supervisor.host.pipeline.spliced import SpliceHostHalf
from supervisor.host.pipeline.stages import error_content, settle
from supervisor.host.stdio.lists import send_list_answer
from supervisor.host.stdio.tasks import StdioFastCalls, Tracker
from supervisor.host.stdio.wire import HostWire
from supervisor.wire import large as wire_large
from supervisor.wire.codec import frame, load, load_request
from supervisor.wire.pipes import DirectWrite

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

    from supervisor.calls.results import CallOutcome
    from supervisor.host.front import Front

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class HostSplice(SpliceHostHalf):
    """The stdio host's end of the splice: takes the calls it can carry off the host wire and answers them.

    Args:
        front: Routes, refuses during shutdown, stamps, counts.
        tracker: The stdio link's unanswered-request set.
    """

    front: Front
    tracker: Tracker
    enabled: bool = True
    taken: Counter[str] = field(default_factory=Counter)
    """How many ``tools/call`` lines were ``"spliced"`` and how many left to the SDK (``"sdk"``)."""
    _by_host_id: dict[str | int, SplicedCall] = field(default_factory=dict)
    _promoted: dict[SplicedCall, Promotion] = field(default_factory=dict)
    """Calls whose handshake-era upstream asked their 2026-era host something: their exchanges' (``adopt``)."""
    _rounds: HandshakeRounds = field(init=False)  # a handshake-era host's calls' input rounds (2026-era upstreams)
    _batched: list[DirectWrite] = field(default_factory=list)
    """Upstream stdins holding request lines from the chunk ``on_line`` is in (``flush_requests`` writes them)."""
    wire: HostWire = field(default_factory=HostWire)
    """The host wire the answers go on (``host.stdio.wire``), attached by the stdio link."""
    handshake_version: str | None = None
    """A handshake-era host's version, set once the SDK answered its ``initialize`` (``host.stdio.link``); else None."""

    fast: StdioFastCalls = field(init=False)
    """A 2026-era host's calls the fast path carries, run off the wire too (``host.stdio.tasks``)."""

    def __post_init__(self) -> None:
        self._rounds = HandshakeRounds(self, self.front)
        self.fast = StdioFastCalls(self.front, self.tracker, self.wire.write_line)

    @property
    def direct(self) -> DirectWrite:
        """The host pipe's direct writes (``HostWire.direct``), which the stdio link binds to its wire."""
        return self.wire.direct

    def attach(self, out: MemoryObjectSendStream[Any] | None) -> None:
        """The host wire's outgoing queue (a clone the splice owns and closes), or None to stop splicing."""
        self.wire.attach(out)

    def batched(self, direct: DirectWrite) -> None:
        """``direct`` (an upstream's stdin) holds a request from the current host chunk."""
        if direct not in self._batched:  # as many as the chunk's calls reach upstreams: a short list
            self._batched.append(direct)

    def flush_requests(self) -> None:
        """The host reader's hook after each chunk: write the requests batched per upstream, one syscall each."""
        for direct in self._batched:
            direct.flush()
        self._batched.clear()

    def flush(self) -> None:
        """An upstream pump's hook after each chunk: write the answers batched for this host in one syscall."""
        self.direct.flush()

    def linger_sec(self) -> float:
        """How long the host wire's reader waits before its next read (``LINGER_SEC`` under load, else 0)."""
        return LINGER_SEC if len(self._by_host_id) >= LINGER_FROM_CALLS else 0.0

    def on_line(self, line: bytes) -> bool:
        """Take ``line`` off the host wire if the splice carries it (True); else the SDK gets it (False)."""
        if b'"tools/call"' in line:
            way = self._take_call(line)
            self.taken[way or "sdk"] += 1
            return way is not None
        if (self._by_host_id or self.fast.running) and b'"notifications/cancelled"' in line:
            return self._take_cancel(line)
        if b'"tools/list"' in line:
            taken = self._take_list(line)
            self.taken["list spliced" if taken else "list sdk"] += 1
            return taken
        return False

    def _take_list(self, line: bytes) -> bool:
        """A first-page ``tools/list``, answered from the encoded catalog if it is cached for the host's version."""
        out = self.wire.out if self.enabled else None
        return out is not None and send_list_answer(line, self.handshake_version, self.front.tools_list_cache, out)

    def _take_call(self, line: bytes) -> str | None:
        """Which way a ``tools/call`` line was taken (``"spliced"``, ``"fast"``), or None: the SDK's."""
        if not self.enabled or self.wire.out is None or self.front.shutting_down:
            return None
        request = load_request(line, "tools/call")
        if request is None:
            return None
        message, spans = request
        host_id = message["id"]
        if host_id in self._by_host_id:
            return None
        handshake = self.handshake_version is not None
        plain = plain_call(message.get("params"), handshake_host=handshake)
        routed = self.front.route(plain.name) if plain is not None else None
        path = path_of(plain, routed, front="stdio", handshake_host=handshake)
        if path == "fast" and plain is not None and routed is not None:
            large_line = None if spans is None else line
            taken = self.fast.take(message, routed, plain.arguments, large_line, handshake=handshake)
            return "fast" if taken else None
        if path != "splice":
            return None
        assert plain is not None and routed is not None
        upstream = routed[1].ready_upstream
        assert upstream is not None and upstream.splice is not None  # what "splice" means (``path_of``)
        splice = upstream.splice
        # A handshake-era host's call to a 2026-era upstream: its log level goes with it, and an input
        # round is run here (``host.pipeline.rounds``), on the host's connection.
        connection = self.front.handshake_connection if handshake and splice.modern else None
        if handshake and splice.modern and connection is None:
            return None
        arguments_span = spans.inner.get("arguments") if spans is not None else None
        arguments_text = spans.text[arguments_span[1] : arguments_span[2]] if spans and arguments_span else None
        host_meta = message["params"].get("_meta")
        call = self.start(
            routed, host_id, plain.arguments, arguments_text=arguments_text,
            host_meta=None if handshake else host_meta, connection=connection,
            host_version=self.handshake_version if handshake else host_meta.get(PROTOCOL_VERSION_META_KEY),
            carrier=plain.carrier, progress_token=None if host_meta is None else host_meta.get("progressToken"),
            front="stdio",
        )  # fmt: skip
        if call is None:
            return None
        self._by_host_id[host_id] = call
        self.tracker.track(host_id)
        return "spliced"

    def _take_cancel(self, line: bytes) -> bool:
        try:
            message, _ = load(line, "params")
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
            return False
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return False
        call = self._by_host_id.pop(request_id, None)
        if call is None:
            return self.fast.cancel(request_id)
        if call.upstream is not None:
            call.upstream.abandon(call, "the host cancelled the request")
        if self._promoted and (promotion := self._promoted.get(call)) is not None and promotion.exchange is not None:
            promotion.exchange.scope.cancel()  # before its first round: the exchange ends with the request
        self._rounds.cancel(call)  # its input rounds, if any (and their upstream request), end with it
        call.done = True
        self._finish(call, "cancelled")
        return True

    def adopt(self, call: SplicedCall) -> HostCall | None:
        """``call`` as a ``HostCall``, for a server→client request its handshake-era upstream sent mid-call.

        A handshake-era host is asked on its connection; a 2026-era host's call is
        promoted to an exchange (``host.pipeline.rounds``). None when the call was
        answered or cancelled meanwhile (the request is then refused).
        """
        if self._by_host_id.get(call.host_id) is not call:
            return None
        if self.handshake_version is None:
            return self._promote(call)
        connection = self.front.handshake_connection
        if connection is None:
            return None
        ctx = request_context_on(connection, "tools/call", call.host_id, None)
        return HostCall(ctx, call.tool.owner, connection_log_level=self.front.connection_log_level(connection))

    def _promote(self, call: SplicedCall) -> HostCall:
        """A 2026-era host's spliced call becomes an exchange: its original request gets the first input round."""
        meta = call.host_meta or {}
        version = str(meta.get(PROTOCOL_VERSION_META_KEY))  # a 2026 version: the splice took only such calls
        connection = Connection.from_envelope(
            version, meta.get(CLIENT_INFO_META_KEY), meta.get(CLIENT_CAPABILITIES_META_KEY)
        )
        host_call = HostCall(request_context_on(connection, "tools/call", call.host_id, None), call.tool.owner)
        promotion = Promotion(call, partial(self._promotion_ended, call))
        self._promoted[call] = promotion
        promotion.exchange = self.front.exchanges.adopt(
            host_call, f"tools/call {call.tool.key}", promotion.wait, partial(self.answer_round, call)
        )
        return host_call

    def _promotion_ended(self, call: SplicedCall) -> None:
        """A promoted call's upstream request ended: it is no longer in flight there."""
        del self._promoted[call]
        self.front.calls.unspliced(call.tool.owner, call)

    async def answer_round(self, call: SplicedCall, result: Outcome[Any]) -> None:
        """Answer a promoted call's original request with its exchange's first round (``host.pipeline.rounds``)."""
        version = str((call.host_meta or {}).get(PROTOCOL_VERSION_META_KEY))  # a 2026 version (``plain_call``)
        outcome, message, failure = first_round_answer(call.host_id, result, self.restamp, version)
        if failure is not None:
            call.failure = (type(failure).__name__, str(failure))
        await self.write_answer(call, outcome, frame(message))
        self.flush()  # an exchange's task is not a pump: nobody else flushes for it

    async def notice(self, call: SplicedCall, params: dict[str, Any]) -> bool:
        """Forward an upstream's log message of ``call`` (the only call in flight there); False: not its."""
        if self._by_host_id.get(call.host_id) is not call or self.front.calls.in_flight(call.tool.owner) != 1:
            return False
        line = log_notice_line(call, params)
        if line is None:
            return False
        if line:  # b"": below the level the host set
            await self.wire.send(line)
        return True

    async def progress(self, call: SplicedCall, params: dict[str, Any]) -> None:
        """An upstream's progress notice of ``call``, to its host against the host's own token (dropped once the
        call is answered or cancelled, or promoted: its host then has an input round, not this request)."""
        if self._by_host_id.get(call.host_id) is not call or (self._promoted and call in self._promoted):
            return
        notice = {"jsonrpc": "2.0", "method": "notifications/progress"}
        await self.wire.send(frame({**notice, "params": {**params, "progressToken": call.progress_token}}))

    @property
    def handshake_host(self) -> bool:
        return self.handshake_version is not None

    def version_of(self, call: SplicedCall) -> str:  # ``host.pipeline.rounds.RoundsHost``
        return self.handshake_version or ""

    async def answer(self, call: SplicedCall, outcome: CallOutcome, message: dict[str, Any]) -> None:
        """Write ``message`` to the host as the answer to ``call`` (unless the host cancelled it)."""
        if self._promoted and (promotion := self._promoted.get(call)) is not None:
            promotion.settle(message)  # the exchange has it: the host's retry round gets it
            return
        result = message.get("result")
        if call.log_level is not None and result is not None and result.get("resultType") == "input_required":
            self._rounds.start(call, result)  # a handshake-era host cannot take it: its rounds run here
            return
        await self.write_answer(call, outcome, frame(message))

    async def answer_line(self, call: SplicedCall, outcome: CallOutcome, line: bytes) -> None:
        """Write the framed ``line`` to the host as the answer to ``call`` (unless the host cancelled it)."""
        if self._promoted and (promotion := self._promoted.get(call)) is not None:
            promotion.settle(json.loads(line))  # a large answer to a promoted call: rare, parsed whole
            return
        await self.write_answer(call, outcome, line)

    async def write_answer(self, call: SplicedCall, outcome: CallOutcome, line: bytes) -> None:
        """Write ``line`` as the answer to ``call``'s own request, whatever its upstream half does with answers."""
        if self._by_host_id.pop(call.host_id, None) is not call:
            return  # cancelled by the host meanwhile: JSON-RPC wants no answer
        await self.wire.write_owed(line, partial(self._finish, call, outcome), call.host_id)

    def answer_now(self, call: SplicedCall, outcome: CallOutcome, pieces: wire_large.Pieces) -> bool:
        """Write a large answer to ``call`` (``pieces``) at once if the host wire's writer is idle.

        True: written (or owed no answer: the host cancelled the call); False:
        nothing done, answer with ``answer_line`` (the writer is busy).
        """
        if self._promoted and call in self._promoted:
            return False  # the exchange takes it, through ``answer_line``
        if self._by_host_id.get(call.host_id) is not call:
            return True  # cancelled by the host meanwhile: JSON-RPC wants no answer
        if not self.wire.write_pieces(pieces):
            return False
        del self._by_host_id[call.host_id]
        self._finish(call, outcome)
        return True

    async def fail(self, call: SplicedCall, outcome: CallOutcome, kind: str, text: str) -> None:
        """Answer ``call`` with the general path's error result carrying ``text``."""
        if self._promoted and (promotion := self._promoted.get(call)) is not None:
            promotion.settle_failure(kind, text)  # the round waiting for it reads it as the general path's error
            return
        call.failure = (kind, text)
        answer = {"jsonrpc": "2.0", "id": call.host_id, "result": self.restamp(error_content(text))}
        await self.answer(call, outcome, answer)
        self.flush()  # the deadline task and the transport's watcher are not pumps: nobody else flushes for them

    def _finish(self, call: SplicedCall, outcome: CallOutcome) -> None:
        self.tracker.settle(call.host_id)
        if call.counted and call not in self._promoted:  # a promoted call is in flight until its upstream ends
            self.front.calls.unspliced(call.tool.owner, call)
        settle(self.front, call.tool, outcome, call.started, failure=call.failure, trace=call.trace)
