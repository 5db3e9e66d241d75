"""Which way a host's ``tools/call`` goes: the splice, the fast path or the SDK path. One decision, here (issue 29).

The front's own reader decides, before the SDK's server sees the request: the
stdio host wire's (``host.stdio.reader.HostSplice.on_line``) or the HTTP front's own
answer (``host.http.posts``, and ``host.http.sessions`` for a
handshake-era session). ``plain_call`` reads the params, ``path_of`` names
the way. Every way runs the same stages (``host.pipeline.stages``); they differ in who
reads and writes the bytes. ``tests/host/test_tool_call_paths.py`` pins each row.

======  =======================================================  =========================
way     who carries the call                                     upstream leg
======  =======================================================  =========================
splice  the reader writes the request to the upstream's stdin;   the stdio wire
        its stdout pump writes the answer to the host            (``upstream.splice``)
fast    a task of the front's own runs ``adapters.reply``         our own POST (a 2026-era
        (``stdio_fast_calls``, ``http_fast_calls``,              HTTP server), else the
        ``http_handshake_calls``)                                SDK's session
sdk     the SDK's server; its handler (``adapters.call_tool``)   as for fast
        runs the driver too (``ToolCalls.run``)
======  =======================================================  =========================

**splice**, when all hold: ``params`` has only ``name``, ``arguments`` and
``_meta``; ``_meta`` is the 2026 envelope naming a 2026 version (a handshake-era
host: nothing), plus at most trace context and a progress token (ours goes
upstream, the call's id; ``UpstreamSplice.deliver_progress`` puts the host's
back); the tool has no ``outputSchema`` (bytes: nothing would check it); the
generation is over stdio and its splice ready; the request can be queued at
once. Over HTTP also: a 2026-era host's call goes to a 2026-era server, without
trace context; a handshake-era session's to either era. Between eras the splice
does what the SDK path would (``host.pipeline.rounds``).

**fast**, for a 2026-era host: every other plain call (a log level, trace
context, an ``outputSchema``, an input round's retry whose responses the SDK's
model reads), to any generation that is ready. For a handshake-era host: a
call with at most trace context and a progress token in ``_meta``, to a
2026-era server (it asks nothing mid-call; its input rounds run in the sidecar).
Each front's reader adds its own conditions on the request (its module says which).

**sdk**, every other call, each for a reason: a handshake-era host's call to a
handshake-era server off the splice (its questions mid-call) or with other
``_meta``; a retry whose ``inputResponses`` the SDK's model refuses (the SDK
says why); a name not routed yet (only the SDK's handler waits for the first
attempts); params of an unexpected shape (the SDK reports the validation error).

Pure functions: no I/O, no state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import mcp_types as types
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from supervisor.telemetry.conventions import TRACE_KEYS
from supervisor.telemetry.spans import trace_carrier

if TYPE_CHECKING:
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.host.pipeline.stages import FrontKind
    from supervisor.server_actor import ServerActor

Path = Literal["splice", "fast", "sdk"]

PLAIN_PARAMS: Final = frozenset({"name", "arguments", "_meta"})
"""Params keys a call may carry and still take the splice or the fast path."""
ENVELOPE_KEYS: Final = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY})
"""The 2026 per-request envelope: ours replaces the host's upstream, as on the SDK path."""
_TRACE_META_KEYS: Final = frozenset(TRACE_KEYS)
_HANDSHAKE_SPLICE_META_KEYS: Final = _TRACE_META_KEYS | {"progressToken"}
_SPLICE_META_KEYS: Final = ENVELOPE_KEYS | _HANDSHAKE_SPLICE_META_KEYS
_RETRY_PARAMS: Final = PLAIN_PARAMS | {"inputResponses", "requestState"}


@dataclass(slots=True)
class PlainCall:
    """A ``tools/call`` whose params are plain: what the splice and the fast path need of it."""

    name: str
    arguments: dict[str, Any] | None
    carrier: dict[str, Any] | None
    """The host's trace-context keys of ``_meta`` (None: it has none, the usual case)."""
    spliceable: bool
    """Whether ``_meta`` holds only what the splice forwards (the envelope and trace context)."""
    handshake_fast: bool = False
    """A handshake-era host's: whether ``_meta`` holds only what its fast path carries (trace context, a
    progress token)."""


def plain_call(params: Any, *, handshake_host: bool) -> PlainCall | None:
    """``params`` of a call as the splice and fast path read them; None: only the SDK path can take it.

    ``handshake_host``: the host speaks a handshake era (its requests carry no envelope).
    A 2026-era host's input-round retry (``inputResponses``, ``requestState``) is
    plain for the fast path, once its responses read as the SDK would read them.
    """
    if not isinstance(params, dict):
        return None
    retry = not PLAIN_PARAMS.issuperset(params)
    if retry and (handshake_host or not _RETRY_PARAMS.issuperset(params) or not _retry_reads(params)):
        return None  # something new, or a retry the SDK must refuse with its own error
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
        return None
    meta = params.get("_meta")
    if meta is None:
        return PlainCall(name, arguments, None, handshake_host, handshake_host)
    if not isinstance(meta, dict):
        return None
    if handshake_host:
        spliceable = _HANDSHAKE_SPLICE_META_KEYS.issuperset(meta)
        return PlainCall(name, arguments, trace_carrier(meta) if spliceable else None, spliceable, spliceable)
    if not retry and ENVELOPE_KEYS.issuperset(meta):  # the usual 2026 call: nothing else to read
        return PlainCall(name, arguments, None, meta.get(PROTOCOL_VERSION_META_KEY) in MODERN_PROTOCOL_VERSIONS)
    spliceable = (
        not retry
        and _SPLICE_META_KEYS.issuperset(meta)
        and meta.get(PROTOCOL_VERSION_META_KEY) in MODERN_PROTOCOL_VERSIONS
    )
    return PlainCall(name, arguments, trace_carrier(meta) if spliceable else None, spliceable)


def _retry_reads(params: dict[str, Any]) -> bool:
    """Whether a retry's ``inputResponses`` and ``requestState`` read as the SDK's request model reads them."""
    state = params.get("requestState")
    if state is not None and not isinstance(state, str):
        return False
    responses = params.get("inputResponses")
    if responses is None:
        return True
    try:
        types.InputResponseRequestParams.model_validate({"inputResponses": responses})
    except ValidationError:
        return False
    return True


def path_of(
    call: PlainCall | None,
    routed: tuple[RegisteredTool, ServerActor] | None,
    *,
    front: FrontKind,
    handshake_host: bool,
) -> Path:
    """The path of the table above for ``call`` (``plain_call``), routed to ``routed`` (None: not routed now).

    ``front``: which front's own reader asks (the stdio host wire's, or the HTTP front's own answer).
    """
    if call is None or routed is None:
        return "sdk"
    tool, actor = routed
    upstream = actor.ready_upstream
    if upstream is None:
        return "sdk"
    splice = upstream.splice if tool.source.output_schema is None else None  # bytes: nothing checks the schema
    # The HTTP front's own answer: a 2026-era host's calls to 2026-era servers (no trace context: the fast path
    # carries it), a handshake-era session's to either (its trace context goes upstream as it came).
    spliced_front = front == "stdio" or (
        splice is not None and (handshake_host or (splice.modern and call.carrier is None))
    )
    if spliced_front and call.spliceable and splice is not None and splice.ready:
        return "splice"
    if handshake_host:  # a call to a 2026-era server: its rounds run in the sidecar, off the SDK
        return "fast" if call.handshake_fast and upstream.modern else "sdk"
    return "fast"
