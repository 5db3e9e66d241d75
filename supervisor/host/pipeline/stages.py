"""A host's ``tools/call``, stage by stage: the one place each per-call concern is applied (issue 47).

Whichever front read a call (stdio, HTTP) and whichever leg sends it upstream
(the stdio wire splice, our own POST, the SDK's session), it goes through the
same stages, in this order. ``host.pipeline.paths`` decides which runner carries a
call. A call a task carries is a ``ToolCall`` run by the one driver
(``host.pipeline.driver``); the splice applies the stages in its reader and pump.
Nothing else applies a concern.

1. **view wall, pin guard**: only the view's names route, and a withheld
   tool routes nowhere (``Front.route``; on the SDK path ``Front.route_tool``,
   which waits for the first attempts);
2. **transform**: public name to raw, hidden and defaulted arguments (``outbound``);
3. **span**: the host's SERVER span and the upstream request's CLIENT span
   (``spliced_meta`` on the splice; ``TaskTrace`` for a call a task runs);
4. **envelope**: what the request carries in ``_meta``, our envelope with the
   host's capabilities, trace context, a log level (``spliced_meta`` names the
   keys beside the envelope, whose bytes ``UpstreamSplice.submit`` keeps; for a
   call a task runs, ``Upstream._interactive``);
5. **send and attribution**: the leg (``upstream.splice``, ``upstream.http_calls``,
   the SDK's session), and progress, logs and questions back to the call's
   host (``calls.attribution``);
6. **heal**: a JSON-RPC error first re-lists the server's tools (I8:
   ``ServerActor.heal_unknown_tool``, from ``HostRequests._call`` and
   ``UpstreamSplice.deliver``);
7. **output schema**: a tool that declares one gets structured content that
   conforms, checked once (``check_output``), as the SDK's client checks it;
8. **shape**: the result in the host's era's shape, with our ``serverInfo`` (``shaped``);
9. **settle**: the failure warning, the metrics, the spans' end (``settle``).

``docs/architecture.md`` has the same as a table.

No I/O. The only state is ``check_output``'s cache of compiled validators
(replaced whole when full) and each call's own ``TaskTrace``. The runners call
the stages in their own tasks (or, on the splice, in the upstream's stdout
pump), synchronously.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeVar

import trio
from mcp import MCPError
from mcp_types import LOG_LEVEL_META_KEY, SERVER_INFO_META_KEY

from supervisor.calls.results import CallOutcome, handshake_shaped
from supervisor.errors import UpstreamError, UpstreamTimeout
from supervisor.telemetry.spans import (
    TELEMETRY,
    CallSpan,
    annotate_host_call,
    covering_call,
    current_context,
    host_call_ended,
    start_client_call,
    start_host_call,
    start_sandbox_call,
    start_spliced_call,
    trace_carrier,
)

if TYPE_CHECKING:
    from mcp_types import LoggingLevel
    from opentelemetry.trace import Span

    from supervisor.calls.attribution import HostCall
    from supervisor.calls.splice import SplicedCall
    from supervisor.catalog.registry import RegisteredTool
    from supervisor.config.servers import ServerSettings
    from supervisor.host.pipeline.call import ToolCall
    from supervisor.ops.status import ServerStatus
    from supervisor.telemetry.spans import SplicedTrace

T = TypeVar("T")
FrontKind = Literal["stdio", "http"]
"""Which front read the call (its SERVER span's transport)."""


class TracedActor(Protocol):
    """What a call's spans read of the actor serving it (``ServerActor``)."""

    @property
    def name(self) -> str: ...

    @property
    def status(self) -> ServerStatus: ...

    @property
    def settings(self) -> ServerSettings: ...


class SettlingFront(Protocol):
    """What settling a call needs of its Front (``host.front.Front``)."""

    def note_call(self, tool: RegisteredTool, outcome: CallOutcome, seconds: float) -> None: ...

    def note_call_failure(self, tool: RegisteredTool, kind: str, text: str) -> None: ...


# -- 2. transform --------------------------------------------------------------------


def outbound(tool: RegisteredTool, arguments: dict[str, Any] | None) -> dict[str, Any] | None:
    """The host's arguments as the upstream takes them (``catalog.transforms``; unchanged without a transform)."""
    return tool.upstream_arguments(arguments)


# -- 3. span ---------------------------------------------------------------------------


def open_host_span(
    tool: RegisteredTool,
    host_id: str | int | None,
    host_meta: Mapping[str, Any] | None,
    *,
    generation: int,
    host_version: str | None,
    front: FrontKind,
    arguments: Any,
) -> CallSpan:
    """The SERVER span of a call the SDK's server does not see (telemetry on), parented on the host's ``_meta``."""
    return start_host_call(
        tool.key, host_id, trace_carrier(host_meta), server=tool.owner, generation=generation,
        host_version=host_version, stdio=front == "stdio", arguments=arguments,
    )  # fmt: skip


def trace_spliced(
    call: SplicedCall,
    actor: TracedActor,
    carrier: dict[str, Any] | None,
    *,
    host_version: str | None,
    front: FrontKind,
    arguments: Any,
) -> SplicedTrace:
    """A spliced call's two spans (telemetry on): the SERVER span on the host's trace, its CLIENT span."""
    status = actor.status
    call.trace = start_spliced_call(
        call.tool.key, call.tool.raw_name, call.host_id, call.upstream_id, carrier,
        server=call.tool.owner, generation=status.generation, host_version=host_version,
        upstream_version=status.protocol_version, arguments=arguments, stdio=front == "stdio",
    )  # fmt: skip
    return call.trace


class TaskTrace:
    """The spans of a call a task runs (telemetry on): the host's span and each upstream request's CLIENT span.

    The host's span is by the call's ``origin`` (``host.pipeline.call``): the SDK
    middleware's SERVER span, annotated; ours, for a call a front's own task
    read (the SDK's server never saw it); or, for a program's call in
    ``run_code``, an INTERNAL span under the ``run_code`` call's. ``around``
    wraps the upstream request in a CLIENT span parented on it, made where
    the request runs (the handler's task, or an exchange's: a 2026-era host of a
    handshake-era server, ``host.pipeline.exchanges``). The CLIENT span covers what the
    actor does for the call (the fail-fast of a server that is not ready, the
    ``tool_timeout_sec`` bound), so a timeout and an unavailable server have
    their ``error.type`` too. The host's arguments are recorded (with
    ``capture_content``), never what a transform injected.
    """

    __slots__ = ("_arguments", "_own", "_parent", "_sdk_span", "_tool")

    def __init__(self, call: ToolCall) -> None:
        tool, arguments, origin = call.tool, call.arguments, call.origin
        self._tool = tool
        self._arguments = arguments
        generation = call.actor.status.generation
        self._own: CallSpan | None = None
        self._sdk_span: Span | None = None
        if origin == "sdk":
            stdio = call.host.request is None
            self._sdk_span = annotate_host_call(
                server=call.actor.name, generation=generation, stdio=stdio, arguments=arguments
            )
            self._parent = current_context()
            return
        if origin == "sandbox":
            self._own = start_sandbox_call(tool.key, server=tool.owner, generation=generation, arguments=arguments)
        else:
            self._own = open_host_span(
                tool, call.request_id, call.host.meta, generation=generation, host_version=call.host.protocol_version,
                front=origin, arguments=arguments,
            )  # fmt: skip
        self._parent = self._own.context

    def around(
        self, actor: TracedActor, send: Callable[[HostCall], Awaitable[T]], is_error: Callable[[T], bool]
    ) -> Callable[[HostCall], Awaitable[T]]:
        """``send`` inside a CLIENT span for the upstream request, parented on the host's SERVER span."""
        tool, arguments, parent = self._tool, self._arguments, self._parent
        stdio = actor.settings.transport == "stdio"

        async def traced_send(call: HostCall) -> T:
            status = actor.status
            span = start_client_call(
                tool.raw_name, server=actor.name, generation=status.generation,
                protocol_version=status.protocol_version, stdio=stdio, parent=parent, arguments=arguments,
            )  # fmt: skip
            with covering_call(span, tool.raw_name):
                try:
                    result = await send(call)
                except BaseException as exc:
                    _end_failed(span, exc)
                    raise
            span.end("tool_error" if is_error(result) else "ok", result=result)
            return result

        return traced_send

    def end(self, outcome: CallOutcome, result: Any, error: MCPError | None) -> None:
        """The host's call ended: say how on its SERVER span (ours ends here; the SDK's ends in its middleware)."""
        if self._sdk_span is not None:
            host_call_ended(self._sdk_span, outcome, result)
        elif self._own is not None:
            code, message = (error.code, error.error.message) if error is not None else (None, None)
            self._own.end(outcome, code=code, message=message, result=result)


def _end_failed(span: CallSpan, exc: BaseException) -> None:
    """End an upstream request's CLIENT span that raised ``exc``: the same outcomes as the metrics count."""
    if isinstance(exc, UpstreamTimeout):
        span.end("timeout")
    elif isinstance(exc, UpstreamError):
        span.end("unavailable")
    elif isinstance(exc, MCPError):
        span.end("rpc_error", code=exc.code, message=exc.error.message)
    elif isinstance(exc, Exception):
        span.end("error", error_type=type(exc).__qualname__)
    else:  # cancelled: the host gave up, or the sidecar is stopping
        span.end("cancelled")


# -- 4. envelope -------------------------------------------------------------------------


def spliced_meta(
    call: SplicedCall,
    actor: TracedActor,
    *,
    carrier: dict[str, Any] | None,
    level: LoggingLevel | None,
    host_version: str | None,
    front: FrontKind,
    arguments: Any,
) -> dict[str, Any] | None:
    """The keys a spliced call's request carries in ``_meta`` beside our envelope (None: none).

    Telemetry on: the call's spans start (``trace_spliced``) and our CLIENT
    span's context goes upstream, with the host's baggage. Off: the host's trace
    context goes as it came. A handshake-era host's call to a 2026-era upstream
    names the host's log ``level``. A host's progress token becomes ours, the
    call's request id (``UpstreamSplice.deliver_progress`` puts the host's back).
    The envelope itself, with the host's capabilities declared (issue 30), is the
    upstream leg's (``UpstreamSplice.submit``).
    """
    extra: dict[str, Any] = {}
    if TELEMETRY.on:
        trace = trace_spliced(call, actor, carrier, host_version=host_version, front=front, arguments=arguments)
        extra = trace.upstream_meta(carrier)
    elif carrier is not None:
        extra.update(carrier)
    if level is not None:
        extra[LOG_LEVEL_META_KEY] = level
    if call.progress_token is not None:  # ours upstream, the call's id: its notices are attributed exactly
        extra["progressToken"] = call.upstream_id
    return extra or None


# -- 6b. output schema -------------------------------------------------------------------

MAX_VALIDATORS: Final = 4096
"""Compiled output-schema validators kept (a catalog's worth); the table is replaced whole when full."""
_validators: dict[int, tuple[Any, Any]] = {}


def check_output(tool: RegisteredTool, result: dict[str, Any]) -> None:
    """A complete, non-error result of a tool that declares an ``outputSchema`` carries structured content that
    conforms to it: checked once, here, with the texts the SDK's client raises on the SDK path.

    Raises:
        RuntimeError: No structured content, content that does not conform, or a schema that is not one.
    """
    schema = tool.source.output_schema
    if schema is None or result.get("isError") is True or result.get("resultType") == "input_required":
        return
    name = tool.raw_name
    if "structuredContent" not in result:
        raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
    from jsonschema import exceptions  # type: ignore[import-untyped]  # noqa: PLC0415  (paid by a tool with a schema)
    from referencing.exceptions import Unresolvable  # noqa: PLC0415

    try:
        error = exceptions.best_match(_validator(name, schema).iter_errors(result["structuredContent"]))
    except Unresolvable as exc:
        raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from exc
    if error is not None:
        raise RuntimeError(f"Invalid structured content returned by tool {name}: {error}") from error


def _validator(name: str, schema: dict[str, Any]) -> Any:
    """The compiled validator of ``schema`` (compiling costs ~60x a validation), kept while the schema lives."""
    global _validators  # noqa: PLW0603  (replaced whole when full, never edited from two tasks at once)
    held = _validators.get(id(schema))
    if held is not None and held[0] is schema:
        return held[1]
    from jsonschema import SchemaError  # noqa: PLC0415
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]  # noqa: PLC0415
    from referencing import Registry  # noqa: PLC0415

    kind = validator_for(schema)
    try:
        kind.check_schema(schema)
    except SchemaError as exc:
        raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from exc
    if len(_validators) >= MAX_VALIDATORS:
        _validators = {}
    validator = kind(schema, registry=Registry())  # $refs resolve within the schema and the metaschemas only
    _validators[id(schema)] = (schema, validator)  # the schema is held: its id is not reused
    return validator


