"""Which host call an upstream's progress or log notice belongs to: ``NoticeRoutes`` of one generation.

Two ways in, both in wire order:

* through the transport tap (``upstream.tap``, in the transport's reader,
  before the SDK spawns its handlers): ``tap`` and ``route``. A host call that
  can get notices this way has a ``CallNotices`` (``upstream.session`` opens
  it); progress carrying one of our tokens, and a log message that belongs to
  one host call, go into it, and its pump forwards them;
* on the event stream of the call's own POST (``upstream.http_calls``, read in
  the call's own task): ``forward`` sends each to the host right there, so
  such a call needs no pump, no channel and no nursery.

Everything else is left to the SDK's callbacks (a handshake-era server's log
messages are connection-wide: the Relay broadcasts them).

Concurrency: ``tap`` and ``route`` are synchronous and never block
(``CallNotices.put`` drops when full); ``forward`` awaits the host's write in
the calling task; ``pumped`` owns the nursery of a call's pump, for the call.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar, cast

import mcp_types as types
import trio
from pydantic import ValidationError

from supervisor.calls.attribution import CallNotices, HostCall, HostSide, Notice, current_call, deliver, named_for

PROGRESS_TOKEN_PREFIX: Final = "mcp-supervisor/progress/"
T = TypeVar("T")


class NoticeRoutes:
    """The notice routes of one generation of ``server`` (``modern``: it speaks 2026-07-28)."""

    def __init__(self, server: str, host: HostSide | None, *, modern: bool) -> None:
        self.server = server
        self.modern = modern
        self._host = host
        self._tokens = itertools.count(1)
        self._progress: dict[str, CallNotices] = {}

    def new_token(self) -> str:
        """A progress token of ours, unique in this generation."""
        return f"{PROGRESS_TOKEN_PREFIX}{next(self._tokens)}"

    def open_progress(self, notices: CallNotices) -> str:
        """A progress token of ours whose notices go to ``notices`` until ``close_progress``."""
        token = self.new_token()
        self._progress[token] = notices
        return token

    def close_progress(self, token: str) -> None:
        del self._progress[token]

    async def pumped(self, call: HostCall, meta: dict[str, Any], send: Callable[[], Awaitable[T]]) -> T:
        """``send()`` for ``call`` while the tap feeds its ``CallNotices``, whose pump runs in a nursery here.

        A progress token of ours goes in ``meta`` first, so the transport tap (not a
        spawned SDK callback) sees each notice in wire order. The pump forwards what
        is queued before this returns: the host gets the notices before the result.
        """
        token: str | None = None
        failure: Exception | None = None
        result: T | None = None
        try:
            async with trio.open_nursery() as nursery:
                notices = call.notices = CallNotices(call, nursery)
                if call.wants_progress:
                    token = meta["progressToken"] = self.open_progress(notices)
                try:
                    result = await send()
                except Exception as exc:  # raised below, outside the nursery, so it is not wrapped in a group
                    failure = exc
                finally:
                    notices.close()
        finally:
            if token is not None:
                self.close_progress(token)
            call.notices = None
        if failure is not None:
            raise failure
        return cast(T, result)

    def tap(self, message: types.JSONRPCNotification, context: contextvars.Context | None) -> None:
        """A notification the transport read; ``context`` is the one its response stream was read in, if known."""
        by_stream = context is not None and message.method == "notifications/message"
        call = context.run(current_call.get) if context is not None and by_stream else None
        self.route(message.method, message.params or {}, call)

    def route(self, method: str, params: dict[str, Any], call: HostCall | None) -> None:
        """A notification of ``call``'s own response stream (None: of no call known; the host side attributes it)."""
        if method == "notifications/message":
            self.route_log(params, call)
        elif method == "notifications/progress":
            self.route_progress(params)

    def route_progress(self, params: dict[str, Any]) -> None:
        token = params.get("progressToken")
        notices = self._progress.get(token) if isinstance(token, str) else None
        if notices is not None and (progress := _progress_of(params)) is not None:
            notices.put(progress)

    def route_log(self, params: dict[str, Any], call: HostCall | None) -> None:
        """A log message, into the ``CallNotices`` of ``call`` (the one whose stream carried it) if it wants it."""
        if self._host is None:
            return
        if call is None or call.server != self.server:
            call = self._host.attribute(self.server)
        if call is None or call.notices is None:
            return
        log = self._log_for(params, call)
        if log is not None:
            call.notices.put(log)

    def _log_for(self, params: dict[str, Any], call: HostCall) -> types.LoggingMessageNotificationParams | None:
        """The log message ``call``'s host gets for ``params``, named for this server; None: it wants none."""
        if not (self.modern or call.modern_host):
            return None  # a handshake-era server's messages are connection-wide: the Relay broadcasts them
        try:
            log = types.LoggingMessageNotificationParams.model_validate(params)
        except ValidationError:
            return None
        return named_for(self.server, log) if call.wants_log(log.level) else None

    async def forward(self, method: str, params: dict[str, Any], call: HostCall | None, token: Any = None) -> None:
        """A notification on ``call``'s own POST's stream, sent to its host now (None: routed as ``route`` does).

        ``token``: the progress token the request carried (None: none); progress naming another is not this call's.
        """
        if call is None:
            self.route(method, params, None)
            return
        notice: Notice | None = None
        if method == "notifications/message":
            notice = self._log_for(params, call)
        elif method == "notifications/progress" and token is not None and params.get("progressToken") == token:
            notice = _progress_of(params)
        if notice is not None:
            await deliver(call, notice)


def _progress_of(params: dict[str, Any]) -> types.ProgressNotificationParams | None:
    """A progress notice's params as the host gets them; None for a server's garbage (not its host's to see)."""
    try:
        return types.ProgressNotificationParams.model_validate(params)
    except ValidationError:
        return None
