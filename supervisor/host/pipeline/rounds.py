"""Input rounds and log messages of spliced calls between eras (DESIGN I13, issue 29).

Two mixes of eras cross the wire splice (``host.stdio.reader``) with more than bytes
to forward, and what they need is here.

**A 2026-era host, a handshake-era upstream: promotion.**

A 2026-era host's plain ``tools/call`` to a handshake-era stdio server crosses
the wire splice (``host.stdio.reader``). Mid-call, such a server may send a
server→client request (sampling, elicitation, roots) and wait for its answer;
a 2026-era host cannot take requests, only input rounds. When the Relay
attributes such a request to a spliced call (the only call in flight on that
server, ``calls.attribution``), the call is *promoted*:

* it becomes a ``HostCall`` with an ``Exchange`` (``host.pipeline.exchanges``), whose
  upstream request is this module's ``Promotion.wait``: the spliced request,
  still pending on the upstream's stdin/stdout, is not sent again;
* the host's original request is answered with the exchange's first round
  (an ``InputRequiredResult`` carrying the question and our request state),
  written on the splice by ``HostSplice.answer_round``;
* the host's retry carries that state, so it takes the SDK path and resumes the
  exchange, exactly as for a call that started there;
* the upstream's answer, timeout or loss reaches the exchange through
  ``Promotion.settle``/``settle_failure`` instead of the host wire.

Cancellation: a host that abandons a round cancels the exchange (its scope),
which cancels ``wait``, which abandons the upstream request with a courtesy
cancel. ``tool_timeout_sec`` still bounds the upstream request: the splice's
deadline task fails it, into the exchange.

**A handshake-era host, a 2026-era upstream: rounds and log messages.**
The request names the host's log level (the one it set, else ``debug``, as
``HostCall.log_level``), so the upstream sends the call's log messages; the
upstream's stdout pump hands them to ``HostSplice.notice`` in wire order
(``log_notice_line``) while the call is the only one in flight there. An
``input_required`` answer cannot go to such a host: ``finish_rounds`` runs the
rounds in a task of the Front's exchange table, asking the host on its
connection and retrying upstream on the SDK path, within the call's own
deadline, and the host gets the end as its answer; a host's cancel ends them.

Concurrency: ``settle`` and ``settle_failure`` run synchronously in the
upstream's stdout pump (or the deadline task, or the transport's watcher);
``wait`` in the exchange's task. One ``trio.Event`` hands the outcome over.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

import mcp_types as types
import outcome
import trio
from mcp import MCPError
from mcp_types import INTERNAL_ERROR
from pydantic import ValidationError

from supervisor.calls.attribution import CallTracker, HostCall, level_admits, named_for
from supervisor.calls.results import CallOutcome, sieved
from supervisor.errors import UpstreamError, UpstreamProtocolError, UpstreamTimeout, UpstreamUnavailable
from supervisor.wire.codec import frame

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mcp.server.connection import Connection

    from supervisor.calls.splice import SplicedCall
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.host.pipeline.exchanges import Exchange, ExchangeTable

_FAILURES: Final[dict[str, type[UpstreamError]]] = {
    "UpstreamTimeout": UpstreamTimeout,
    "UpstreamProtocolError": UpstreamProtocolError,
    "UpstreamUnavailable": UpstreamUnavailable,
}
"""The splice's failure kinds (``SpliceHost.fail``) as the general path's errors, so the retry round reads the same."""


class Promotion:
    """The upstream outcome of one promoted spliced call, handed from the splice to its exchange."""

    def __init__(self, call: SplicedCall, on_end: Callable[[], None]) -> None:
        self.call = call
        self.exchange: Exchange | None = None
        """Set once the exchange is started (``HostSplice``): a host that cancels its original request ends it."""
        self._on_end: Callable[[], None] | None = on_end
        self._done = trio.Event()
        self._outcome: outcome.Outcome[Any] | None = None

    def settle(self, message: dict[str, Any]) -> None:
        """The upstream answered ``message`` (checked by the splice: an error, or a result shaped like one)."""
        error = message.get("error")
        if isinstance(error, dict):
            self._set(outcome.Error(MCPError(error["code"], error["message"], error.get("data"))))
        else:
            self._set(outcome.Value(message["result"]))

    def settle_failure(self, kind: str, text: str) -> None:
        """The upstream request failed (``kind`` names the ``UpstreamError``), with the general path's ``text``."""
        self._set(outcome.Error(_FAILURES.get(kind, UpstreamUnavailable)(self.call.tool.owner, text)))

    def _set(self, result: outcome.Outcome[Any]) -> None:
        if self._outcome is None:
            self._outcome = result
            self._done.set()
            self._ended()

    def _ended(self) -> None:
        on_end = self._on_end
        if on_end is not None:
            self._on_end = None
            on_end()

    async def wait(self) -> Any:
        """The exchange's upstream request: the spliced call's result (raises what it failed with)."""
        try:
            await self._done.wait()
        except trio.Cancelled:
            # The host abandoned a round (or the sidecar stops): so do we, upstream.
            upstream = self.call.upstream
            if self._outcome is None:
                if upstream is not None:
                    upstream.abandon(self.call, "the host cancelled the request")
                self._ended()
            raise
        assert self._outcome is not None
        return self._outcome.unwrap()


