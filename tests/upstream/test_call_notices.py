"""Notices on a call's own POST: forwarded to its host in the call's own task, in order (``NoticeRoutes.forward``).

Progress counts as the call's only under the token its request carried, as the SDK's client routes it.

The host side is a recording stand-in for the host's session behind a real
``HostCall``; the routes are a 2026-era generation's, as our own POST only
serves those.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import mcp_types as types
import trio
from mcp.server import ServerRequestContext
from mcp_types import LOG_LEVEL_META_KEY

from supervisor.calls.attribution import HostCall
from supervisor.upstream.call_notices import NoticeRoutes


class _HostSession:
    """What a ``HostCall`` writes to its host: each progress and log, in order; ``gone`` fails every write."""

    def __init__(self, *, gone: bool = False) -> None:
        self.got: list[tuple[str, Any]] = []
        self.gone = gone

    async def report_progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.gone:
            raise trio.BrokenResourceError("the host left")
        self.got.append(("progress", (progress, total, message)))

    async def send_notification(self, notification: Any, related_request_id: Any = None) -> None:
        if self.gone:
            raise trio.BrokenResourceError("the host left")
        self.got.append(("log", (notification.params.logger, notification.params.data, related_request_id)))


def _call(session: _HostSession, *, progress: bool = True, level: str | None = "info") -> HostCall:
    meta: dict[str, Any] = {}
    if progress:
        meta["progress_token"] = "host-token"
    if level is not None:
        meta[LOG_LEVEL_META_KEY] = level
    ctx: ServerRequestContext[Any] = ServerRequestContext(
        session=session,  # type: ignore[arg-type]  # the stand-in records what the host would get
        lifespan_context={}, protocol_version="2026-07-28", method="tools/call", meta=meta,  # type: ignore[arg-type]
        request_id=9,
    )  # fmt: skip
    return HostCall(ctx, "web")


def _log(level: str, data: str) -> dict[str, Any]:
    return {"level": level, "logger": "db", "data": data}


async def test_a_calls_own_post_notices_reach_its_host_in_wire_order_with_no_pump() -> None:
    session = _HostSession()
    call = _call(session)
    routes = NoticeRoutes("web", None, modern=True)
    with trio.fail_after(5):
        forward = partial(routes.forward, call=call, token="ours/1")
        await forward("notifications/progress", {"progressToken": "ours/1", "progress": 1, "total": 3})
        await forward("notifications/message", _log("debug", "below the host's level"))
        await forward("notifications/message", _log("warning", "slow disk"))
        await forward("notifications/progress", {"progressToken": "ours/1", "progress": "lots"})
        await forward("notifications/progress", {"progressToken": "someone else's", "progress": 5})
        await forward("notifications/progress", {"progressToken": "ours/1", "progress": 2, "message": "m"})
        await forward("notifications/resources/updated", {"uri": "file:///a"})
    assert session.got == [
        ("progress", (1, 3, None)),
        ("log", ("web.db", "slow disk", 9)),
        ("progress", (2, None, "m")),
    ]
    assert call.notices is None, "no CallNotices, so no pump task and no nursery"


async def test_a_host_that_asked_for_no_progress_or_logs_gets_none() -> None:
    session = _HostSession()
    call = _call(session, progress=False, level=None)
    routes = NoticeRoutes("web", None, modern=True)
    with trio.fail_after(5):
        await routes.forward("notifications/progress", {"progressToken": "ours/1", "progress": 1}, call, None)
        await routes.forward("notifications/message", _log("emergency", "x"), call, None)
    assert session.got == []


async def test_a_notice_for_a_host_that_left_is_dropped_and_the_call_goes_on() -> None:
    call = _call(_HostSession(gone=True))
    routes = NoticeRoutes("web", None, modern=True)
    with trio.fail_after(5):
        await routes.forward("notifications/progress", {"progressToken": "ours/1", "progress": 1}, call, "ours/1")
        await routes.forward("notifications/message", _log("error", "x"), call, "ours/1")


def test_our_progress_tokens_are_unique_in_a_generation() -> None:
    routes = NoticeRoutes("web", None, modern=True)
    assert len({routes.new_token() for _ in range(100)}) == 100
    assert types.ProgressNotificationParams.model_validate({"progressToken": routes.new_token(), "progress": 0})


async def test_garbage_progress_through_the_tap_is_dropped_and_the_next_notice_still_goes() -> None:
    session = _HostSession()
    call = _call(session)
    routes = NoticeRoutes("web", None, modern=True)

    async def send() -> str:
        token = meta["progressToken"]
        routes.route("notifications/progress", {"progressToken": token, "progress": "lots"}, None)
        routes.route("notifications/progress", {"progressToken": token, "progress": 1}, None)
        return "result"

    meta: dict[str, Any] = {}
    with trio.fail_after(5):
        assert await routes.pumped(call, meta, send) == "result"
    assert session.got == [("progress", (1, None, None))]
    assert call.notices is None
