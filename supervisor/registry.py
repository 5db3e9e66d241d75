"""The Registry: public tool name → (owner, raw name, host-facing definition).

The Registry is what the host sees. It is plain data with synchronous methods
only: under trio, code without an ``await`` cannot be interleaved, so every
mutation (a generation swap, a withdrawal, a claim) is atomic with respect to
every reader, including the Front answering ``tools/list``. That is how I3
holds: a reader sees a server's previous generation or its new one, never a
mixture and never an empty set in between.

A swap validates the whole new generation before it touches anything. If any
public name of the new generation is held by another owner, nothing changes:
the previous generation stays registered exactly as it was (same names, same
definitions), the squatter is untouched, and the conflict is returned to the
caller to log and show in status. This is the "remove the partial set and
restore the previous generation" rule of DESIGN §4 I3, done without ever
creating the partial set.

Owners are server names or reserved owners (``claim``) such as a name kept for
the supervisor itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import mcp_types as types

from supervisor.errors import RegistryConflict
from supervisor.naming import public_tool_name


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    """One host-facing tool and where it routes."""

    public_name: str
    owner: str
    raw_name: str
    definition: types.Tool
    """The definition the host sees: the upstream's, renamed to ``public_name``."""


@dataclass(frozen=True, slots=True)
class SwapResult:
    """What a swap did.

    Attributes:
        changed: Whether the host-visible catalog changed.
        conflicts: Names the new generation could not take (and so did not),
            each a ``RegistryConflict`` naming both owners.
    """

    changed: bool
    conflicts: tuple[RegistryConflict, ...] = ()


class DuplicateToolName(ValueError):
    """One listing names the same raw tool twice (the listing is rejected)."""


class Registry:
    """Public name → registered tool, for every owner.

    Args:
        on_change: Called (synchronously) after every mutation that changed the
            host-visible catalog. It must not block; the Front uses it to wake
            its coalescing notifier.
    """

    def __init__(self, *, on_change: Callable[[], None] | None = None) -> None:
        self._by_name: dict[str, RegisteredTool] = {}
        self._by_owner: dict[str, dict[str, RegisteredTool]] = {}
        self._on_change = on_change
        self._snapshot: list[types.Tool] | None = None
        self.version = 0
        """Bumped on every host-visible change; readers may use it to detect one."""

    # -- reads -----------------------------------------------------------------

    def lookup(self, public_name: str) -> RegisteredTool | None:
        """Return the tool registered under ``public_name``, if any."""
        return self._by_name.get(public_name)

    def tools(self) -> list[types.Tool]:
        """The host-facing catalog, sorted by public name.

        The list is built once per version and shared; callers must not mutate it.
        """
        if self._snapshot is None:
            self._snapshot = [self._by_name[name].definition for name in sorted(self._by_name)]
        return self._snapshot

    def owned_by(self, owner: str) -> list[RegisteredTool]:
        """Every tool ``owner`` currently holds, sorted by public name."""
        return sorted(self._by_owner.get(owner, {}).values(), key=lambda tool: tool.public_name)

    def __len__(self) -> int:
        return len(self._by_name)

    # -- mutations (synchronous: each is atomic under trio) ---------------------

    def swap(self, owner: str, listing: Sequence[types.Tool]) -> SwapResult:
        """Replace ``owner``'s tools with ``listing`` (raw upstream definitions).

        All or nothing: on any conflict the previous generation stays as it was.

        Raises:
            DuplicateToolName: ``listing`` names one raw tool twice; nothing changed.
        """
        new = self._build_generation(owner, listing)
        conflicts = tuple(
            RegistryConflict(name, held.owner, owner)
            for name, held in ((name, self._by_name.get(name)) for name in new)
            if held is not None and held.owner != owner
        )
        if conflicts:
            return SwapResult(changed=False, conflicts=conflicts)
        old = self._by_owner.get(owner, {})
        if old == new:
            return SwapResult(changed=False)
        for name in old:
            del self._by_name[name]
        self._by_name.update(new)
        if new:
            self._by_owner[owner] = new
        else:
            self._by_owner.pop(owner, None)
        self._changed()
        return SwapResult(changed=True)

    def withdraw(self, owner: str) -> bool:
        """Remove every tool ``owner`` holds; return whether anything was removed."""
        old = self._by_owner.pop(owner, None)
        if not old:
            return False
        for name in old:
            del self._by_name[name]
        self._changed()
        return True

    def claim(self, owner: str, public_name: str, definition: types.Tool) -> None:
        """Register one tool under an exact public name for ``owner`` (reserved names).

        Raises:
            RegistryConflict: Someone else holds the name.
        """
        held = self._by_name.get(public_name)
        if held is not None and held.owner != owner:
            raise RegistryConflict(public_name, held.owner, owner)
        tool = RegisteredTool(public_name, owner, definition.name, definition.model_copy(update={"name": public_name}))
        self._by_name[public_name] = tool
        self._by_owner.setdefault(owner, {})[public_name] = tool
        self._changed()

    # -- internals ---------------------------------------------------------------

    @staticmethod
    def _build_generation(owner: str, listing: Iterable[types.Tool]) -> dict[str, RegisteredTool]:
        generation: dict[str, RegisteredTool] = {}
        seen_raw: set[str] = set()
        for tool in listing:
            if tool.name in seen_raw:
                raise DuplicateToolName(f"server {owner!r} listed the tool {tool.name!r} more than once")
            seen_raw.add(tool.name)
            public = public_tool_name(owner, tool.name)
            if public in generation:
                # Only a hash collision gets here; refuse rather than shadow a tool.
                raise DuplicateToolName(f"server {owner!r}: tools collide on the public name {public!r}")
            generation[public] = RegisteredTool(
                public, owner, tool.name, tool.model_copy(update={"name": public}, deep=True)
            )
        return generation

    def _changed(self) -> None:
        self._snapshot = None
        self.version += 1
        if self._on_change is not None:
            self._on_change()