def first_round_answer(
    host_id: str | int,
    result: outcome.Outcome[Any],
    restamp: Callable[[dict[str, Any]], dict[str, Any]],
    version: str,
) -> tuple[CallOutcome, dict[str, Any], UpstreamError | None]:
    """The answer to a promoted call's original request, from its exchange's first round.

    Usually an ``InputRequiredResult``; else the call's own end: its result, a
    server's JSON-RPC error, or an ``UpstreamError`` as the general path's error
    result (returned too, for the failure warning).
    """
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": host_id}
    try:
        value = result.unwrap()
    except (MCPError, UpstreamError) as exc:
        return _failed(message, exc, restamp)
    except Exception as exc:  # nothing else is raised on purpose; the host still gets an answer
        logger.exception("a promoted spliced call's first round failed")
        message["error"] = {"code": INTERNAL_ERROR, "message": f"internal error: {exc!r}"}
        return "rpc_error", message, None
    if isinstance(value, types.InputRequiredResult):
        message["result"] = restamp(sieved("tools/call", version, value))  # the host's ``version``'s shape
        return "ok", message, None
    message["result"] = restamp(value)
    return ("tool_error" if value.get("isError") is True else "ok"), message, None


def _failed(
    message: dict[str, Any], exc: MCPError | UpstreamError, shaped: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[CallOutcome, dict[str, Any], UpstreamError | None]:
    """The answer to a spliced call that failed: a server's JSON-RPC error as it came, an ``UpstreamError`` as the
    general path's error result (returned too, for the failure warning)."""
    if isinstance(exc, MCPError):
        message["error"] = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
        return "rpc_error", message, None
    message["result"] = shaped({"content": [{"type": "text", "text": str(exc)}], "isError": True})
    return ("timeout" if isinstance(exc, UpstreamTimeout) else "unavailable"), message, exc


def log_notice_line(call: SplicedCall, params: dict[str, Any]) -> bytes | None:
    """The framed notice of an upstream's log message for ``call``'s host; b"" if below its level; None if invalid."""
    try:
        log = types.LoggingMessageNotificationParams.model_validate(params)
    except ValidationError:
        return None
    if call.log_level is None or not level_admits(call.log_level, log.level):
        return b""
    wire = named_for(call.tool.owner, log).model_dump(by_alias=True, mode="json", exclude_none=True)
    return frame({"jsonrpc": "2.0", "method": "notifications/message", "params": wire})


async def finish_rounds(
    call: SplicedCall,
    host_call: HostCall | None,
    first: dict[str, Any],
    *,
    scope: trio.CancelScope,
    tracker: CallTracker,
    shaped: Callable[[dict[str, Any]], dict[str, Any]],
    version: str,
) -> tuple[CallOutcome, dict[str, Any], UpstreamError | None] | None:
    """Run a spliced call's input rounds to its end; the answer for its host, or None if the host cancelled.

    Returns the outcome, the answer, and the ``UpstreamError`` it carries (for the failure warning).
    """
    server, name = call.tool.owner, call.tool.raw_name
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": call.host_id}
    if host_call is None:  # the host left before its rounds began
        return None
    arguments = call.arguments if call.arguments_text is None else json.loads(bytes(call.arguments_text))
    result: types.CallToolResult | None = None
    try:
        with scope, tracker.serving(host_call):
            result = await call.actor.finish_input_rounds(name, arguments, first, host_call)
    except (MCPError, UpstreamError) as exc:
        return _failed(message, exc, shaped)
    if result is None:
        if trio.current_time() < call.deadline:
            return None  # cancelled by the host
        text = (
            f"server {server!r}: tool {name!r} did not answer within "
            f"{call.deadline - call.started:g}s (tool_timeout_sec); the request was abandoned"
        )
        timeout = UpstreamTimeout(server, text)
        message["result"] = shaped({"content": [{"type": "text", "text": text}], "isError": True})
        return "timeout", message, timeout
    message["result"] = shaped(sieved("tools/call", version, result))
    return ("tool_error" if result.is_error else "ok"), message, None


_CAPABILITIES_STATE: Final = "mcp-supervisor/declared-capabilities"


def declared_capabilities(connection: Connection) -> dict[str, Any]:
    """What a handshake-era host declared at ``initialize``, as a 2026 envelope declares it (kept on the connection)."""
    dumped = connection.state.get(_CAPABILITIES_STATE)
    if dumped is None:
        declared = connection.client_capabilities
        dumped = {} if declared is None else declared.model_dump(by_alias=True, mode="json", exclude_none=True)
        connection.state[_CAPABILITIES_STATE] = dumped
    return dumped


class RoundsHost(Protocol):
    """What the rounds need of the splice's host half (``HostSplice``, ``HttpSplice``)."""

    def version_of(self, call: SplicedCall) -> str:
        """The handshake version ``call``'s host negotiated (its result's shape)."""
        ...

    def restamp(self, result: dict[str, Any]) -> dict[str, Any]: ...

    def flush(self) -> None: ...

    async def write_answer(self, call: SplicedCall, outcome: CallOutcome, line: bytes) -> None: ...


class RoundsFront(Protocol):
    """What the rounds need of the Front (``host.front.Front``)."""

    @property
    def calls(self) -> CallTracker: ...

    @property
    def exchanges(self) -> ExchangeTable: ...

    def note_call_failure(self, tool: RegisteredTool, kind: str, text: str) -> None: ...


class HandshakeRounds:
    """The input rounds of a handshake-era host's spliced calls to 2026-era upstreams, each in its own task.

    ``start`` runs in the upstream's stdout pump (synchronous); each call's
    rounds run in a task of the Front's exchange table, under a cancel scope
    whose deadline is the call's own (``tool_timeout_sec``).
    """

    def __init__(self, host: RoundsHost, front: RoundsFront) -> None:
        self._host = host
        self._front = front
        self._scopes: dict[SplicedCall, trio.CancelScope] = {}

    def start(self, call: SplicedCall, first: dict[str, Any]) -> None:
        """``call``'s upstream answered ``first``, an input round: run the rounds, then answer the host."""
        scope = trio.CancelScope(deadline=call.deadline)
        self._scopes[call] = scope
        self._front.exchanges.start_soon(self._run, call, first, scope)

    def cancel(self, call: SplicedCall) -> None:
        """The host cancelled ``call``: its rounds (and their upstream request) end, unanswered."""
        if self._scopes and (scope := self._scopes.get(call)) is not None:
            scope.cancel()

    async def _run(self, call: SplicedCall, first: dict[str, Any], scope: trio.CancelScope) -> None:
        host_call = call.adopt()
        if call.counted:  # from now on this task serves it (counted in flight by ``serving``)
            self._front.calls.unspliced(call.tool.owner, call)
            call.counted = False
        try:
            answer = await finish_rounds(
                call, host_call, first, scope=scope, tracker=self._front.calls, shaped=self._host.restamp,
                version=self._host.version_of(call),
            )  # fmt: skip
        finally:
            del self._scopes[call]
        if answer is None:
            return  # the host cancelled the request: no answer is owed
        outcome, message, failure = answer
        if failure is not None:
            call.failure = (type(failure).__name__, str(failure))  # warned of as it settles (``host.pipeline.stages``)
        await self._host.write_answer(call, outcome, frame(message))
        self._host.flush()  # a task of the exchange table is not a pump: nobody else flushes for it
