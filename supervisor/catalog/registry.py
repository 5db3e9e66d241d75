"""The Registry: what the host sees of every server's tools, prompts, resources and templates.

Four catalogs, one per *kind*:

* ``tools`` and ``prompts``: public name (``mcp__<server>__<name>``, or the
  sanitized raw name for ``namespace = false`` servers, DESIGN §3.3) → owner,
  raw name, and the host-facing definition (the upstream's, renamed);
* ``resources``: URI → owner and definition (URIs are not renamed);
* ``templates``: (owner, URI template) → definition. Two servers may offer the
  same template; reads route by matching (``host.front``), so they never conflict.

The Registry is plain data with synchronous methods only: under trio, code
without an ``await`` cannot be interleaved, so every mutation (a generation
swap of one or several kinds, a withdrawal, a claim) is atomic with respect to
every reader, including the Front answering a list. That is how I3 holds: a
reader sees a server's previous generation or its new one, never a mixture
and never an empty set in between.

A swap validates the new generation of a kind before it touches anything. If
any key of the new generation is held by another owner, that kind does not
change: the previous generation stays registered exactly as it was, the
squatter is untouched, and the conflict is returned to the caller to log and
show in status (DESIGN §4 I3, done without ever creating the partial set).
``swap_many`` applies several kinds in one synchronous step; a conflict in one
kind keeps only that kind's previous generation.

Owners are server names or reserved owners (``claim``).

The Registry never shares a definition with a caller that may change it. A
plain listing is deep-copied on the way in. An ``OwnedListing`` is handed over:
its producer (``upstream.listing``) parsed it for this swap, and the only other
holder of its objects is the response cache's entry, which never changes them
either. Its definitions are kept as they are, each entry's ``source``.

An entry's ``definition`` (the source renamed to its public name) is made on
first use, not at the swap: on a cold start of 50 servers x 100 tools the
renamed copies were a twentieth of the sidecar's CPU, and the hot readers need
none of them. The host's ``tools/list`` forms (``catalog.wire_form``) are made from
the sources and renamed in the form; the call paths read the source's output
schema. Only the SDK's own list answer and the one-shot commands ask for
``definition``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, TypeVar

import mcp_types as types

from supervisor.catalog.naming import MCP_RULE, NameRule, public_name
from supervisor.catalog.transforms import ToolTransform
from supervisor.errors import RegistryConflict

Kind = Literal["tools", "prompts", "resources", "templates"]
ALL_KINDS: Final[tuple[Kind, ...]] = ("tools", "prompts", "resources", "templates")
Definition = types.Tool | types.Prompt | types.Resource | types.ResourceTemplate
D = TypeVar("D", bound=Definition)


@dataclass(frozen=True)  # not slotted: instantiating the ``RegisteredTool`` alias sets ``__orig_class__``
class Registered(Generic[D]):
    """One host-facing entry and where it routes.

    Attributes:
        key: The catalog key: public name (tools, prompts), URI (resources),
            ``owner\\0template`` (templates).
        owner: The server (or reserved owner) that serves it.
        raw_name: What goes on the wire upstream: raw tool/prompt name, URI or URI template.
        source: The definition as its server listed it (never changed, and
            possibly shared with the response cache: read it, never mutate it).
    """

    key: str
    owner: str
    raw_name: str
    source: D
    transform: ToolTransform | None = field(default=None, repr=False)
    """The tool's transform (``catalog.transforms``), if its server's settings give it one."""
    wire: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, repr=False)
    """The definition's wire form per protocol version, filled by its readers (``catalog.wire_form``). An entry
    lives for one generation of its server, so the form can never outlive the definition it was made of."""
    _definition: D | None = field(default=None, init=False, compare=False, repr=False)
    _shown: D | None = field(default=None, init=False, compare=False, repr=False)
    _search_terms: Sequence[str] | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def public_name(self) -> str:
        return self.key

    @property
    def shown(self) -> D:
        """``source`` as its transform shapes it, under its raw name (``source`` itself without a transform)."""
        if self._shown is None:
            source = self.source
            shaped = (
                self.transform.shape(source)
                if self.transform is not None and isinstance(source, types.Tool)
                else source
            )
            # Frozen for its fields; this cache of a value derived from them is set once.
            object.__setattr__(self, "_shown", shaped)
        assert self._shown is not None
        return self._shown

    @property
    def definition(self) -> D:
        """The definition the host sees: ``shown`` under its public name (made on first use, then kept)."""
        if self._definition is None:
            shown = self.shown
            renames = isinstance(shown, types.Tool | types.Prompt) and shown.name != self.key
            object.__setattr__(self, "_definition", shown.model_copy(update={"name": self.key}) if renames else shown)
        assert self._definition is not None
        return self._definition

    @property
    def search_terms(self) -> Sequence[str] | None:
        """The entry's search terms, each as often as it counts, once ``catalog.search`` has made them."""
        return self._search_terms

    def keep_search_terms(self, terms: Sequence[str]) -> None:
        """Keep ``terms`` for this entry's lifetime (one generation of its server)."""
        object.__setattr__(self, "_search_terms", terms)

    def upstream_arguments(self, arguments: dict[str, Any] | None) -> dict[str, Any] | None:
        """The host's arguments as the upstream takes them (unchanged without an argument transform)."""
        transform = self.transform
        return arguments if transform is None else transform.upstream_arguments(arguments)

    @property
    def transforms_arguments(self) -> bool:
        """Whether a call's arguments change on their way upstream (the splice then re-encodes them)."""
        return self.transform is not None and self.transform.touches_arguments


