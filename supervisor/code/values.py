"""What a program returns, and what it passes a tool, as JSON: every value the sandbox can make (issue 58).

The sandbox hands back Python objects JSON has no form for; each gets one:

| value | JSON |
|---|---|
| ``tuple``, ``list``, ``set``, ``frozenset`` | an array (a set's order as the sandbox gave it) |
| ``dict`` | an object, its keys as text (``str(key)`` for a key that is not) |
| ``float`` NaN and infinities | the text ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (JSON has no number for them) |
| ``bytes`` | its text when it is UTF-8, else ``"base64:"`` and its base64 |
| ``datetime``, ``date``, ``time`` | ISO 8601 text |
| ``timedelta`` | its seconds, a number |
| a class instance made in the sandbox (``MontyClassProxy``) | an object of its attributes |
| anything else | its ``repr`` |

Nesting deeper than ``MAX_DEPTH`` becomes ``repr`` text too (a cycle cannot
cross the sandbox's boundary, but a very deep value can).

``encode`` bounds the size: a value whose JSON passes ``max_bytes`` is cut
there, with a note that says how big it was and which limit cut it. A program's
text result is given as it is, not as a JSON string (a file's lines stay lines
for the model, unescaped).

Pure functions, no I/O.
"""

from __future__ import annotations

import base64
import datetime
import json
import math
from dataclasses import dataclass
from typing import Any, Final

MAX_DEPTH: Final = 64
_FLOAT_NAMES: Final = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON data (the module's table)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _FLOAT_NAMES[repr(value)]
    if depth >= MAX_DEPTH:
        return repr(value)
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {key if isinstance(key, str) else str(plain(key, depth + 1)): plain(item, depth + 1)
                for key, item in value.items()}  # fmt: skip
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(value).decode()
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    attributes = getattr(value, "attributes", None)  # MontyClassProxy, without importing the engine
    if isinstance(attributes, dict) and isinstance(getattr(value, "name", None), str):
        return plain(attributes, depth + 1)
    return repr(value)


@dataclass(frozen=True, slots=True)
class Encoded:
    """A value as the model reads it, and whether it was cut."""

    text: str
    size: int
    """The whole text's size in bytes (UTF-8), before any cut."""
    cut: bool


def encode(value: Any, max_bytes: int, *, limit_name: str = "max_result_bytes") -> Encoded:
    """``value`` as text for the model: a ``str`` as it is, anything else as JSON; cut at ``max_bytes`` with a note."""
    text = value if isinstance(value, str) else json.dumps(plain(value), ensure_ascii=False)
    data = text.encode()
    if len(data) <= max_bytes:
        return Encoded(text, len(data), cut=False)
    kept = data[:max_bytes].decode(errors="ignore")
    note = f"\n[cut at {max_bytes:,} of {len(data):,} bytes by {limit_name}: return less, or raise the limit]"
    return Encoded(kept + note, len(data), cut=True)
