"""The wire splice's HTTP half: an HTTP front's plain ``tools/call`` to a stdio upstream of its era (issue 29).

The HTTP front answers some plain calls itself: a 2026-era host's
(``host.http.posts``) and a handshake-era session's
(``host.http.sessions``). When ``host.pipeline.paths`` says ``"splice"``
for one (no trace context; the upstream a stdio generation of the host's
era whose splice is ready), the call skips the SDK's client as well:
``HttpSplice.submit`` hands it to the generation's splice
(``upstream.splice.UpstreamSplice``), which writes the request line with our id
(and to a 2026-era upstream our envelope) and recognises the answer in the
upstream's stdout pump, before anything parses it as a message; the answer is
handed here and becomes the POST's body as it is (a large one too). What the
call keeps, with the texts of the general path (the splice's own list,
``host.stdio.reader``):

* ``tool_timeout_sec`` (the splice's deadline task), with its courtesy
  ``notifications/cancelled`` upstream;
* cancellation, each era's way: a 2026-era host hanging up (the POST's
  ``http.disconnect``) abandons the call upstream, with the same courtesy
  cancel, and answers nothing; a handshake-era host cancels by notice
  (``cancel``: the SDK's ``REQUEST_CANCELLED`` answer), and its hanging up
  leaves the call running with its answer going nowhere, as on the SDK's
  transport (``forsake``);
* a dead transport answers with ``UpstreamUnavailable``'s text, an invalid
  result with ``UpstreamProtocolError``'s; a JSON-RPC error passes through
  (to a 2026-era host with the SDK's HTTP status for its code), -32602 first
  triggering the unknown-tool heal (I8);
* metrics and the rate-limited failure warning (``Front.note_call``);
* the result in the host's era's shape: a 2026-era host's stamped with our
  ``serverInfo`` (``host.pipeline.stages.shaped``), a handshake-era host's as the
  upstream sent it (``calls.results.handshake_shaped``);
* a handshake-era upstream's requests to its host mid-call (sampling,
  elicitation, roots): the call is counted in flight on its server, and
  ``adopt`` asks them on the call's own response (the answer's ``Asker``).

* between eras (a handshake-era session, a 2026-era upstream), what the
  SDK path would do: the request names the session's log level and declares
  its capabilities, the call's log messages ride its response in wire order
  (``notice``), and an input round is run in the sidecar
  (``host.pipeline.rounds.HandshakeRounds``), asking the host on the call's
  response; the host gets the end as its answer.

Which calls never come here, and why: a 2026-era host's call to a
handshake-era upstream (which may ask its host something mid-call: the fast
path's exchanges turn that into input rounds), or with a log level, a
progress token or trace context in its ``_meta`` (the fast path carries
those). A handshake-era session's trace context goes upstream as it came
(telemetry off), or parents the call's spans (on: ``SplicedTrace``, as on stdio).

Concurrency: ``submit``, ``abandon``, ``cancel`` and the answer's hand-over are
synchronous. The POST's task returns once its call is sent: its answer is
detached (``ops.http1_exchange.DETACH``), so whichever task settles the call
(the upstream's stdout pump, its deadline task, its transport's watcher, the
host's cancel POST) writes the answer there and then (``_settle``: no await
between taking the call out of the table and writing), and the connection's
task, which reads for the next request anyway, is not woken for it. That
task tells the call of the host's hang-up and of a silence (``HttpAnswer``). A
call is answered once: by whichever of the answer, the timeout, the
transport's loss, the host's cancel or hang-up takes it out of ``_waiting``
first. Without the extension (another ASGI server) no call is spliced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types import PROTOCOL_VERSION_META_KEY

from supervisor.calls.splice import SplicedCall
from supervisor.host.http.answers import PING_SEC, PostAnswer
from supervisor.host.pipeline.rounds import HandshakeRounds, log_notice_line
from supervisor.host.pipeline.spliced import SpliceHostHalf
from supervisor.host.pipeline.stages import error_content, settle
from supervisor.wire.codec import frame, to_json

if TYPE_CHECKING:
    from mcp.server.connection import Connection

    from supervisor.calls.attribution import HostCall
    from supervisor.calls.results import CallOutcome
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.host.front import Front
    from supervisor.ops.http1_exchange import SendNow, Watcher
    from supervisor.server_actor import ServerActor
    from supervisor.wire.large import Pieces
    from supervisor.wire.pipes import DirectWrite


Detach = Callable[["Watcher", float], "SendNow"]
"""The server's ``ops.http1_exchange.DETACH`` extension."""


class Asker(Protocol):
    """A handshake-era call's server→host requests, asked on its own response (``host.http.sessions``)."""

    @property
    def connection(self) -> Connection:
        """The host's session: its negotiated version, its capabilities, the log level it set."""
        ...

    def host_call(self, call: SplicedCall) -> HostCall | None: ...

    def close(self) -> None: ...


