"""Where each member of a JSON object lies in its text, so a large message can be re-framed without re-encoding.

The wire splice (``wire_splice``) must change a message's envelope (its id, the
``_meta`` stamp) and forward the rest. For a 1 MB tool result, ``json.dumps``
of the whole message costs more than everything else the sidecar does for the
call; copying the text of the members it does not change costs a slice.
``object_spans`` decodes an object's members with the stdlib's C scanner (so
the values are checked and available) and records where each one's text lies;
``join_members`` writes an object back from those slices and a few new values.

Pure functions; nothing here awaits.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

_DECODER: Final = json.JSONDecoder()
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")

Span = tuple[Any, int, int]
"""A member's decoded value and the start and end of its text."""


def _skip(text: str, index: int) -> int:
    match = _WHITESPACE.match(text, index)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def object_spans(text: str, index: int = 0, *, descend: str | None = None) -> tuple[dict[str, Span], int]:
    """The members of the JSON object at ``text[index]`` and the index just past it.

    The member named ``descend`` (if any) is not decoded as a whole: its value
    in the returned span is its own members (``object_spans`` of it), so a large
    nested object is scanned once.

    Raises:
        ValueError: The text there is not a JSON object (or ``descend`` names a non-object).
    """
    index = _skip(text, index)
    if text[index : index + 1] != "{":
        raise ValueError(f"expected an object at {index}")
    members: dict[str, Span] = {}
    index = _skip(text, index + 1)
    if text[index : index + 1] == "}":
        return members, index + 1
    while True:
        if text[index : index + 1] != '"':
            raise ValueError(f"expected a key at {index}")
        key, index = _DECODER.raw_decode(text, index)
        index = _skip(text, index)
        if text[index : index + 1] != ":":
            raise ValueError(f"expected ':' at {index}")
        start = _skip(text, index + 1)
        value: Any
        if key == descend:
            value, end = object_spans(text, start)
        else:
            value, end = _DECODER.raw_decode(text, start)
        members[key] = (value, start, end)
        index = _skip(text, end)
        match text[index : index + 1]:
            case ",":
                index = _skip(text, index + 1)
            case "}":
                return members, index + 1
            case _:
                raise ValueError(f"expected ',' or '}}' at {index}")


def whole_object_spans(text: str, *, descend: str | None = None) -> dict[str, Span]:
    """``object_spans`` of a text that must be one JSON object and nothing else (bar whitespace)."""
    members, end = object_spans(text, 0, descend=descend)
    if _skip(text, end) != len(text):
        raise ValueError("extra data after the object")
    return members


def join_members(text: str, members: dict[str, Span], replace: dict[str, Any]) -> str:
    """The object of ``members`` (slices of ``text``) with ``replace``'s values (encoded) instead or added."""
    parts = [
        json.dumps(key) + ":" + (json.dumps(replace[key]) if key in replace else text[start:end])
        for key, (_, start, end) in members.items()
    ]
    parts.extend(json.dumps(key) + ":" + json.dumps(value) for key, value in replace.items() if key not in members)
    return "{" + ",".join(parts) + "}"
