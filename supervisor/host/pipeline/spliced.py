"""What both host halves of the wire splice share: a call's start and its result's shape (issue 47).

A stdio host's half (``host.stdio.reader.HostSplice``) and the HTTP front's
(``host.http.splice.HttpSplice``) differ in where a call's request comes from
and where its answer goes. What the call carries upstream is the same for
both, and decided here once (``SpliceHostHalf.start``): the transform of its
arguments, its progress token (ours upstream), the capabilities and log level
of its host, its spans and the request's ``_meta`` (``host.pipeline.stages``), and
whether it counts as in flight on its server (so that its upstream's questions
and log messages find it). ``restamp`` gives its result the host's era's shape.

Concurrency: synchronous, in the task that read the host's request
(``start``) or the one that settles the call (``restamp``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Protocol, cast

import trio
from mcp_types import CLIENT_CAPABILITIES_META_KEY

from supervisor.calls.splice import SplicedCall
from supervisor.host.pipeline.rounds import declared_capabilities
from supervisor.host.pipeline.stages import outbound, shaped, spliced_meta

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.server.connection import Connection
    from mcp_types import LoggingLevel

    from supervisor.calls.attribution import CallTracker
    from supervisor.calls.splice import SpliceHost
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.host.pipeline.stages import FrontKind
    from supervisor.server_actor import ServerActor


class SplicingFront(Protocol):
    """What a spliced call's start and shape need of the Front (``host.front.Front``)."""

    @property
    def calls(self) -> CallTracker: ...

    @property
    def server(self) -> Server[Any]: ...

    def connection_log_level(self, connection: Connection) -> LoggingLevel | None: ...


class SpliceHostHalf(ABC):
    """The shared part of a host half of the splice (``calls.splice.SpliceHost``): its subclasses set ``front``
    and say their host's era (``handshake_host``)."""

    front: SplicingFront
    _stamp: dict[str, Any] | None = None

    @property
    @abstractmethod
    def handshake_host(self) -> bool:
        """Whether this half's host speaks a handshake era (its results take that era's shape)."""

    def start(
        self,
        routed: tuple[RegisteredTool, ServerActor],
        host_id: str | int,
        arguments: dict[str, Any] | None,
        *,
        arguments_text: memoryview | None = None,
        host_meta: dict[str, Any] | None,
        connection: Connection | None,
        host_version: str | None,
        carrier: dict[str, Any] | None,
        progress_token: Any,
        front: FrontKind,
    ) -> SplicedCall | None:
        """Send a host's call upstream on its generation's splice now (no wait); None: it cannot be queued at once.

        The caller checked that the generation is ready and has a splice (``host.pipeline.paths.path_of``).

        ``arguments_text``: the host's own bytes of ``arguments`` (a large request), sent as they are unless a
        transform changes them. ``host_meta``: a 2026-era host's ``_meta``, whose client capabilities are declared
        upstream (issue 30). ``connection``: a handshake-era host's, for a call to a 2026-era upstream: its
        declared capabilities go upstream, its log level is named, and its input rounds run here
        (``host.pipeline.rounds``). ``carrier``: the host's trace context; ``progress_token``: the host's (None: it
        asked for none).
        """
        tool, actor = routed
        upstream = actor.ready_upstream
        splice = upstream.splice if upstream is not None else None
        if splice is None:
            return None
        now = trio.current_time()
        host = cast("SpliceHost", self)  # each subclass is one
        call = SplicedCall(host_id, splice.new_id(), tool, actor, now, now + splice.timeout_sec, host, upstream=splice)
        call.progress_token = progress_token
        sent = arguments
        if tool.transforms_arguments:  # renamed, defaulted or injected arguments: re-encoded, not the host's bytes
            sent, arguments_text = outbound(tool, arguments), None
        capabilities, level = None, None
        if connection is not None:
            capabilities = declared_capabilities(connection)
            level = self.front.connection_log_level(connection) or "debug"  # as ``HostCall.log_level``
            call.log_level, call.arguments, call.arguments_text = level, sent, arguments_text
        elif host_meta is not None:
            capabilities = host_meta.get(CLIENT_CAPABILITIES_META_KEY)
        extra = spliced_meta(
            call, actor, carrier=carrier, level=level, host_version=host_version, front=front, arguments=arguments
        )
        if not splice.submit(call, tool.raw_name, sent, arguments_text, meta_extra=extra, capabilities=capabilities):
            if call.trace is not None:
                call.trace.discard()
            return None
        if not splice.modern or connection is not None:  # its upstream may ask or tell its host something meanwhile
            self.front.calls.spliced(tool.owner, call)
            call.counted = True
            call.host_meta = host_meta
        return call

    def restamp(self, result: dict[str, Any]) -> dict[str, Any]:
        """The upstream's result as this half's host must see it (edited in place: encoded at once and dropped).

        A 2026-era host gets our ``serverInfo`` stamp and a ``resultType``; a handshake-era host neither.
        """
        if self.handshake_host:
            return shaped(result, None)
        if self._stamp is None:
            self._stamp = self.front.server.server_info_stamp
        return shaped(result, self._stamp)  # the stamp shared: encoded at once and dropped
