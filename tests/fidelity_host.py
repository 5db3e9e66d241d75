"""A host for the fidelity tests: an ``mcp.Client`` with every client-side capability, recording what reaches it.

The sidecar must be indistinguishable from the server itself (DESIGN I13), so
the host answers sampling, elicitation (form and URL) and roots the way a real
harness would, records progress, log messages and resource updates, and says
which host it is in every answer (``name``), so a test with two hosts can tell
whose callback ran.

Concurrency: callbacks run in the host's client tasks; they only append to
lists and set events, so no lock is needed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.subscriptions import SubscriptionLost

from tests.sidecar import Host, scaled

ROOT_URI = "file:///work/project"

# The parametrizations every fidelity test module shares: the host's era, the upstream's era, the front.
HOST_ERAS: list[Any] = [pytest.param("auto", id="host2026"), pytest.param("legacy", id="host2025")]
UPSTREAM_ERAS: list[Any] = [pytest.param((), id="up2026"), pytest.param(("--legacy-only",), id="up2025")]
# The SDK's HTTP client drops its httpx2 SSE generators unclosed under trio at teardown (a client-side
# ResourceWarning in the test process, not a sidecar fault; see tests/host/test_http_front.py).
HTTP_CLIENT_LEAKS_ASYNCGENS = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
FRONTS: list[Any] = [
    pytest.param("stdio", id="stdio"),
    pytest.param("http", id="http", marks=HTTP_CLIENT_LEAKS_ASYNCGENS),
]


@dataclass
class Recorder:
    """What one host saw and how it answers."""

    name: str = "host"
    with_sampling: bool = True
    samples: list[str] = field(default_factory=list)
    elicitations: list[str] = field(default_factory=list)
    elicit_params: list[types.ElicitRequestParams] = field(default_factory=list)
    roots_asked: int = 0
    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)
    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    prompt_notices: int = 0
    resource_notices: int = 0
    elicitations_completed: list[str] = field(default_factory=list)
    changed: trio.Event = field(default_factory=trio.Event)

    def _note(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        block = params.messages[0].content
        self.samples.append(block.text if isinstance(block, types.TextContent) else "?")
        self._note()
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=f"model of {self.name}"), model=f"{self.name}-model"
        )

    async def elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicitations.append(params.mode or "form")
        self.elicit_params.append(params)
        self._note()
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": self.name})

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.roots_asked += 1
        self._note()
        return types.ListRootsResult(roots=[types.Root.model_validate({"uri": ROOT_URI, "name": self.name})])

    async def logging(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)
        self._note()

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))
        self._note()

    def client_options(self, host: Host) -> dict[str, Any]:
        """Keyword arguments for ``mcp.Client`` (through ``open_host`` / ``open_http_host``)."""

        async def on_message(message: IncomingMessage) -> None:
            match message:
                case types.ResourceUpdatedNotification(params=params):
                    self.updated.append(str(params.uri))
                    self._note()
                case types.PromptListChangedNotification():
                    self.prompt_notices += 1
                    self._note()
                case types.ResourceListChangedNotification():
                    self.resource_notices += 1
                    self._note()
                case types.ElicitCompleteNotification(params=params):
                    self.elicitations_completed.append(params.elicitation_id)
                    self._note()
                case _:
                    pass
            await host.on_message(message)

        options: dict[str, Any] = {
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.list_roots,
            "logging_callback": self.logging,
            "message_handler": on_message,
        }
        if self.with_sampling:
            options["sampling_callback"] = self.sampling
        return options

    async def wait_for(self, predicate: Any, *, what: str, bound_sec: float | None = None) -> None:
        """Wait until ``predicate()`` holds, woken by every callback; fail after ``bound_sec``."""
        bound = scaled(10) if bound_sec is None else bound_sec
        with trio.move_on_after(bound):
            while not predicate():
                await self.changed.wait()
            return
        raise AssertionError(f"host {self.name}: timed out after {bound:g}s waiting for {what}")


@asynccontextmanager
async def listening_for_updates(
    host: Host, uris: list[str], *, prompts: bool = False, resources: bool = False
) -> AsyncIterator[None]:
    """A 2026-era host subscribes to resources (and prompt or resource-list changes) by holding a listen stream."""

    async def hold(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with host.session.listen(
                resource_subscriptions=uris, prompts_list_changed=prompts, resources_list_changed=resources
            ) as subscription:
                task_status.started()
                # The client tees every listen event to the message handler too; that is where it is recorded.
                async for _event in subscription:
                    pass
        except SubscriptionLost:
            pass

    async with trio.open_nursery() as nursery:
        await nursery.start(hold)
        yield
        nursery.cancel_scope.cancel()
