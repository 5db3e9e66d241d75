"""The Supervisor: the root actor that owns the Registry and one ServerActor per server.

``Supervisor.run`` opens the nursery every ServerActor lives in and starts them
all concurrently, so one slow or broken server never delays another's
readiness (I12). It ends only when cancelled; cancellation unwinds every
actor, and each actor's transport terminates its child process group in a
shielded, bounded cleanup (I11).

Who changes what: only ServerActors mutate the Registry (through their
mailboxes); the Front and the CLI only read it and route calls through
``route``. ``catalog_changed`` is a level-triggered wake-up for readers that
must react to Registry changes (the Front's notifier).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from supervisor.cache import CatalogCache
from supervisor.metrics import Metrics
from supervisor.registry import RegisteredTool, Registry
from supervisor.server_actor import Connector, ServerActor
from supervisor.settings import Settings
from supervisor.status import ServerStatus

logger = logging.getLogger(__name__)


class ChangeSignal:
    """A level-triggered "something changed" wake-up; ``notify`` is synchronous."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = trio.Event()

    async def wait(self) -> None:
        """Wait for the next ``notify`` after this call."""
        await self._event.wait()


class Supervisor:
    """Owns the Registry and the ServerActors of one configuration."""

    def __init__(
        self,
        settings: Settings,
        *,
        connector: Connector | None = None,
        on_status: Callable[[ServerStatus], None] | None = None,
    ) -> None:
        self.settings = settings
        self.catalog_changed = ChangeSignal()
        self.registry = Registry(on_change=self.catalog_changed.notify)
        self.cache = CatalogCache(principal=settings.supervisor.principal)
        self.metrics = Metrics(statuses=self.statuses, catalog_size=lambda: len(self.registry))
        self.actors: dict[str, ServerActor] = {}
        self.disabled: dict[str, ServerStatus] = {}
        for name, server in settings.mcp_servers.items():
            if server.enabled:
                self.actors[name] = ServerActor(
                    server,
                    self.registry,
                    connector=connector,
                    cache=self.cache,
                    on_status=on_status,
                    events=self.metrics,
                )
            else:
                self.disabled[name] = ServerStatus(name, state="disabled")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run every enabled server's actor until cancelled."""
        async with trio.open_nursery() as nursery:
            for actor in self.actors.values():
                await nursery.start(actor.run)
            logger.info("supervising %d servers (%d disabled)", len(self.actors), len(self.disabled))
            task_status.started()

    async def wait_first_attempts(self) -> None:
        """Return once every enabled server has finished its first attempt, successful or not."""
        for actor in self.actors.values():
            await actor.wait_first_attempt()

    @property
    def startup_bound_sec(self) -> float:
        """The longest any server may take for its first attempt."""
        return max((actor.settings.startup_timeout_sec for actor in self.actors.values()), default=0.0)

    def pending_first_attempts(self) -> list[str]:
        """Enabled servers that have not finished their first attempt yet (readiness)."""
        return [name for name, actor in self.actors.items() if not actor.first_attempt_done]

    def route(self, public_name: str) -> tuple[RegisteredTool, ServerActor] | None:
        """Find the tool and the actor that serves it, or None for an unknown name."""
        tool = self.registry.lookup(public_name)
        if tool is None or (actor := self.actors.get(tool.owner)) is None:
            return None
        return tool, actor

    def statuses(self) -> list[ServerStatus]:
        """Every configured server's status, in configuration order."""
        return [
            self.actors[name].status if name in self.actors else self.disabled[name]
            for name in self.settings.mcp_servers
        ]
