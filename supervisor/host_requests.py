"""Requests for a host call, served by one ServerActor's current generation (DESIGN I8, I10, I13).

``HostRequests`` is ``ServerActor``'s base class: ``call_tool`` (and its wire
and input-round forms), ``get_prompt``, ``read_resource`` and ``complete`` run
in the caller's task against the current generation (so a host's cancellation
cancels the upstream request) and never wait for a reconnect: while the server
is not ready they fail fast with ``UpstreamUnavailable`` naming the state and
attempt count (I10). The one wait is for the server's first attempt
(``until_first_attempt_ends``, which the Front's route calls too): its names are
routed from the moment its first sync swaps them in, a moment before the
attempt ends.
``tool_timeout_sec`` bounds each request, and a JSON-RPC error to a
``tools/call`` first triggers the unknown-tool heal (I8).

Concurrency: no state of its own; it reads the actor's current generation and
status, which only the actor's generation loop changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import mcp_types as types
import trio
from mcp import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from supervisor.calls.attribution import HostCall
from supervisor.config.servers import ServerSettings
from supervisor.errors import UpstreamTimeout, UpstreamUnavailable
from supervisor.ops.status import ServerStatus
from supervisor.seams import UpstreamSession
from supervisor.upstream.session import Upstream

T = TypeVar("T")


class HostRequests:
    """What a ServerActor serves for host calls (its base class: the actor sets the attributes below)."""

    name: str
    settings: ServerSettings
    status: ServerStatus
    stopping_reason: str | None
    _upstream: UpstreamSession | None

    if TYPE_CHECKING:  # the actor's own (``ServerActor``): declared here for the type checker

        def heal_unknown_tool(self, raw_name: str, error: MCPError) -> None: ...

        @property
        def first_attempt_done(self) -> bool: ...

        async def wait_first_attempt(self) -> None: ...

    async def until_first_attempt_ends(self) -> None:
        """Return once this server's first attempt has ended (at once if it has), bounded by ``startup_timeout_sec``.

        Its first sync swaps its names into the Registry a moment before its
        generation marks it ready, so a request can route here in that moment: it
        waits for the end, as one routed before the swap would (``host.routing``),
        and then finds the server ready, or failed. After the first attempt nothing
        waits: a server that is not ready fails fast (I10).
        """
        if not self.first_attempt_done:
            with trio.move_on_after(self.settings.startup_timeout_sec):
                await self.wait_first_attempt()

    async def call_tool(
        self, raw_name: str, arguments: dict[str, Any] | None, call: HostCall | None = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Call ``raw_name`` on the current generation, bounded by ``tool_timeout_sec``.

        Raises:
            UpstreamUnavailable: The server is not ready (fails fast, never waits for a reconnect).
            UpstreamTimeout: The call took longer than ``tool_timeout_sec``.
            MCPError: The server answered with a JSON-RPC error (passed through unchanged).
        """
        return await self._call(raw_name, lambda upstream: upstream.call_tool(raw_name, arguments, call))

    @property
    def ready_upstream(self) -> Upstream | None:
        """The current generation if it is ready and the actor not stopping (either era), else None."""
        up = self._upstream
        ok = isinstance(up, Upstream) and self.status.state == "ready" and self.stopping_reason is None
        return cast(Upstream, up) if ok else None

    async def call_tool_wire(
        self, raw_name: str, arguments: dict[str, Any] | None, call: HostCall | None
    ) -> dict[str, Any]:
        """``call_tool``, with the result as the upstream's raw JSON object (bounds, errors and heal the same)."""
        return await self._call(raw_name, lambda up: cast(Upstream, up).call_tool_wire(raw_name, arguments, call))

    async def finish_input_rounds(
        self, raw_name: str, arguments: dict[str, Any] | None, first: dict[str, Any], call: HostCall
    ) -> types.CallToolResult:
        """Run the input rounds of a spliced call whose 2026-era upstream answered ``first`` (``input_required``).

        For a handshake-era host (``host.pipeline.rounds``); bounds, errors and heal as ``call_tool``.
        """
        return await self._call(
            raw_name, lambda up: cast(Upstream, up).finish_input_rounds(raw_name, arguments, first, call)
        )

    async def _call(self, raw_name: str, request: Callable[[UpstreamSession], Awaitable[T]]) -> T:
        """``_forward`` of a tools/call: a JSON-RPC error first triggers the unknown-tool heal (I8), then passes on."""
        try:
            return await self._forward(f"tool {raw_name!r}", request)
        except MCPError as exc:
            self.heal_unknown_tool(raw_name, exc)
            raise

    async def get_prompt(
        self, raw_name: str, arguments: dict[str, str] | None, call: HostCall | None = None
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Get prompt ``raw_name`` from the current generation (bounds and errors as ``call_tool``)."""
        return await self._forward(
            f"prompts/get {raw_name!r}", lambda upstream: upstream.get_prompt(raw_name, arguments, call)
        )

    async def read_resource(
        self, uri: str, call: HostCall | None = None
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read ``uri`` from the current generation, never from a cache (I9)."""
        return await self._forward(f"resources/read {uri}", lambda upstream: upstream.read_resource(uri, call))

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None,
    ) -> types.CompleteResult:
        """Ask the current generation for completions of one argument."""
        return await self._forward(
            "completion/complete", lambda upstream: upstream.complete(ref, argument, context_arguments)
        )

    @property
    def upstream_modern(self) -> bool:
        """Whether the current generation speaks 2026-07-28 (input rounds instead of server→client requests)."""
        return self.status.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def offers_resources(self) -> bool:
        """Whether the current generation is ready and offers resources."""
        upstream = self._upstream
        return upstream is not None and self.status.state == "ready" and "resources" in upstream.kinds

    async def _forward(self, what: str, request: Callable[[UpstreamSession], Awaitable[T]]) -> T:
        if self.stopping_reason is not None:
            await trio.lowlevel.checkpoint()
            raise UpstreamUnavailable(self.name, self.stopping_reason)
        upstream = self._upstream
        if upstream is None or self.status.state != "ready":
            await self.until_first_attempt_ends()
            upstream = self._upstream
        if upstream is None or self.status.state != "ready":
            raise UpstreamUnavailable(self.name, self.status.unavailable_message())
        timeout = self.settings.tool_timeout_sec
        try:
            with trio.fail_after(timeout):
                return await request(upstream)
        except trio.TooSlowError as exc:
            raise UpstreamTimeout(
                self.name,
                f"server {self.name!r}: {what} did not answer within {timeout:g}s (tool_timeout_sec); "
                "the request was abandoned",
            ) from exc
