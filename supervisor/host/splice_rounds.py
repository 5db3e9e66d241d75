"""A spliced call whose handshake-era upstream asks its 2026-era host something: an exchange from then on (DESIGN I13).

A 2026-era host's plain ``tools/call`` to a handshake-era stdio server crosses
the wire splice (``host.splice``). Mid-call, such a server may send a
server→client request (sampling, elicitation, roots) and wait for its answer;
a 2026-era host cannot take requests, only input rounds. When the Relay
attributes such a request to a spliced call (the only call in flight on that
server, ``calls.attribution``), the call is *promoted*:

* it becomes a ``HostCall`` with an ``Exchange`` (``host.exchanges``), whose
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

Concurrency: ``settle`` and ``settle_failure`` run synchronously in the
upstream's stdout pump (or the deadline task, or the transport's watcher);
``wait`` in the exchange's task. One ``trio.Event`` hands the outcome over.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import mcp_types as types
import outcome
import trio
from mcp import MCPError
from mcp_types import INTERNAL_ERROR

from supervisor.calls.results import CallOutcome
from supervisor.errors import UpstreamError, UpstreamProtocolError, UpstreamTimeout, UpstreamUnavailable

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from supervisor.calls.splice import SplicedCall
    from supervisor.host.exchanges import Exchange

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
    host_id: str | int, result: outcome.Outcome[Any], restamp: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[CallOutcome, dict[str, Any], UpstreamError | None]:
    """The answer to a promoted call's original request, from its exchange's first round.

    Usually an ``InputRequiredResult``; else the call's own end: its result, a
    server's JSON-RPC error, or an ``UpstreamError`` as the general path's error
    result (returned too, for the failure warning).
    """
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": host_id}
    try:
        value = result.unwrap()
    except MCPError as exc:
        message["error"] = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
        return "rpc_error", message, None
    except UpstreamError as exc:
        message["result"] = restamp({"content": [{"type": "text", "text": str(exc)}], "isError": True})
        return ("timeout" if isinstance(exc, UpstreamTimeout) else "unavailable"), message, exc
    except Exception as exc:  # nothing else is raised on purpose; the host still gets an answer
        logger.exception("a promoted spliced call's first round failed")
        message["error"] = {"code": INTERNAL_ERROR, "message": f"internal error: {exc!r}"}
        return "rpc_error", message, None
    if isinstance(value, types.InputRequiredResult):
        message["result"] = restamp(value.model_dump(by_alias=True, mode="json", exclude_none=True))
        return "ok", message, None
    message["result"] = restamp(value)
    return ("tool_error" if value.get("isError") is True else "ok"), message, None
