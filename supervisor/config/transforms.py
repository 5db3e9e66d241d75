"""The ``[mcp_servers.<s>.tools.<raw_name>]`` tables: how one upstream tool is shown to hosts (issue 26).

Pure settings: what a table may say and what it must not (a hidden argument
needs a default, an override name obeys the public-name rules). What a
transform does to a definition and to a call is ``catalog.transforms``; it
needs the SDK's types, which this layer never imports.

Frozen models, validated once by the loader; nothing here awaits.
"""

from __future__ import annotations

import re
from typing import Any, Final, Self

from pydantic import BaseModel, Field, field_validator, model_validator

from supervisor.config.base import STRICT

TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What an override ``name`` may be: the characters a public name keeps (DESIGN §3.3)."""
ANNOTATION_KEYS: Final = {
    "title": str,
    "readOnlyHint": bool,
    "destructiveHint": bool,
    "idempotentHint": bool,
    "openWorldHint": bool,
}
"""The MCP tool annotations and their types: what ``annotations`` may set."""


class ArgumentTransform(BaseModel):
    """``[mcp_servers.<s>.tools.<t>.arguments.<arg>]``: one argument as hosts see it.

    ``default`` is any TOML value; whether it was given at all is
    ``has_default`` (a default of ``false`` or ``0`` is still a default).
    """

    model_config = STRICT

    rename: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str | None = None
    default: Any = None
    hide: bool = False

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set


class ToolTransformSettings(BaseModel):
    """``[mcp_servers.<s>.tools.<raw_name>]``: the public name, texts, hints and arguments of one tool."""

    model_config = STRICT

    name: str | None = None
    """The tool part of the public name (``mcp__<server>__<name>``); the raw name still goes upstream."""
    title: str | None = None
    description: str | None = None
    enabled: bool = True
    annotations: dict[str, Any] = {}
    """Merged over the upstream's annotations (these keys win)."""
    meta: dict[str, Any] = {}
    """Merged over the upstream's ``_meta`` (these keys win), e.g. ``"anthropic/alwaysLoad" = true``."""
    arguments: dict[str, ArgumentTransform] = {}

    @field_validator("name")
    @classmethod
    def _public_characters(cls, name: str | None) -> str | None:
        if name is not None and not TOOL_NAME.fullmatch(name):
            raise ValueError("name must be 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'")
        return name

    @field_validator("annotations")
    @classmethod
    def _known_annotations(cls, annotations: dict[str, Any]) -> dict[str, Any]:
        for key, value in annotations.items():
            expected = ANNOTATION_KEYS.get(key)
            if expected is None:
                raise ValueError(
                    f"annotations.{key} is not an MCP tool annotation; use one of {', '.join(ANNOTATION_KEYS)}"
                )
            if not isinstance(value, expected):
                raise ValueError(f"annotations.{key} must be a {expected.__name__}")
        return annotations

    @model_validator(mode="after")
    def _arguments_fit(self) -> Self:
        public: dict[str, str] = {}
        for raw, argument in self.arguments.items():
            if argument.hide and not argument.has_default:
                raise ValueError(
                    f"arguments.{raw}: hide = true needs a default (a hidden argument is injected on every call); "
                    f"set arguments.{raw}.default"
                )
            if argument.hide and (argument.rename is not None or argument.description is not None):
                raise ValueError(f"arguments.{raw}: a hidden argument has no rename or description; remove them")
            shown = argument.rename or raw
            if not argument.hide and shown in public:
                raise ValueError(f"arguments.{raw} and arguments.{public[shown]} would both be called {shown!r}")
            public[shown] = raw
        return self

    @property
    def touches_arguments(self) -> bool:
        """Whether a call's arguments change on their way upstream (renames, hidden or defaulted arguments)."""
        return any(a.rename is not None or a.hide or a.has_default for a in self.arguments.values())