RegisteredTool = Registered[types.Tool]
RegisteredPrompt = Registered[types.Prompt]


@dataclass(frozen=True, slots=True)
class SwapResult:
    """What a swap did.

    Attributes:
        changed: Whether the host-visible catalog changed.
        conflicts: Keys the new generation could not take (and so did not),
            each a ``RegistryConflict`` naming both owners.
    """

    changed: bool
    conflicts: tuple[RegistryConflict, ...] = ()


class OwnedListing(list[Definition]):
    """A listing whose definitions nobody else holds: the Registry keeps them without a deep copy.

    Only a producer that parsed the definitions itself and drops every
    reference after the swap may build one (``upstream.listing.list_all``).
    """


class DuplicateName(ValueError):
    """One listing names the same tool or prompt twice (the listing is rejected)."""


DuplicateToolName = DuplicateName


@dataclass
class _Catalog(Generic[D]):
    """One kind's entries; only ``Registry`` touches it."""

    by_key: dict[str, Registered[D]] = field(default_factory=dict)
    by_owner: dict[str, dict[str, Registered[D]]] = field(default_factory=dict)
    snapshot: list[D] | None = None
    entries: list[Registered[D]] | None = None
    version: int = 0


class Registry:
    """Every kind's catalog, for every owner.

    Args:
        on_change: Called (synchronously) after every mutation that changed the
            host-visible catalog. It must not block; the Front uses it to wake
            its coalescing notifier, which reads ``versions`` to see which kinds moved.
        rule: How public names are made (``[supervisor.names]``; the default is
            today's ``mcp__<server>__<name>``, which the Supervisor replaces with the settings').
    """

    def __init__(self, *, on_change: Callable[[], None] | None = None, rule: NameRule = MCP_RULE) -> None:
        self.rule = rule
        self._tools: _Catalog[types.Tool] = _Catalog()
        self._prompts: _Catalog[types.Prompt] = _Catalog()
        self._resources: _Catalog[types.Resource] = _Catalog()
        self._templates: _Catalog[types.ResourceTemplate] = _Catalog()
        self._catalogs: dict[Kind, _Catalog[Any]] = {
            "tools": self._tools,
            "prompts": self._prompts,
            "resources": self._resources,
            "templates": self._templates,
        }
        self._on_change = on_change
        self.version = 0
        """Bumped on every host-visible change of any kind."""

    # -- reads -----------------------------------------------------------------

    @property
    def versions(self) -> dict[Kind, int]:
        """Each kind's own change counter."""
        return {kind: self._catalog(kind).version for kind in ALL_KINDS}

    def kind_version(self, kind: Kind) -> int:
        """``versions[kind]`` without building the dict (a view reads it on every routed call)."""
        return self._catalog(kind).version

    def lookup(self, public_name: str) -> RegisteredTool | None:
        """Return the tool registered under ``public_name``, if any."""
        return self._tools.by_key.get(public_name)

    def lookup_prompt(self, public_name: str) -> RegisteredPrompt | None:
        """Return the prompt registered under ``public_name``, if any."""
        return self._prompts.by_key.get(public_name)

    def resource_owner(self, uri: str) -> str | None:
        """Which server listed ``uri``, if any."""
        held = self._resources.by_key.get(uri)
        return held.owner if held is not None else None

    def template_entries(self) -> list[Registered[types.ResourceTemplate]]:
        """Every registered template with its owner, in key order."""
        return [self._templates.by_key[key] for key in sorted(self._templates.by_key)]

    def tools(self) -> list[types.Tool]:
        """The host-facing tools, sorted by public name (shared; callers must not mutate)."""
        return self._listing(self._tools)

    def tool_entries(self) -> list[RegisteredTool]:
        """The registered tools, sorted by public name, as ``tools`` lists them (shared; callers must not mutate)."""
        return self.entries("tools")

    def entries(self, kind: Kind) -> list[Registered[Any]]:
        """Every entry of ``kind``, sorted by key (shared, kept until the kind changes; callers must not mutate)."""
        catalog = self._catalog(kind)
        if catalog.entries is None:
            catalog.entries = [catalog.by_key[key] for key in sorted(catalog.by_key)]
        return catalog.entries

    def prompts(self) -> list[types.Prompt]:
        """The host-facing prompts, sorted by public name (shared; callers must not mutate)."""
        return self._listing(self._prompts)

    def resources(self) -> list[types.Resource]:
        """Every listed resource, sorted by URI (shared; callers must not mutate)."""
        return self._listing(self._resources)

    def templates(self) -> list[types.ResourceTemplate]:
        """Every resource template, sorted by (owner, template) (shared; callers must not mutate)."""
        return self._listing(self._templates)

    def owned_by(self, owner: str, kind: Kind = "tools") -> list[Registered[Any]]:
        """Every entry of ``kind`` that ``owner`` holds, sorted by key."""
        held: dict[str, Registered[Any]] = dict(self._catalog(kind).by_owner.get(owner, {}))
        return [held[key] for key in sorted(held)]

    def count(self, owner: str, kind: Kind) -> int:
        """How many entries of ``kind`` ``owner`` holds."""
        return len(self._catalog(kind).by_owner.get(owner, {}))

    def __len__(self) -> int:
        return len(self._tools.by_key)

    # -- mutations (synchronous: each is atomic under trio) ---------------------

    def swap(
        self,
        owner: str,
        listing: Sequence[types.Tool],
        *,
        namespace: bool = True,
        transforms: Mapping[str, ToolTransform] | None = None,
    ) -> SwapResult:
        """Replace ``owner``'s tools with ``listing`` (raw upstream definitions); all or nothing.

        Raises:
            DuplicateName: ``listing`` names one raw tool twice; nothing changed.
        """
        return self.swap_many(owner, {"tools": listing}, namespace=namespace, transforms=transforms)["tools"]

    def swap_many(
        self,
        owner: str,
        listings: Mapping[Kind, Sequence[Definition]],
        *,
        namespace: bool = True,
        transforms: Mapping[str, ToolTransform] | None = None,
    ) -> dict[Kind, SwapResult]:
        """Replace ``owner``'s entries of every kind in ``listings`` in one atomic step.

        Each kind is all or nothing on its own: a kind with a conflict keeps its
        previous generation, the others swap. Kinds not in ``listings`` are untouched.
        ``transforms`` (by raw tool name) give tools their public name override
        and their transform; a tool whose transform is disabled is left out.

        Raises:
            DuplicateName: A tool or prompt listing names one raw name twice; nothing changed.
        """
        built = {
            kind: self._build(owner, kind, listing, namespace=namespace, transforms=transforms or {}, rule=self.rule)
            for kind, listing in listings.items()
        }
        results: dict[Kind, SwapResult] = {}
        changed = False
        for kind, new in built.items():
            results[kind] = result = self._swap_kind(self._catalog(kind), owner, new)
            changed = changed or result.changed
        if changed:
            self._notify()
        return results

    def withdraw(self, owner: str) -> bool:
        """Remove every entry ``owner`` holds, of every kind; return whether anything was removed."""
        changed = False
        for kind in ALL_KINDS:
            changed = self._swap_kind(self._catalog(kind), owner, {}).changed or changed
        if changed:
            self._notify()
        return changed

    def claim(self, owner: str, public_name: str, definition: types.Tool) -> None:
        """Register one tool under an exact public name for ``owner`` (reserved names).

        Raises:
            RegistryConflict: Someone else holds the name.
        """
        catalog = self._tools
        held = catalog.by_key.get(public_name)
        if held is not None and held.owner != owner:
            raise RegistryConflict(public_name, held.owner, owner)
        entry = Registered(public_name, owner, definition.name, definition.model_copy())
        catalog.by_key[public_name] = entry
        catalog.by_owner.setdefault(owner, {})[public_name] = entry
        self._touched(catalog)
        self._notify()

    # -- internals ---------------------------------------------------------------

    def _catalog(self, kind: Kind) -> _Catalog[Any]:
        return self._catalogs[kind]

    @staticmethod
    def _listing(catalog: _Catalog[D]) -> list[D]:
        if catalog.snapshot is None:
            catalog.snapshot = [catalog.by_key[key].definition for key in sorted(catalog.by_key)]
        return catalog.snapshot

    def _swap_kind(self, catalog: _Catalog[Any], owner: str, new: dict[str, Registered[Any]]) -> SwapResult:
        conflicts = tuple(
            RegistryConflict(key, held.owner, owner)
            for key, held in ((key, catalog.by_key.get(key)) for key in new)
            if held is not None and held.owner != owner
        )
        if conflicts:
            return SwapResult(changed=False, conflicts=conflicts)
        old = catalog.by_owner.get(owner, {})
        if old == new:
            return SwapResult(changed=False)
        for key in old:
            del catalog.by_key[key]
        catalog.by_key.update(new)
        if new:
            catalog.by_owner[owner] = new
        else:
            catalog.by_owner.pop(owner, None)
        self._touched(catalog)
        return SwapResult(changed=True)

    def _touched(self, catalog: _Catalog[Any]) -> None:
        catalog.snapshot = catalog.entries = None
        catalog.version += 1
        self.version += 1

    def _notify(self) -> None:
        if self._on_change is not None:
            self._on_change()

    @staticmethod
    def _build(
        owner: str,
        kind: Kind,
        listing: Iterable[Definition],
        *,
        namespace: bool,
        transforms: Mapping[str, ToolTransform],
        rule: NameRule,
    ) -> dict[str, Registered[Any]]:
        generation: dict[str, Registered[Any]] = {}
        # Handed over (OwnedListing): kept as it is; otherwise never share with the caller.
        deep = not isinstance(listing, OwnedListing)
        if kind in ("resources", "templates"):
            for item in listing:
                raw = str(item.uri) if isinstance(item, types.Resource) else str(getattr(item, "uri_template", ""))
                key = raw if kind == "resources" else f"{owner}\0{raw}"
                # A URI listed twice by one server is the same resource; keep the first.
                if key not in generation:
                    generation[key] = Registered(key, owner, raw, item.model_copy(deep=True) if deep else item)
            return generation
        seen_raw: set[str] = set()
        noun = kind[:-1]
        for item in listing:
            raw = getattr(item, "name", "")
            if raw in seen_raw:
                raise DuplicateName(f"server {owner!r} listed the {noun} {raw!r} more than once")
            seen_raw.add(raw)
            transform = transforms.get(raw) if kind == "tools" else None
            if transform is not None and not transform.enabled:
                continue
            public = public_name_of(owner, raw, namespace=namespace, transform=transform, rule=rule)
            if public in generation:
                # A hash collision, two raw names that sanitize alike, or an override naming another tool.
                raise DuplicateName(f"server {owner!r}: {kind} collide on the public name {public!r}")
            source = item.model_copy(deep=True) if deep else item
            generation[public] = Registered(public, owner, raw, source, transform=transform)
        return generation


def public_name_of(
    owner: str, raw: str, *, namespace: bool, transform: ToolTransform | None = None, rule: NameRule = MCP_RULE
) -> str:
    """The public name ``raw`` of ``owner`` is listed under (a tool's ``name`` override applied)."""
    shown = transform.public_name if transform is not None and transform.public_name else raw
    return public_name(owner, shown, namespace=namespace, rule=rule)
