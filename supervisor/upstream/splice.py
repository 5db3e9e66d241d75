"""The stdio wire splice's upstream half: a spliced ``tools/call`` out to a stdio upstream, its answer back (issue 11).

``UpstreamSplice`` belongs to one stdio generation (``upstream.stdio`` creates
it, ``upstream.session.Upstream.splice`` exposes it). It writes a call's request
line with our id and our client's envelope, recognises the answer by that id in
the generation's stdout pump (``claim``) before anything parses it as a
message, and hands it to the host half that sent the call
(``calls.splice.SpliceHost``). The host half and the splice as a whole are
described in ``supervisor.host.stdio.reader``.

Concurrency: ``submit`` runs synchronously in the host wire's reader task;
``claim`` and ``deliver`` in the upstream's stdout pump; ``serve_deadlines`` is
one task in the upstream transport's nursery, the only one that waits on the
deadline queue. Tables are changed only in synchronous code.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Final

import anyio
import trio
from mcp import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY

from supervisor.calls.results import CallOutcome, wire_result_shaped
from supervisor.calls.splice import ID_PREFIX, LINGER_FROM_CALLS, LINGER_SEC, SplicedCall, SpliceHost
from supervisor.wire import large as wire_large
from supervisor.wire.codec import Spans, frame, load, to_json
from supervisor.wire.large import encode_ascii
from supervisor.wire.pipes import DirectWrite

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

logger = logging.getLogger(__name__)

_ID_MARK: Final = ID_PREFIX.encode()
_EDITED: Final = ("_meta", "resultType")
"""The result members the host half may edit (``SpliceHost.restamp``): replaced, added or left out."""
MAX_HOST_TAILS: Final = 16
"""Distinct host capability sets whose request-line ends are kept (one stdio host: one)."""


def _notice_params(line: bytes, method: str) -> dict[str, Any] | None:
    """The params of ``line`` if it is a ``method`` notification with params; None otherwise."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != method or "id" in message:
        return None
    params = message.get("params")
    return params if isinstance(params, dict) else None


