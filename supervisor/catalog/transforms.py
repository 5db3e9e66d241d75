"""What a tool transform does: to the definition hosts see, and to the arguments of every call (issue 26).

A ``ToolTransform`` is made once per server generation from its settings
(``config.transforms.ToolTransformSettings``) and kept on each Registry entry
it applies to. Two sides, and what the host is shown is what is called (I16):

* ``shape`` makes the host-facing definition from the upstream's: title,
  description, annotations and ``_meta`` merged over the upstream's (the
  transform's keys win, the upstream's others pass through untouched), and the
  input schema with arguments renamed, re-described, defaulted or removed
  (hidden). The upstream's definition itself is never changed: it may be
  shared with the response cache.
* ``upstream_arguments`` turns the host's arguments back into the upstream's:
  renamed arguments get their raw names, a defaulted argument the host left
  out gets its default, and a hidden argument always gets its default, whatever
  the host sent under that name.

Every call path (SDK, fast path, splice) calls ``upstream_arguments`` through
``Registered.upstream_arguments``; a transform that leaves arguments alone
(``touches_arguments`` false) costs a call nothing, and the splice still
forwards the host's argument bytes as they came.

Pure functions over plain data; nothing here awaits.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from supervisor.config.transforms import ToolTransformSettings


@dataclass(frozen=True, slots=True)
class ToolTransform:
    """One tool's transform, compiled from its settings table."""

    settings: ToolTransformSettings
    renames: Mapping[str, str]
    """Public argument name → raw argument name, for renamed arguments."""
    injected: Mapping[str, Any]
    """Raw argument name → value, for hidden arguments: set on every call."""
    defaults: Mapping[str, Any]
    """Raw argument name → value, for shown arguments with a default: set when the host leaves them out."""

    @classmethod
    def of(cls, settings: ToolTransformSettings) -> ToolTransform:
        arguments = settings.arguments
        return cls(
            settings,
            renames={a.rename: raw for raw, a in arguments.items() if a.rename is not None and not a.hide},
            injected={raw: a.default for raw, a in arguments.items() if a.hide},
            defaults={raw: a.default for raw, a in arguments.items() if a.has_default and not a.hide},
        )

    @property
    def public_name(self) -> str | None:
        """The override of the tool part of the public name, if any."""
        return self.settings.name

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @property
    def touches_arguments(self) -> bool:
        return bool(self.renames or self.injected or self.defaults)

    def missing_arguments(self, tool: types.Tool) -> list[str]:
        """Transformed argument names the tool's input schema does not have (for the warning)."""
        properties = tool.input_schema.get("properties")
        known = properties if isinstance(properties, dict) else {}
        return sorted(raw for raw in self.settings.arguments if raw not in known)

    def clashing_renames(self, tool: types.Tool) -> list[str]:
        """Renames onto the name of another argument the schema keeps (that argument would be shadowed)."""
        properties = tool.input_schema.get("properties")
        kept = {
            name for name in (properties if isinstance(properties, dict) else {}) if name not in self.settings.arguments
        }
        return sorted(public for public in self.renames if public in kept)

    def shape(self, tool: types.Tool) -> types.Tool:
        """The host-facing definition of ``tool`` (a new model; ``tool`` is untouched)."""
        settings = self.settings
        update: dict[str, Any] = {}
        if settings.title is not None:
            update["title"] = settings.title
        if settings.description is not None:
            update["description"] = settings.description
        if settings.annotations:
            current = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
            update["annotations"] = types.ToolAnnotations.model_validate({**current, **settings.annotations})
        if settings.meta:
            update["meta"] = {**(tool.meta or {}), **settings.meta}
        if settings.arguments:
            update["input_schema"] = self._schema(tool.input_schema)
        return tool.model_copy(update=update)

    def _schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        shaped = copy.deepcopy(schema)
        properties = shaped.get("properties")
        if not isinstance(properties, dict):
            return shaped
        required = shaped.get("required")
        required = list(required) if isinstance(required, list) else None
        renamed: dict[str, Any] = {}
        for raw, prop in properties.items():
            argument = self.settings.arguments.get(raw)
            if argument is None:
                renamed[raw] = prop
                continue
            if argument.hide:
                if required is not None and raw in required:
                    required.remove(raw)
                continue
            shaped_prop = dict(prop) if isinstance(prop, dict) else {}
            if argument.description is not None:
                shaped_prop["description"] = argument.description
            if argument.has_default:
                shaped_prop["default"] = argument.default
                if required is not None and raw in required:
                    required.remove(raw)
            public = argument.rename or raw
            if required is not None and public != raw and raw in required:
                required[required.index(raw)] = public
            renamed[public] = shaped_prop
        shaped["properties"] = renamed
        if required is not None:
            shaped["required"] = required
        return shaped

    def upstream_arguments(self, arguments: dict[str, Any] | None) -> dict[str, Any] | None:
        """The host's ``arguments`` as the upstream must get them (a new dict; the host's is untouched)."""
        if not self.touches_arguments:
            return arguments
        given = arguments or {}
        out = {self.renames.get(name, name): value for name, value in given.items()}
        for raw, value in self.defaults.items():
            out.setdefault(raw, copy.deepcopy(value))
        for raw, value in self.injected.items():
            out[raw] = copy.deepcopy(value)
        return out


def compile_transforms(tables: Mapping[str, ToolTransformSettings]) -> dict[str, ToolTransform]:
    """Each raw tool name's transform, for ``Registry.swap_many``."""
    return {raw: ToolTransform.of(table) for raw, table in tables.items()}


def transform_warnings(transforms: Mapping[str, ToolTransform], listed: Mapping[str, types.Tool]) -> list[str]:
    """What of ``transforms`` the listing ``listed`` (raw name → tool) leaves unmatched, one phrase each."""
    warnings = []
    for raw, transform in sorted(transforms.items()):
        tool = listed.get(raw)
        if tool is None:
            if transform.enabled:
                warnings.append(f"tools.{raw}: the server lists no tool {raw!r}")
            continue
        for argument in transform.missing_arguments(tool):
            warnings.append(f"tools.{raw}.arguments.{argument}: the tool has no argument {argument!r}")
        for public in transform.clashing_renames(tool):
            source = transform.renames[public]
            warnings.append(f"tools.{raw}.arguments.{source}.rename: the tool already has an argument {public!r}")
    return warnings
