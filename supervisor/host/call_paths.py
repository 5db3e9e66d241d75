"""Which way a host's ``tools/call`` goes: the splice, the fast path or the SDK path. One decision, here (issue 29).

A call takes the first path of this table whose every condition it meets.
``plain_call`` reads the request and ``path_of`` decides; the wire splice
(``HostSplice._take_call``, before the SDK has parsed the line) takes a call
only when ``path_of`` says ``"splice"``, the fast path (``FastToolCalls``, a
Front middleware) when it says ``"fast"`` (a call the splice could not queue
at once reaches the middleware too, and is ``"fast"`` there), and the SDK path
takes the rest. ``tests/host/test_tool_call_paths.py`` pins each row.

1. **splice** (``host.splice`` → ``upstream.splice``), when all of these hold:
   a stdio host, of either era (the HTTP front: below); ``params`` has only
   ``name``, ``arguments`` and ``_meta``; ``_meta`` holds the 2026 envelope naming a 2026 version (a
   2026-era host) or nothing (a handshake-era host), plus at most trace context
   (``traceparent``, ``tracestate``, ``baggage``) and a progress token (ours
   upstream, the call's id: ``UpstreamSplice.deliver_progress`` puts the host's
   back): so no log level of the host's own; the name is routed now; the tool has no
   ``outputSchema``; the server's generation is ready, over stdio, of either
   era; the request can be queued without waiting; not shutting down. Saves
   the SDK on both sides: no task, no channel, no model per call. Between eras
   the splice does what the SDK path would (``host.splice_rounds``): a
   handshake-era upstream's questions to a 2026-era host become input rounds
   (the call is promoted to an exchange); a handshake-era host's call to a
   2026-era upstream names the host's log level, gets its log messages in wire
   order and its input rounds run in the sidecar; results take the host's
   era's shape. Over the HTTP front (its own answer, ``host.http_splice``):
   a call as above, to a stdio generation: a 2026-era host's
   without trace context to a 2026-era one (a handshake-era one may ask its
   host something mid-call; the POST's own conditions are
   ``host.http_fast_calls``'s), a handshake-era session's to one of either
   era, its trace context going upstream as it came, as on stdio: a
   handshake-era server's questions mid-call are asked on the call's own
   response, a 2026-era server's log messages ride it and its input rounds
   run in the sidecar (``host.http_handshake_calls``, with its conditions on
   the POST and the session).
2. **fast path** (``host.fast_path``, then ``ToolCalls.call_tool_wire``), when:
   a 2026-era host, over either front; ``params`` as for the splice, or an
   input round's retry (``inputResponses``, ``requestState``), and ``_meta``
   may hold anything (a log level, a progress token: the upstream's notices
   reach the host through the call's own channel, ``compat.sdk.notify_progress``);
   the name is routed now (a tool's ``outputSchema`` is checked in a stage:
   ``host.pipeline.check_output``); the server's generation is
   ready, of either era, over any transport. Saves the SDK's models of the
   request and result; to a 2026-era streamable-HTTP upstream also the SDK's
   client transport and dispatcher: the request is its own
   POST (``upstream.http_calls``; on our own HTTP/1.1 connections where httpx
   would add nothing: ``upstream.http1``). Over the HTTP front, a call of this row whose
   ``_meta`` is the envelope and at most a log level skips the SDK's HTTP
   server too: ``host.http_fast_calls`` answers it (its own conditions on the
   POST are listed there and pinned by ``tests/host/test_http_fast_calls.py``).
   From a stdio host, such a call skips the SDK's stdio server in the same way:
   the wire splice hands it to ``host.stdio_fast_calls``, which runs it off the
   host wire. **A handshake-era stdio host's** call takes this
   row too when its ``_meta`` holds at most trace context and a progress token and the server's
   generation is 2026-era (over HTTP, or over stdio with its splice not ready):
   such a server asks nothing mid-call, its input rounds are run in the sidecar
   (``Upstream.call_tool_wire``), its log messages are asked for at the host's
   level, and the result takes the handshake shape (``ToolCalls.call_tool_wire``).
   So does a handshake-era HTTP session's, by the HTTP front's own answer
   (``host.http_handshake_fast``, its POST's conditions ``http_handshake_calls``'s).
3. **SDK path** (``ToolCalls.call_tool``): every other call, each for a reason:
   * a handshake-era host over HTTP, but for the rows above (a session's
     call not taken by its POST's conditions): the SDK serves its era's shapes;
   * a handshake-era host's call to a handshake-era server off the splice
     (over HTTP: its questions mid-call), or with other ``_meta``;
   * a handshake-era host's progress token to a handshake-era server off the splice;
   * a retry whose ``inputResponses`` the SDK's model refuses: the SDK says why;
   * a name not routed yet: only this path waits for the first attempts;
   * params of an unexpected shape: the SDK reports the validation error.

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
    stdio_host: bool,
    handshake_host: bool,
    http_answer: bool = False,
) -> Path:
    """The path of the table above for ``call`` (``plain_call``), routed to ``routed`` (None: not routed now).

    ``http_answer``: asked by the HTTP front's own answer (``host.http_fast_calls``), which splices too.
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
    spliced_front = stdio_host or (
        http_answer and splice is not None and (handshake_host or (splice.modern and call.carrier is None))
    )
    if spliced_front and call.spliceable and splice is not None and splice.ready:
        return "splice"
    if handshake_host:  # a call to a 2026-era server: its rounds run in the sidecar, off the SDK
        return "fast" if (stdio_host or http_answer) and call.handshake_fast and upstream.modern else "sdk"
    return "fast"
