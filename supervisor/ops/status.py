"""Per-server status: what the ``tools`` command prints and ``/status`` and ``/metrics`` serve.

Plain data, written only by the owning ServerActor (single writer), read by
anyone. No locks are needed: under trio a reader can never observe a
half-written update because updates contain no ``await``.

Writers change a status only through its transition methods (``mark_ready``,
``record_sync`` …), so every update is typed: a misspelled field fails mypy,
and the slotted class refuses it at run time too. The ``stopping`` state is
never written by an actor: the Supervisor reports it for an actor whose stop
(a configuration reload) is still under way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

ServerState = Literal["connecting", "ready", "reconnecting", "failed", "stopping", "disabled", "needs_login"]


@dataclass(slots=True)
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
    about: str = ""
    """One line of what the server says it does (``serverInfo.description``, else its ``instructions``)."""
    connected_at: float | None = None
    """When the current generation's transport came up (handshake done), ``trio.current_time()``."""
    ready_at: float | None = None
    """When the current generation became usable (first sync swapped in)."""
    last_sync_at: float | None = None
    last_sync_reason: str | None = None
    conflicts: list[str] = field(default_factory=list)
    failed_kinds: dict[str, str] = field(default_factory=dict)
    """Optional kinds (prompts, resources, templates) whose last fetch failed, and why; their previous entries stay."""
    transform_warnings: list[str] = field(default_factory=list)
    """Transforms (``[mcp_servers.<s>.tools.<t>]``) that name a tool or argument the server does not list."""
    pins: dict[str, list[str]] = field(default_factory=dict)
    """Pinned definitions not served as pinned, by state (changed, new, withheld, flagged): ``["tool:name"]``."""
    syncs: int = 0
    """Syncs run (each one a fetch of the listings asked for plus a swap)."""

    # -- transitions (the owning actor's only way to write) --------------------------------

    def mark_connected(self, *, at: float, change_notices: bool, about: str = "") -> None:
        """The current generation's transport came up (``change_notices``: it will tell us about changes).

        ``about``: one line of what the server says it does, known before its first sync (the search views'
        semantic index embeds it with each of its tools).
        """
        self.connected_at = at
        self.change_notices = change_notices
        self.about = about

    def mark_ready(self, *, at: float, protocol_version: str, identity: str) -> None:
        """The current generation's first sync swapped in: calls are served."""
        self.state = "ready"
        self.ready_at = at
        self.attempt = 0
        self.protocol_version = protocol_version
        self.identity = identity

    def mark_reconnecting(self, *, attempt: int, error: str) -> None:
        """A generation ended; ``attempt`` counts the consecutive failures of this outage."""
        self.state = "reconnecting"
        self.attempt = attempt
        self.last_error = error

    def mark_failed(self) -> None:
        """The actor gave up (``max_attempts`` reached); ``last_error`` says why."""
        self.state = "failed"

    def mark_needs_login(self, *, error: str) -> None:
        """Only a person can fix it (``mcp-supervisor login``); ``error`` says why and names the command."""
        self.state = "needs_login"
        self.attempt = 0
        self.last_error = error

    def mark_withdrawn(self) -> None:
        """Every tool, prompt, resource and template of the server left the Registry."""
        self.tool_count = self.prompt_count = self.resource_count = self.template_count = 0

    def record_sync(self, *, at: float, reason: str, counts: dict[str, int], conflicts: list[str]) -> None:
        """A sync swapped its listings in (``counts`` per kind; ``conflicts`` names the entries kept out)."""
        self.tool_count = counts["tools"]
        self.prompt_count = counts["prompts"]
        self.resource_count = counts["resources"]
        self.template_count = counts["templates"]
        self.last_sync_at = at
        self.last_sync_reason = reason
        self.syncs += 1
        self.conflicts = conflicts

    def record_kinds(self, *, fetched: Iterable[str], failed: Mapping[str, str]) -> None:
        """A sync fetched the kinds ``fetched`` and failed to fetch those in ``failed`` (kind → why)."""
        for kind in fetched:
            self.failed_kinds.pop(kind, None)
        self.failed_kinds.update(failed)

    def record_transform_warnings(self, warnings: list[str]) -> None:
        """The transforms the last tools listing left unmatched (empty: all of them apply)."""
        self.transform_warnings = warnings

    def record_pins(self, summary: dict[str, list[str]]) -> None:
        """What the last judgement of the pins found (``pins.guard.PinGuard.summary``)."""
        self.pins = summary

    def record_error(self, error: str) -> None:
        """Something failed without changing the state (a failed sync keeps the previous tools)."""
        self.last_error = error

    # -- reading ---------------------------------------------------------------------------

    def describe(self) -> str:
        """One human line: state, tools and the last problem, if any."""
        match self.state:
            case "ready":
                text = f"ready, {self.tool_count} tools"
            case "failed":
                text = f"failed after {self.attempt}/{self.max_attempts} attempts"
            case "reconnecting":
                text = f"reconnecting (attempt {self.attempt}/{self.max_attempts})"
            case "needs_login":
                text = "needs login"
            case _:
                text = self.state
        if self.state == "ready" and (self.prompt_count or self.resource_count or self.template_count):
            text += f", {self.prompt_count} prompts, {self.resource_count} resources, {self.template_count} templates"
        if self.state == "ready" and not self.change_notices:
            text += "; no change notices"
        if self.conflicts:
            text += f"; conflicts: {', '.join(self.conflicts)}"
        if self.failed_kinds:
            text += f"; {', '.join(sorted(self.failed_kinds))} not listed (previous kept)"
        if self.transform_warnings:
            text += f"; transforms unmatched: {'; '.join(self.transform_warnings)}"
        for state, keys in self.pins.items():
            text += f"; pins {state}: {', '.join(keys)}"
        if self.last_error and self.state != "disabled":
            text += f"; last error: {self.last_error}"
        return text

    def unavailable_message(self) -> str:
        """Why requests to this server fail right now (it is not ready), and what to do about it."""
        if self.state == "failed":
            return (
                f"server {self.name!r} failed after {self.attempt} attempts ({self.last_error}); "
                "fix it and reload the configuration"
            )
        if self.state == "reconnecting":
            return (
                f"server {self.name!r} is reconnecting (attempt {self.attempt}/{self.max_attempts}); try again shortly"
            )
        if self.state == "needs_login":
            return self.last_error or f"server {self.name!r} needs login; run `mcp-supervisor login {self.name}`"
        if self.state == "ready":
            # "ready" but no upstream: the generation was lost and is still being torn down.
            return f"server {self.name!r} lost its connection and is reconnecting; try again shortly"
        return f"server {self.name!r} is {self.state}; try again shortly"
