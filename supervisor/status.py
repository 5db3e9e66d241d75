"""Per-server status: what the ``tools`` command prints and a status endpoint will serve.

Plain data, written only by the owning ServerActor (single writer), read by
anyone. No locks are needed: under trio a reader can never observe a
half-written update because updates contain no ``await``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ServerState = Literal["connecting", "ready", "reconnecting", "failed", "disabled"]


@dataclass
class ServerStatus:
    """The live state of one configured server."""

    name: str
    state: ServerState = "connecting"
    generation: int = 0
    attempt: int = 0
    """Consecutive failed attempts in the current outage (0 while healthy)."""
    max_attempts: int = 0
    last_error: str | None = None
    tool_count: int = 0
    prompt_count: int = 0
    resource_count: int = 0
    template_count: int = 0
    change_notices: bool = True
    """False while the server's generation gets no change notices (its catalog is re-listed on reconnect)."""
    protocol_version: str | None = None
    identity: str | None = None
    connected_at: float | None = None
    """When the current generation's transport came up (handshake done), ``trio.current_time()``."""
    ready_at: float | None = None
    """When the current generation became usable (first sync swapped in)."""
    last_sync_at: float | None = None
    last_sync_reason: str | None = None
    conflicts: list[str] = field(default_factory=list)
    syncs: int = 0
    """Syncs run (each one a ``tools/list`` fetch plus a swap)."""

    def describe(self) -> str:
        """One human line: state, tools and the last problem, if any."""
        match self.state:
            case "ready":
                text = f"ready, {self.tool_count} tools"
            case "failed":
                text = f"failed after {self.attempt}/{self.max_attempts} attempts"
            case "reconnecting":
                text = f"reconnecting (attempt {self.attempt}/{self.max_attempts})"
            case _:
                text = self.state
        if self.state == "ready" and (self.prompt_count or self.resource_count or self.template_count):
            text += f", {self.prompt_count} prompts, {self.resource_count} resources, {self.template_count} templates"
        if self.state == "ready" and not self.change_notices:
            text += "; no change notices"
        if self.conflicts:
            text += f"; conflicts: {', '.join(self.conflicts)}"
        if self.last_error and self.state != "disabled":
            text += f"; last error: {self.last_error}"
        return text
