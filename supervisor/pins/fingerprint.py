"""What of a tool or prompt reaches the model, and its fingerprint (issue 27).

A *definition* is the plain JSON object of the fields a host puts into the
model's context:

=========  ==================================================================
tool       ``name``, ``title``, ``description``, ``inputSchema``,
           ``outputSchema``, ``annotations``
prompt     ``name``, ``title``, ``description``, ``arguments``
=========  ==================================================================

Left out on purpose: ``_meta`` (protocol metadata for hosts and SDKs, not model
text; the sidecar's own transforms set keys there), ``icons`` (pixels for a
UI), and a tool's ``execution`` (task support, a protocol capability). A server
changing only those is not a changed definition.

The fingerprint is the SHA-256 (hex) of the definition's canonical JSON: keys
sorted at every depth, no whitespace, non-ASCII kept as UTF-8
(``ensure_ascii=False``). It is stable across runs, processes and machines, and
independent of key order. Values are compared as JSON: ``1`` and ``1.0`` are
different texts and so different fingerprints.

Pure functions; nothing here awaits.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from mcp_types import Prompt, Tool

Definition = dict[str, Any]
"""A JSON object: what of one tool or prompt reaches the model (the wire's camelCase keys)."""

TOOL_FIELDS: Final = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
"""The wire keys of a tool definition."""
PROMPT_FIELDS: Final = ("name", "title", "description", "arguments")
"""The wire keys of a prompt definition."""
# The same, as pydantic field names (``include`` takes those, and a set, not a frozenset).
_TOOL_INCLUDE: Final = {"name", "title", "description", "input_schema", "output_schema", "annotations"}
_PROMPT_INCLUDE: Final = {"name", "title", "description", "arguments"}


def tool_definition(tool: Tool) -> Definition:
    """The fields of ``tool`` that reach the model, as wire JSON (``inputSchema``, not ``input_schema``)."""
    return tool.model_dump(mode="json", by_alias=True, exclude_none=True, include=_TOOL_INCLUDE)


def prompt_definition(prompt: Prompt) -> Definition:
    """The fields of ``prompt`` that reach the model, as wire JSON."""
    return prompt.model_dump(mode="json", by_alias=True, exclude_none=True, include=_PROMPT_INCLUDE)


def canonical_json(definition: Definition) -> str:
    """The one text of ``definition`` that is hashed: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint_of_text(canonical: str) -> str:
    """SHA-256 hex of a :func:`canonical_json` text (for callers that already have the text)."""
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def fingerprint(definition: Definition) -> str:
    """SHA-256 hex of ``definition``'s canonical JSON: equal definitions, equal fingerprints."""
    return fingerprint_of_text(canonical_json(definition))


__all__ = [
    "PROMPT_FIELDS",
    "TOOL_FIELDS",
    "Definition",
    "canonical_json",
    "fingerprint",
    "fingerprint_of_text",
    "prompt_definition",
    "tool_definition",
]
