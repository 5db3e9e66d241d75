"""A readable diff of a pinned and a current definition (``pins diff``, issue 27).

Each side is rendered as a short document, one heading per field in a fixed
order, then compared as a unified diff:

* ``name``, ``title`` and ``description`` as text, a line per line;
* ``inputSchema``, ``outputSchema``, ``annotations`` and ``arguments`` (and any
  other field) as JSON, indent 2, keys sorted, so only real changes show.

Every hunk header ends with the field its first change is in, as git names
a function (``@@ -2,7 +2,7 @@ description``).

What a person reads must be what the model reads: invisible and control
characters are shown (:func:`~supervisor.pins.hidden.reveal`), so a tag
payload reads ``<tags "IGNORE ALL">`` and an ANSI escape cannot repaint the
terminal.

Pure functions; nothing here awaits.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Final

from supervisor.pins.fingerprint import Definition
from supervisor.pins.hidden import reveal
from supervisor.pins.judge import PinKey

TEXT_FIELDS: Final = ("name", "title", "description")
JSON_FIELDS: Final = ("inputSchema", "outputSchema", "annotations", "arguments")
CONTEXT_LINES: Final = 3


def render_diff(key: PinKey, pinned: Definition | None, current: Definition | None) -> str:
    """The unified diff from ``pinned`` to ``current`` of ``key``; empty if they render the same.

    Args:
        key: ``(kind, raw_name)``: named in the headers as the server calls it.
        pinned: The pinned definition; None if there is no record (a new tool).
        current: The listed definition; None if the server no longer lists it.
    """
    before, after = _document(pinned), _document(current)
    if before == after:
        return ""
    kind, name = key
    label = f"{kind} {json.dumps(reveal(name), ensure_ascii=False)}"
    lines = [
        f"--- {label} (pinned)" if pinned is not None else f"--- {label} (pinned: none)",
        f"+++ {label} (current)" if current is not None else f"+++ {label} (current: not listed)",
    ]
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        first, last = group[0], group[-1]
        old_start, old_end, new_start, new_end = first[1], last[2], first[3], last[4]
        change = next(opcode for opcode in group if opcode[0] != "equal")
        section = _section(before, change[1]) if change[1] < change[2] else _section(after, change[3])
        header = f"@@ -{_range(old_start, old_end)} +{_range(new_start, new_end)} @@"
        lines.append(f"{header} {section}" if section else header)
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend(f" {line}" for line in before[i1:i2])
                continue
            lines.extend(f"-{line}" for line in before[i1:i2])
            lines.extend(f"+{line}" for line in after[j1:j2])
    return "\n".join(lines) + "\n"


def _document(definition: Definition | None) -> list[str]:
    """One side as lines: ``field:`` headings, their content indented by two spaces."""
    if definition is None:
        return []
    lines: list[str] = []
    others = sorted(set(definition) - set(TEXT_FIELDS) - set(JSON_FIELDS))
    for field in (*TEXT_FIELDS, *JSON_FIELDS, *others):
        if field not in definition:
            continue
        lines.append(f"{reveal(field)}:")
        lines.extend(f"  {line}" for line in _content(field, definition[field]))
    return lines


def _content(field: str, value: Any) -> list[str]:
    if field in TEXT_FIELDS and isinstance(value, str):
        return reveal(value).splitlines() or [""]
    return reveal(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)).splitlines()


def _section(document: list[str], index: int) -> str:
    """The field heading at or above line ``index`` of ``document`` (empty if there is none)."""
    for line in reversed(document[: index + 1]):
        if not line.startswith(" ") and line.endswith(":"):
            return line[:-1]
    return ""


def _range(start: int, end: int) -> str:
    """A unified-diff range (``difflib``'s rules: 1-based, an empty range names the line before)."""
    length = end - start
    if length == 1:
        return f"{start + 1}"
    if length == 0:
        return f"{start},0"
    return f"{start + 1},{length}"


__all__ = ["JSON_FIELDS", "TEXT_FIELDS", "render_diff"]