# -- 7. shape ----------------------------------------------------------------------------


def shaped(result: dict[str, Any], stamp: dict[str, Any] | None) -> dict[str, Any]:
    """A wire result (ours: edited in place) as the host's era shows it.

    ``stamp``: our ``serverInfo``, for a 2026-era host, which gets it in ``_meta``
    (replaced, not written into) and a ``resultType``, as the SDK's ``_serialize``
    gives a 2026-era result. None: a handshake-era host, which gets neither
    (``handshake_shaped``).
    """
    if stamp is None:
        return handshake_shaped(result)
    meta = result.get("_meta")
    result["_meta"] = {**meta, SERVER_INFO_META_KEY: stamp} if isinstance(meta, dict) else {SERVER_INFO_META_KEY: stamp}
    if result.get("resultType") is None:
        result["resultType"] = "complete"
    return result


def error_content(text: str) -> dict[str, Any]:
    """The error result a host gets for a call that failed before or upstream, as a wire result (to be shaped)."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


# -- 8. settle ---------------------------------------------------------------------------


def settle(
    front: SettlingFront,
    tool: RegisteredTool,
    outcome: CallOutcome,
    started: float,
    *,
    failure: tuple[str, str] | None = None,
    trace: SplicedTrace | None = None,
) -> None:
    """The call is over: the failure warning (``failure``: the ``UpstreamError``'s kind and text), the metrics, and
    the spliced call's spans end (a task's call ends its own: ``host.pipeline.driver``)."""
    if failure is not None:
        front.note_call_failure(tool, *failure)
    front.note_call(tool, outcome, trio.current_time() - started)
    if trace is not None:
        trace.finish(outcome)