@dataclass(slots=True, eq=False)
class HttpAnswer:
    """A spliced call's answer as its POST writes it: detached (``ops.http1_exchange.DETACH``), it is the server's
    ``Watcher`` of that answer.

    The POST's task returns once the call is sent (``attach``). Whoever settles
    the call (the upstream's stdout pump, its deadline task, its transport's
    watcher, the host's cancel) writes the answer at once with
    ``stream.answer_now``; the connection's task tells it of a silence (a ping)
    and of the host's hang-up (``HttpSplice.abandon`` for a 2026-era call, which
    the hang-up cancels; ``forsake`` for a handshake-era one, which it does not).
    """

    call: SplicedCall
    splice: HttpSplice
    stream: PostAnswer | None = None
    """The POST's response (pings; a handshake-era call's messages before the answer); None once it hung up."""
    asker: Asker | None = None
    """A handshake-era call's: its upstream's requests to the host, asked on ``stream``."""
    on_end: Callable[[], None] | None = None
    """Called once the POST is over: its answer written, or its host gone."""
    on_settled: Callable[[], None] | None = None
    """Called once the call is over (answered, failed or cancelled): after its host hung up too, for a
    handshake-era call, which goes on until then."""

    def attach(self, detach: Detach, headers: list[tuple[bytes, bytes]] | None = None) -> PostAnswer:
        """Detach the POST's answer (its task returns now); the response it is written on."""
        self.stream = PostAnswer(None, headers, send_now=detach(self, PING_SEC))
        return self.stream

    def silent(self) -> None:
        if self.stream is not None:
            self.stream.ping_now()

    def hung_up(self) -> None:
        if self.splice.handshake:
            self.splice.forsake(self)
        else:
            self.splice.abandon(self)

    def ended(self) -> None:
        if self.on_end is not None:
            self.on_end()