class UpstreamSplice:
    """One stdio upstream generation's end of the splice: request lines out, their answers in.

    Args:
        server: The server's name (for error texts).
        timeout_sec: ``tool_timeout_sec`` of the server.
    """

    def __init__(self, server: str, timeout_sec: float) -> None:
        self.server = server
        self.timeout_sec = timeout_sec
        self._stdin: MemoryObjectSendStream[Any] | None = None
        self._envelope: dict[str, Any] | None = None
        self._envelope_tail = b""
        """``,"_meta":<envelope>}}`` and the line's end: the part of every small request line that never changes."""
        self._pending: dict[str, SplicedCall] = {}
        self._order: deque[SplicedCall] = deque()
        self._wake = trio.Event()
        self._ids = itertools.count(1)
        self._tails: dict[str, bytes] = {}
        """Request-line ends per host capabilities (``_tail_for``)."""
        self._last_tail: tuple[Any, bytes] | None = None
        """The last capabilities ``_tail_for`` was asked for, and their tail (one host: the same ones each call)."""
        self._lost = False
        self.modern = True
        """Whether the generation speaks 2026-07-28 (its requests carry our envelope); False: the handshake era."""
        self.direct = DirectWrite()

    def attach(self, stdin: MemoryObjectSendStream[Any], fd: int | None) -> None:
        """The transport's (buffered) stdin queue, which also takes pre-encoded lines, and the pipe it drains into."""
        self._stdin = stdin
        if fd is not None:
            self.direct.bind(fd, stdin)

    def set_envelope(self, envelope: dict[str, Any]) -> None:
        """Our client's 2026 ``_meta`` envelope for this generation (what the SDK's stamp puts on requests)."""
        self._envelope = envelope
        self._envelope_tail = b',"_meta":' + encode_ascii(envelope).encode() + b"}}\n"

    def set_handshake(self) -> None:
        """The generation speaks a handshake era: its requests carry no envelope (the session was initialized)."""
        self.modern = False
        self._envelope = {}
        self._envelope_tail = b"}}\n"

    @property
    def envelope(self) -> dict[str, Any]:
        """Our client's 2026 ``_meta`` envelope for this generation (empty until ``set_envelope``)."""
        return self._envelope or {}

    def envelope_for(self, capabilities: Any) -> dict[str, Any]:
        """Our envelope, declaring the calling host's client ``capabilities`` instead of ours (issue 30)."""
        envelope = self.envelope
        if not self.modern or capabilities is None or envelope.get(CLIENT_CAPABILITIES_META_KEY) == capabilities:
            return envelope
        return {**envelope, CLIENT_CAPABILITIES_META_KEY: capabilities}

    def _tail_for(self, capabilities: Any) -> bytes:
        """The end of a request line (``,"_meta":…}}``) declaring ``capabilities``; kept per distinct set.

        The last set asked for is compared first (a dict equality, not a sorted encoding per call).
        """
        if not self.modern or capabilities is None or self.envelope.get(CLIENT_CAPABILITIES_META_KEY) == capabilities:
            return self._envelope_tail
        last = self._last_tail
        if last is not None and last[0] == capabilities:
            return last[1]
        key = json.dumps(capabilities, sort_keys=True)
        tail = self._tails.get(key)
        if tail is None:
            if len(self._tails) >= MAX_HOST_TAILS:  # a few hosts, not a stream of new ones: bounded anyway
                self._tails.clear()
            tail = self._tails[key] = b',"_meta":' + encode_ascii(self.envelope_for(capabilities)).encode() + b"}}\n"
        self._last_tail = (capabilities, tail)
        return tail

    def _tail_with(self, capabilities: Any, extra: dict[str, Any]) -> bytes:
        """``_tail_for``'s line end with ``extra``'s keys in ``_meta`` too: spliced into the kept envelope's bytes.

        Only the extra keys are encoded per call. The same bytes as the merged dict's encoding, which a key of
        our envelope in ``extra`` (never seen) would still get.
        """
        envelope = self.envelope_for(capabilities)
        if not envelope:  # a handshake-era generation: the extra keys are all of ``_meta``
            return b',"_meta":' + encode_ascii(extra).encode() + b"}}\n"
        if envelope.keys() & extra.keys():
            return b',"_meta":' + encode_ascii({**envelope, **extra}).encode() + b"}}\n"
        tail = self._tail_for(capabilities)  # ,"_meta":{…}}}\n
        return b"".join((tail[:-4], b",", encode_ascii(extra).encode()[1:-1], tail[-4:]))

    @property
    def ready(self) -> bool:
        return self._stdin is not None and self._envelope is not None and not self._lost

    def submit(
        self,
        call: SplicedCall,
        raw_name: str,
        arguments: dict[str, Any] | None,
        arguments_text: memoryview | None = None,
        *,
        meta_extra: dict[str, Any] | None = None,
        capabilities: Any = None,
    ) -> bool:
        """Queue ``call``'s request without waiting; False (nothing sent) if it cannot be queued now.

        ``arguments_text``: the host's own bytes of ``arguments`` (a large request), copied as they are.
        ``meta_extra``: keys the request's ``_meta`` carries beside our envelope (trace context, a log level, a
        progress token: ``host.pipeline.stages.spliced_meta``).
        ``capabilities``: the host's client capabilities, declared upstream instead of ours.
        """
        if self._stdin is None or self._envelope is None or self._lost:
            return False
        if arguments_text is not None:  # large: its own path (_submit_large)
            envelope = {**self.envelope_for(capabilities), **(meta_extra or {})}
            pieces = wire_large.request_pieces(call.upstream_id, raw_name, arguments_text, envelope or None)
            return self._submit_large(call, pieces)
        else:  # the same message as frame() of the dict, assembled from texts (the id needs no escaping)
            line = b"".join((
                b'{"jsonrpc":"2.0","id":"', call.upstream_id.encode(), b'","method":"tools/call","params":{"name":',
                to_json(raw_name),
                b"" if arguments is None else b',"arguments":' + to_json(arguments),
                self._tail_for(capabilities) if not meta_extra else self._tail_with(capabilities, meta_extra),
            ))  # fmt: skip
        if self.direct.try_write(line):
            call.host.batched(self.direct)
        else:
            try:
                self._stdin.send_nowait(line)
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return False
        self._sent(call)
        return True

    def _submit_large(self, call: SplicedCall, pieces: wire_large.Pieces) -> bool:
        """``submit`` of a large request: written at once, without a join, while the stdin writer is idle."""
        assert self._stdin is not None
        if not self.direct.write_pieces(pieces):
            try:
                self._stdin.send_nowait(wire_large.join(pieces))
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return False
        self._sent(call)
        return True

    def _sent(self, call: SplicedCall) -> None:
        """``call``'s request is on its way: await its answer, and its deadline."""
        self._pending[call.upstream_id] = call
        self._order.append(call)
        self._wake.set()

    def linger_sec(self) -> float:
        """How long the upstream's stdout pump waits before its next read (``LINGER_SEC`` under load, else 0)."""
        return LINGER_SEC if len(self._pending) >= LINGER_FROM_CALLS else 0.0

    def new_id(self) -> str:
        return f"{ID_PREFIX}{next(self._ids)}"

    @property
    def expecting(self) -> bool:
        return bool(self._pending)

    def claim(self, line: bytes) -> tuple[SplicedCall, dict[str, Any], Spans | None] | None:
        """The spliced call ``line`` answers, the answer, and (large line) its result's spans; None if not ours."""
        if _ID_MARK not in line:
            return None
        try:
            message, spans = load(line, "result")
        except ValueError:
            return None
        if not isinstance(message, dict) or "method" in message:
            return None
        request_id = message.get("id")
        call = self._pending.pop(request_id, None) if isinstance(request_id, str) else None
        if call is None:
            return None
        call.done = True
        self._drop_settled()
        return call, message, spans

    async def deliver_notice(self, line: bytes) -> SpliceHost | None:
        """Forward a log message of the one call in flight to its host, if it asked for them; None: not ours.

        Written by the stdout pump in wire order, so the host has it before the
        call's answer (a 2026-era upstream sends them only to a call whose request
        named a level: a handshake-era host's, ``HostSplice``). Anything else, or
        with more calls in flight, goes to the session as before.
        """
        if len(self._pending) != 1:
            return None
        call = next(iter(self._pending.values()))
        if call.log_level is None:
            return None
        params = _notice_params(line, "notifications/message")
        if params is None or not await call.host.notice(call, params):
            return None
        return call.host

    async def deliver_progress(self, line: bytes) -> SpliceHost | None:
        """Forward a progress notice of a spliced call to its host; None: not a spliced call's.

        Its token is the call's request id of ours (``host.pipeline.stages.spliced_meta``), so
        it is attributed exactly, however many calls are in flight; the host half
        puts the host's own token back. Written by the stdout pump in wire order,
        so the host has it before the call's answer.
        """
        params = _notice_params(line, "notifications/progress") if _ID_MARK in line else None
        token = params.get("progressToken") if params is not None else None
        call = self._pending.get(token) if isinstance(token, str) else None
        if params is None or call is None or call.progress_token is None:
            return None
        await call.host.progress(call, params)
        return call.host

    def _drop_settled(self) -> None:
        """Forget the settled calls at the head of the deadline queue.

        Answers mostly come in order, so this keeps the queue as long as the
        calls in flight; otherwise it would hold every call made within one
        ``tool_timeout_sec`` (90,000 at 1,500 calls/s and 60 s) until the deadline
        task wakes for the oldest. That task re-reads the head after each wait.
        """
        order = self._order
        while order and order[0].done:
            order.popleft()

    def abandon(self, call: SplicedCall, reason: str) -> None:
        """Stop waiting for ``call`` and tell the upstream (a courtesy cancel; dropped if it cannot be queued)."""
        call.done = True
        if self._pending.pop(call.upstream_id, None) is None or self._stdin is None:
            return
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
        line = frame({**notice, "params": {"requestId": call.upstream_id, "reason": reason}})
        try:
            self._stdin.send_nowait(line)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("server=%s courtesy cancel for %s dropped", self.server, call.upstream_id)

    def courtesy_cancels(self, reason: str) -> bytes:
        """``notifications/cancelled`` lines for every call still in flight, for a transport about to close.

        The transport writes them to the server's stdin itself, before it closes it
        (its stdin pump may be cancelled by then); the calls stay pending until
        ``fail_all`` answers them.
        """
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
        return b"".join(
            frame({**notice, "params": {"requestId": upstream_id, "reason": reason}}) for upstream_id in self._pending
        )

    async def serve_deadlines(self) -> None:
        """Time out spliced calls past ``tool_timeout_sec``, oldest first, until cancelled."""
        while True:
            while not self._order:
                await self._wake.wait()
                self._wake = trio.Event()
            call = self._order[0]
            if call.done:
                self._order.popleft()
                continue
            if trio.current_time() < call.deadline:
                await trio.sleep_until(call.deadline)
                continue
            self._order.popleft()
            self.abandon(call, "tool_timeout_sec elapsed")
            text = (
                f"server {self.server!r}: tool {call.tool.raw_name!r} did not answer within "
                f"{self.timeout_sec:g}s (tool_timeout_sec); the request was abandoned"
            )
            await call.host.fail(call, "timeout", "UpstreamTimeout", text)

    async def fail_all(self, reason: str) -> None:
        """The transport is gone: answer every spliced call as the general path would, then refuse new ones."""
        self._lost = True
        self.direct.unbind()
        calls = list(self._pending.values())
        self._pending.clear()
        self._order.clear()
        cancelled: trio.Cancelled | None = None
        for call in calls:
            call.done = True
            text = f"server {self.server!r}: connection lost during tools/call {call.tool.raw_name}"
            try:
                await call.host.fail(call, "unavailable", "UpstreamUnavailable", text)
            except trio.Cancelled as exc:
                # The calls left the tables above: nobody else will answer them. Once cancelled, each
                # answer is still written (shielded, bounded: ``HostSplice.answer_line``); then re-raise.
                cancelled = exc
        if calls:
            logger.debug("server=%s %d spliced call(s) failed: %s", self.server, len(calls), reason)
        if cancelled is not None:
            raise cancelled

    async def deliver(self, call: SplicedCall, message: dict[str, Any], spans: Spans | None = None) -> None:
        """Answer the host with the upstream's answer ``message`` to ``call``."""
        error = message.get("error")
        if isinstance(error, dict):
            code, text = error.get("code"), error.get("message")
            if isinstance(code, int) and isinstance(text, str):
                if call.trace is not None:
                    call.trace.upstream_answered("rpc_error", code, text)
                call.actor.heal_unknown_tool(call.tool.raw_name, MCPError(code, text, error.get("data")))
                await call.host.answer(call, "rpc_error", {"jsonrpc": "2.0", "id": call.host_id, "error": error})
                return
        result = message.get("result")
        if not isinstance(result, dict) or not wire_result_shaped(result):
            if call.trace is not None:
                call.trace.upstream_answered("unavailable")
            text = f"server {self.server!r}: tools/call {call.tool.raw_name} returned an invalid result"
            await call.host.fail(call, "unavailable", "UpstreamProtocolError", text)
            return
        if spans is not None and result.get("resultType") == "input_required":
            result = json.loads(bytes(spans.text))["result"]  # an input round: read whole, like a small one
            spans = None
        outcome: CallOutcome = "tool_error" if result.get("isError") is True else "ok"
        if call.trace is not None:
            call.trace.upstream_answered(outcome, result=result)
        restamped = call.host.restamp(result)
        if spans is None:
            await call.host.answer(call, outcome, {"jsonrpc": "2.0", "id": call.host_id, "result": restamped})
            return
        edited: dict[str, Any] = {key: restamped[key] for key in _EDITED if key in restamped}
        omitted = frozenset(key for key in _EDITED if key in spans.inner and key not in restamped)
        pieces = wire_large.answer_pieces(call.host_id, spans.text, spans.inner, edited, omitted)
        if not call.host.answer_now(call, outcome, pieces):
            await call.host.answer_line(call, outcome, wire_large.join(pieces))
