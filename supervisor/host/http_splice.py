"""The wire splice's HTTP half: an HTTP front's plain 2026 ``tools/call`` to a 2026-era stdio upstream (issue 29).

``host.http_fast_calls`` answers a plain call of a 2026-era host itself; when
``host.call_paths`` says ``"splice"`` for it (its ``_meta`` the envelope only,
a 2026-era stdio upstream whose splice is ready), the call skips the SDK's
client as well: ``HttpSplice.submit`` hands it to the generation's splice
(``upstream.splice.UpstreamSplice``), which writes the request line with our id
and envelope and recognises the answer in the upstream's stdout pump, before
anything parses it as a message; the answer is handed here and becomes the
POST's body as it is (a large one too). What the call keeps, with the texts of
the general path (the splice's own list, ``host.splice``):

* ``tool_timeout_sec`` (the splice's deadline task), with its courtesy
  ``notifications/cancelled`` upstream;
* the host hanging up (the POST's ``http.disconnect``) abandons the call
  upstream, with the same courtesy cancel, and answers nothing;
* a dead transport answers with ``UpstreamUnavailable``'s text, an invalid
  result with ``UpstreamProtocolError``'s; a JSON-RPC error passes through
  with the SDK's HTTP status for its code, -32602 first triggering the
  unknown-tool heal (I8);
* metrics and the rate-limited failure warning (``Front.note_call``);
* the result stamped with our ``serverInfo`` (``host.fast_path.restamp``).

Which calls never come here, and why: a handshake-era upstream may ask its host
something mid-call (the SDK path's exchanges carry that), a log level or a
progress token asks for notices on the call's own stream (the fast path
carries those), and trace context wants spans (telemetry on: the SDK path).

Concurrency: ``submit``, ``abandon`` and the answer's hand-over are
synchronous. The POST's task is the only one of its call on this side: it
waits in a read for the host's hang-up (``host.http_fast_calls``), and the
upstream's stdout pump, its deadline task or its transport's watcher hands the
answer over by cancelling that read (``_settle``: no await between taking the
call out of the table, filling the answer and cancelling). A call is answered
once: by whichever of the answer, the timeout, the transport's loss or the
host's hang-up takes it out of ``_waiting`` first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types import CLIENT_CAPABILITIES_META_KEY

from supervisor.calls.splice import SplicedCall
from supervisor.host.fast_path import restamp
from supervisor.wire.codec import to_json

if TYPE_CHECKING:
    from supervisor.calls.attribution import HostCall
    from supervisor.calls.results import CallOutcome
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.host.front import Front
    from supervisor.server_actor import ServerActor
    from supervisor.wire.large import Pieces
    from supervisor.wire.pipes import DirectWrite


@dataclass(slots=True, eq=False)
class HttpAnswer:
    """A spliced call's answer as its POST writes it: one JSON-RPC message, and the HTTP status for it.

    The POST's task waits for it in a read for the host's hang-up (``waiter``), which the answer cancels.
    """

    call: SplicedCall
    body: bytes = b""
    status: int = 200
    ready: bool = False
    waiter: trio.CancelScope | None = None


class HttpSplice:
    """One view's HTTP front end of the splice (``calls.splice.SpliceHost``): its calls in flight, each to its POST."""

    def __init__(self, front: Front) -> None:
        self._front = front
        self._waiting: dict[SplicedCall, HttpAnswer] = {}
        self._stamp: dict[str, Any] | None = None

    def submit(
        self, host_id: str | int, tool: RegisteredTool, actor: ServerActor, arguments: dict[str, Any] | None, meta: Any
    ) -> HttpAnswer | None:
        """Send the call upstream now (no wait); its answer to come, or None: the splice cannot queue it at once
        (the fast path takes it).

        ``meta``: the host's ``_meta`` (its envelope), whose client capabilities are declared upstream (issue 30).
        """
        upstream = actor.ready_upstream
        splice = upstream.splice if upstream is not None else None
        if splice is None or not splice.ready or not splice.modern:
            return None
        now = trio.current_time()
        call = SplicedCall(host_id, splice.new_id(), tool, actor, now, now + splice.timeout_sec, self, upstream=splice)
        answer = self._waiting[call] = HttpAnswer(call)
        capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
        if not splice.submit(call, tool.raw_name, tool.upstream_arguments(arguments), capabilities=capabilities):
            del self._waiting[call]
            return None
        return answer

    def abandon(self, answer: HttpAnswer) -> None:
        """The host hung up (or its POST was cancelled) before the answer: abandon the call upstream, answer never."""
        call = answer.call
        if self._waiting.pop(call, None) is not None:
            if call.upstream is not None:
                call.upstream.abandon(call, "the host cancelled the request")
            self._finish(call, "cancelled")

    # -- calls.splice.SpliceHost --------------------------------------------------------

    def batched(self, direct: DirectWrite) -> None:
        direct.flush()  # one POST is one request: written now, not at the end of a host chunk

    def flush(self) -> None:
        """Nothing is batched on this side: each answer is its own POST's body."""

    def restamp(self, result: dict[str, Any]) -> dict[str, Any]:
        if self._stamp is None:
            self._stamp = self._front.server.server_info_stamp
        return restamp(result, self._stamp)  # edited in place: the result is encoded at once and dropped

    async def answer(self, call: SplicedCall, outcome: CallOutcome, message: dict[str, Any]) -> None:
        code = message["error"].get("code") if "error" in message else None
        status = ERROR_CODE_HTTP_STATUS.get(code, 200) if isinstance(code, int) else 200
        self._settle(call, outcome, to_json(message), status)

    async def answer_line(self, call: SplicedCall, outcome: CallOutcome, line: bytes) -> None:
        self._settle(call, outcome, line.rstrip(b"\n"), 200)  # a large result, framed as a line

    def answer_now(self, call: SplicedCall, outcome: CallOutcome, pieces: Pieces) -> bool:
        return False  # a large answer comes joined through ``answer_line``: the POST's body is one buffer anyway

    async def fail(self, call: SplicedCall, outcome: CallOutcome, kind: str, text: str) -> None:
        if call in self._waiting:
            self._front.note_call_failure(call.tool, kind, text)
        result = self.restamp({"content": [{"type": "text", "text": text}], "isError": True})
        await self.answer(call, outcome, {"jsonrpc": "2.0", "id": call.host_id, "result": result})

    async def notice(self, call: SplicedCall, params: dict[str, Any]) -> bool:
        return False  # no call here named a log level: an upstream's log message is the session's

    def adopt(self, call: SplicedCall) -> HostCall | None:
        return None  # a 2026-era upstream asks nothing mid-call (it answers with an input round instead)

    def _settle(self, call: SplicedCall, outcome: CallOutcome, body: bytes, status: int) -> None:
        answer = self._waiting.pop(call, None)
        if answer is None:
            return  # the host hung up meanwhile: JSON-RPC wants no answer
        answer.body, answer.status, answer.ready = body, status, True
        if answer.waiter is not None:
            answer.waiter.cancel()  # the POST's read for a hang-up: it writes the answer now
        self._finish(call, outcome)

    def _finish(self, call: SplicedCall, outcome: CallOutcome) -> None:
        self._front.note_call(call.tool, outcome, trio.current_time() - call.started)
