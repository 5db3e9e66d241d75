"""Input rounds for a 2026-era host whose upstream is handshake-era (DESIGN I13).

A handshake-era server asks for sampling, elicitation or roots with a
server→client request *while* it serves a call, and waits for the answer on
the same connection. A 2026-era host cannot take requests: it expects an
``InputRequiredResult`` (the input requests plus an opaque ``requestState``),
answers them, and retries the original request with ``inputResponses`` and
the same ``requestState``.

An ``Exchange`` bridges the two. The upstream request runs in the exchange's
own task (in the ``ExchangeTable``'s nursery), not in the host's handler, so
it survives the handler returning an ``InputRequiredResult``. Each upstream
request raised meanwhile parks on ``Exchange.ask`` until the host's retry
brings its answer; the handler of each host round waits (``next_round``) for
either the call's outcome or new questions, and hands the questions out under
a request state of our own (``TOKEN_PREFIX`` + a random token). A retry that
carries such a state resumes the exchange; the token is the capability, so it
is unguessable, and it is bound to the method and name of the request that
started it.

Lifetimes: the upstream request is bounded by ``tool_timeout_sec`` (the actor
applies it), whatever the host does. A host that abandons a round (cancels
its request) cancels the exchange and with it the upstream request. An
exchange whose outcome nobody collects is dropped ``UNCLAIMED_GRACE_SEC`` after
it ends.

Concurrency: the table's nursery belongs to the Front (``Front.run``). Every
state change of an exchange is synchronous; waiters are woken with a fresh
``trio.Event`` per change.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Final

import mcp_types as types
import outcome
import trio
from mcp import MCPError
from mcp_types import INVALID_PARAMS

from supervisor.calls.attribution import CallTracker, HostCall

logger = logging.getLogger(__name__)

TOKEN_PREFIX: Final = "mcp-supervisor/exchange/"
"""Marks a ``requestState`` minted here (anything else belongs to a 2026-era upstream and passes through)."""
UNCLAIMED_GRACE_SEC: Final = 30.0


class Exchange:
    """One upstream request held across a 2026-era host's input rounds."""

    def __init__(self, token: str, call: HostCall, what: str) -> None:
        self.token = token
        self.call = call
        self.what = what
        self.scope = trio.CancelScope()
        self.result: outcome.Outcome[Any] | None = None
        self._questions: dict[str, tuple[types.InputRequest, trio.MemorySendChannel[Any]]] = {}
        self._keys = itertools.count(1)
        self._changed = trio.Event()

    async def ask(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """Park one upstream question until the host's next round answers it (upstream side)."""
        key = f"q{next(self._keys)}"
        send, receive = trio.open_memory_channel[types.InputResponse | types.ErrorData](1)
        self._questions[key] = (request, send)
        self._wake()
        try:
            async with receive:
                return await receive.receive()
        finally:
            self._questions.pop(key, None)

    def answer(self, responses: types.InputResponses | None) -> None:
        """Hand the host's answers to the questions waiting for them (host side)."""
        for key, response in (responses or {}).items():
            waiting = self._questions.pop(key, None)
            if waiting is not None:
                waiting[1].send_nowait(response)

    def finish(self, result: outcome.Outcome[Any]) -> None:
        self.result = result
        self._wake()

    async def next_round(self) -> Any:
        """The call's result, or an ``InputRequiredResult`` with every question still open (host side).

        Raises:
            Whatever the upstream request raised.
        """
        while True:
            if self.result is not None:
                return self.result.unwrap()
            if self._questions:
                requests = {key: request for key, (request, _) in self._questions.items()}
                return types.InputRequiredResult(input_requests=requests, request_state=self.token)
            changed = self._changed
            await changed.wait()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


class ExchangeTable:
    """The open exchanges, by token; their upstream requests run in ``run``'s nursery."""

    def __init__(self, tracker: CallTracker) -> None:
        self._tracker = tracker
        self._by_token: dict[str, Exchange] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the nursery of every exchange until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def start_soon(self, task: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run ``task`` in the table's nursery (the wire splice's input rounds for a handshake-era host)."""
        assert self._nursery is not None, "exchanges run inside ExchangeTable.run"
        self._nursery.start_soon(task, *args)

    async def serve(self, call: HostCall, what: str, request: Callable[[], Awaitable[Any]]) -> Any:
        """Serve one host round of ``call``: start an exchange, or resume the one its request state names.

        Raises:
            MCPError: The request state names no open exchange, or one started by another request.
        """
        state = call.request_state
        if state is not None and state.startswith(TOKEN_PREFIX):
            exchange = self._resume(call, what, state)
        else:
            exchange = self._start(call, what, request)
        try:
            result = await exchange.next_round()
        except trio.Cancelled:
            exchange.scope.cancel()  # the host abandoned its request: so do we, upstream
            raise
        except BaseException:
            self._by_token.pop(exchange.token, None)
            raise
        if not isinstance(result, types.InputRequiredResult):
            self._by_token.pop(exchange.token, None)
        return result

    def _start(
        self, call: HostCall, what: str, request: Callable[[], Awaitable[Any]], *, served: bool = True
    ) -> Exchange:
        """``served``: the exchange's task serves ``call`` (counted in flight); False: it is counted already."""
        assert self._nursery is not None, "exchanges run inside ExchangeTable.run"
        exchange = Exchange(TOKEN_PREFIX + secrets.token_urlsafe(24), call, what)
        call.exchange = exchange
        self._by_token[exchange.token] = exchange
        self._nursery.start_soon(self._drive, exchange, request, served)
        return exchange

    def adopt(
        self,
        call: HostCall,
        what: str,
        request: Callable[[], Awaitable[Any]],
        first_round: Callable[[outcome.Outcome[Any]], Awaitable[None]],
    ) -> Exchange:
        """Start an exchange for a call already in flight upstream that no handler serves (a spliced one).

        ``request`` waits for that call's upstream outcome; ``first_round`` gets
        what the host's original request is answered with (its first input
        round, usually), in a task of the table's nursery. Retries resume the
        exchange as any other.
        """
        exchange = self._start(call, what, request, served=False)
        assert self._nursery is not None
        self._nursery.start_soon(self._first_round, exchange, first_round)
        return exchange

    async def _first_round(
        self, exchange: Exchange, deliver: Callable[[outcome.Outcome[Any]], Awaitable[None]]
    ) -> None:
        try:
            result: outcome.Outcome[Any] = outcome.Value(await exchange.next_round())
        except Exception as exc:
            result = outcome.Error(exc)
        if not (isinstance(result, outcome.Value) and isinstance(result.value, types.InputRequiredResult)):
            self._by_token.pop(exchange.token, None)
        await deliver(result)

    def _resume(self, call: HostCall, what: str, token: str) -> Exchange:
        exchange = self._by_token.get(token)
        if exchange is None:
            raise MCPError(
                INVALID_PARAMS,
                "requestState names no open mcp-supervisor exchange (it finished, timed out or was abandoned); "
                "send the request again without inputResponses and requestState",
            )
        if exchange.what != what:
            raise MCPError(INVALID_PARAMS, f"requestState belongs to {exchange.what}, not to {what}")
        # Progress and log notices of the rest of the call go with this round's request.
        exchange.call.ctx = call.ctx
        exchange.answer(call.input_responses)
        return exchange

    async def _drive(self, exchange: Exchange, request: Callable[[], Awaitable[Any]], served: bool) -> None:
        with exchange.scope, self._tracker.serving(exchange.call) if served else contextlib.nullcontext():
            try:
                exchange.finish(outcome.Value(await request()))
            except Exception as exc:
                exchange.finish(outcome.Error(exc))
        if exchange.result is None:
            exchange.finish(outcome.Error(MCPError(INVALID_PARAMS, f"{exchange.what} was cancelled")))
        # Nobody may ever collect the outcome (the host left): forget it after a grace.
        await trio.sleep(UNCLAIMED_GRACE_SEC)
        self._by_token.pop(exchange.token, None)
