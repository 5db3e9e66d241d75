"""Which host call an upstream's progress or log notice belongs to: ``NoticeRoutes`` of one generation.

A host call that can get notices has a ``CallNotices`` (``upstream.session``
opens it); progress carrying one of our tokens, and a log message that belongs
to one host call, go into it, in wire order. They arrive through the transport
tap (``upstream.tap``, in the transport's reader, before the SDK spawns its
handlers) or on the event stream of the fast path's own POST
(``upstream.http_calls``, in the calling task). Everything else is left to the
SDK's callbacks (a handshake-era server's log messages are connection-wide:
the Relay broadcasts them).

Concurrency: synchronous, never blocks (``CallNotices.put`` drops when full).
"""

from __future__ import annotations

import contextvars
import itertools
from typing import Any, Final

import mcp_types as types
from pydantic import ValidationError

from supervisor.calls.attribution import CallNotices, HostCall, HostSide, current_call, named_for

PROGRESS_TOKEN_PREFIX: Final = "mcp-supervisor/progress/"


class NoticeRoutes:
    """The notice routes of one generation of ``server`` (``modern``: it speaks 2026-07-28)."""

    def __init__(self, server: str, host: HostSide | None, *, modern: bool) -> None:
        self.server = server
        self.modern = modern
        self._host = host
        self._tokens = itertools.count(1)
        self._progress: dict[str, CallNotices] = {}

    def open_progress(self, notices: CallNotices) -> str:
        """A progress token of ours whose notices go to ``notices`` until ``close_progress``."""
        token = f"{PROGRESS_TOKEN_PREFIX}{next(self._tokens)}"
        self._progress[token] = notices
        return token

    def close_progress(self, token: str) -> None:
        del self._progress[token]

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
        if notices is not None:
            notices.put(types.ProgressNotificationParams.model_validate(params))

    def route_log(self, params: dict[str, Any], call: HostCall | None) -> None:
        """A log message, into the ``CallNotices`` of ``call`` (the one whose stream carried it) if it wants it."""
        if self._host is None:
            return
        name = self.server
        if call is None or call.server != name:
            call = self._host.attribute(name)
        if call is None or call.notices is None or not (self.modern or call.modern_host):
            return  # a handshake-era server's messages are connection-wide: the Relay broadcasts them
        try:
            log = types.LoggingMessageNotificationParams.model_validate(params)
        except ValidationError:
            return
        if call.wants_log(log.level):
            call.notices.put(named_for(name, log))