class HttpSplice(SpliceHostHalf):
    """One view's HTTP front end of the splice (``calls.splice.SpliceHost``) for one host era: calls in flight.

    ``handshake``: for handshake-era sessions' calls (``host.http.sessions``)
    to upstreams of either era; else 2026-era hosts' to 2026-era upstreams.
    A handshake-era session's call to a 2026-era upstream names the session's
    log level, gets its log messages on its own response, and has its input
    rounds run here (``host.pipeline.rounds.HandshakeRounds``), as on stdio.
    """

    front: Front

    def __init__(self, front: Front, *, handshake: bool = False) -> None:
        self.front = front
        self.handshake = handshake
        self._waiting: dict[SplicedCall, HttpAnswer] = {}
        self._rounds = HandshakeRounds(self, front)

    @property
    def handshake_host(self) -> bool:
        return self.handshake

    @property
    def in_flight(self) -> int:
        """How many calls wait for their answer here."""
        return len(self._waiting)

    def submit(
        self,
        host_id: str | int,
        tool: RegisteredTool,
        actor: ServerActor,
        arguments: dict[str, Any] | None,
        meta: Any,
        *,
        asker: Asker | None = None,
        carrier: dict[str, Any] | None = None,
        progress_token: Any = None,
    ) -> HttpAnswer | None:
        """Send the call upstream now (no wait); its answer to come, or None: the splice cannot queue it at once
        (the fast path or the SDK's takes it).

        ``meta``: a 2026-era host's ``_meta`` (its envelope), whose client capabilities are declared upstream
        (issue 30). ``asker``: a handshake-era call's way to its host, for its upstream's questions (``adopt``).
        ``carrier``: a handshake-era call's trace context (``_meta``'s ``traceparent``…): with telemetry off, sent
        upstream as it came; on, the parent of the call's SERVER span (``telemetry.spans.SplicedTrace``), whose
        CLIENT span's context goes upstream instead.
        ``progress_token``: the host's (None: it asked for none); ours goes upstream (``stages.spliced_meta``).
        """
        upstream = actor.ready_upstream
        splice = upstream.splice if upstream is not None else None
        if splice is None or not splice.ready or not (splice.modern or self.handshake):
            return None
        connection = asker.connection if asker is not None and splice.modern else None  # between eras
        host_version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if asker is not None:
            host_version = asker.connection.protocol_version
        call = self.start(
            (tool, actor), host_id, arguments, host_meta=meta if isinstance(meta, dict) else None,
            connection=connection, host_version=host_version, carrier=carrier, progress_token=progress_token,
            front="http",
        )  # fmt: skip
        if call is None:
            return None
        answer = self._waiting[call] = HttpAnswer(call, self, asker=asker)  # no await since the send: not answered yet
        return answer

    def abandon(self, answer: HttpAnswer) -> None:
        """The call ends unanswered (a 2026 host hung up, its POST was cancelled): abandon it upstream."""
        call = answer.call
        if self._waiting.pop(call, None) is not None:
            if call.upstream is not None:
                call.upstream.abandon(call, "the host cancelled the request")
            self._finish(answer, "cancelled")

    def forsake(self, answer: HttpAnswer) -> None:
        """A handshake-era host hung up: the call goes on (the era's rule: no cancel), its answer goes nowhere."""
        answer.stream = None
        if answer.asker is not None:
            answer.asker.close()  # its questions have nowhere to go either

    def cancel(self, answer: HttpAnswer) -> bool:
        """A handshake-era host cancelled the call: abandon it upstream, answer it ``REQUEST_CANCELLED`` (the SDK's).

        False: it was answered already.
        """
        call = answer.call
        if self._waiting.get(call) is not answer:
            return False
        if call.upstream is not None:
            call.upstream.abandon(call, "the host cancelled the request")
        self._rounds.cancel(call)  # its input rounds, if any (and their upstream request), end with it
        error = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}
        self._settle(call, "cancelled", to_json({"jsonrpc": "2.0", "id": call.host_id, "error": error}), 200)
        return True

    def version_of(self, call: SplicedCall) -> str:
        """``host.pipeline.rounds.RoundsHost``: the version ``call``'s session negotiated."""
        answer = self._waiting.get(call)
        return answer.asker.connection.protocol_version if answer is not None and answer.asker is not None else ""

    async def write_answer(self, call: SplicedCall, outcome: CallOutcome, line: bytes) -> None:
        """``host.pipeline.rounds.RoundsHost``: the end of ``call``'s input rounds, as its POST's body."""
        self._settle(call, outcome, line.rstrip(b"\n"), 200)

    # -- calls.splice.SpliceHost --------------------------------------------------------

    def batched(self, direct: DirectWrite) -> None:
        direct.flush()  # one POST is one request: written now, not at the end of a host chunk

    def flush(self) -> None:
        """Nothing is batched on this side: each answer is its own POST's body."""

    async def answer(self, call: SplicedCall, outcome: CallOutcome, message: dict[str, Any]) -> None:
        result = message.get("result")
        if call.log_level is not None and result is not None and result.get("resultType") == "input_required":
            waiting = self._waiting.get(call)
            if waiting is not None and waiting.stream is not None:  # its host is there to be asked
                self._rounds.start(call, result)  # a handshake-era host cannot take it: its rounds run here
                return
        code = message["error"].get("code") if "error" in message else None
        status = 200
        if isinstance(code, int) and not self.handshake:  # a handshake-era session's errors are 200s
            status = ERROR_CODE_HTTP_STATUS.get(code, 200)
        self._settle(call, outcome, to_json(message), status)

    async def answer_line(self, call: SplicedCall, outcome: CallOutcome, line: bytes) -> None:
        self._settle(call, outcome, line.rstrip(b"\n"), 200)  # a large result, framed as a line

    def answer_now(self, call: SplicedCall, outcome: CallOutcome, pieces: Pieces) -> bool:
        return False  # a large answer comes joined through ``answer_line``: the POST's body is one buffer anyway

    async def fail(self, call: SplicedCall, outcome: CallOutcome, kind: str, text: str) -> None:
        call.failure = (kind, text)
        result = self.restamp(error_content(text))
        await self.answer(call, outcome, {"jsonrpc": "2.0", "id": call.host_id, "result": result})

    async def notice(self, call: SplicedCall, params: dict[str, Any]) -> bool:
        """A 2026-era upstream's log message of a handshake-era session's call (the only call in flight there),
        on the call's own response; False: not its (a 2026-era host's calls here named no level)."""
        answer = self._waiting.get(call)
        if answer is None or call.log_level is None or self.front.calls.in_flight(call.tool.owner) != 1:
            return False
        line = log_notice_line(call, params)
        if line is None:
            return False
        if line and answer.stream is not None:  # b"": below the level the host set; no stream: it hung up
            await answer.stream.event_line(line)
        return True

    async def progress(self, call: SplicedCall, params: dict[str, Any]) -> None:
        """An upstream's progress notice of ``call``, an event of its POST's response (the host's token back)."""
        answer = self._waiting.get(call)
        if answer is not None and answer.stream is not None:
            notice = {"jsonrpc": "2.0", "method": "notifications/progress"}
            line = frame({**notice, "params": {**params, "progressToken": call.progress_token}})
            await answer.stream.event_line(line)

    def adopt(self, call: SplicedCall) -> HostCall | None:
        """A handshake-era upstream's request mid-call: asked on the call's own response; None: it cannot be."""
        answer = self._waiting.get(call)
        return answer.asker.host_call(call) if answer is not None and answer.asker is not None else None

    def _settle(self, call: SplicedCall, outcome: CallOutcome, body: bytes, status: int) -> None:
        answer = self._waiting.pop(call, None)
        if answer is None:
            return  # the host hung up meanwhile: JSON-RPC wants no answer
        if answer.stream is not None:
            answer.stream.answer_now(body, status)  # in this task, now: the POST's task is not woken for it
        self._finish(answer, outcome)

    def _finish(self, answer: HttpAnswer, outcome: CallOutcome) -> None:
        call = answer.call
        if call.counted:
            self.front.calls.unspliced(call.tool.owner, call)
        if answer.asker is not None:
            answer.asker.close()  # a question still waiting for the host fails: the call is over
        if answer.on_settled is not None:
            answer.on_settled()
        settle(self.front, call.tool, outcome, call.started, failure=call.failure, trace=call.trace)
