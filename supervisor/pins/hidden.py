"""Invisible and bidirectional control characters in a definition (issue 27, DESIGN I17).

A person reviewing a tool reads its description; the model reads every code
point of it. Characters a terminal or a browser does not show can carry text
for the model alone ("tool poisoning"), or reorder what the reviewer sees.
Flagged, by kind:

==========  =================================================================
kind        code points
==========  =================================================================
tag         U+E0000-U+E007F (Unicode tags: invisible ASCII, U+E0041 is "A")
zero-width  U+200B-U+200D, U+2060-U+2064, U+FEFF, U+180E
bidi        U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C
==========  =================================================================

Every string is scanned, keys included (a property name is model text too).
Other control characters (C0/C1, ANSI escapes) are not flagged: JSON escapes
them on the wire, and :func:`reveal` makes them visible where a person reads.

Cost: :func:`contains_hidden` asks ``str.isascii()`` first (every flagged
character is outside ASCII) and runs one compiled character class only over a
text that is not ASCII; only a definition that matches is walked in Python to
say where. A clean ASCII 5,000-tool listing costs well under a millisecond.

Pure functions; nothing here awaits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from supervisor.pins.fingerprint import Definition

HiddenKind = Literal["tag", "zero-width", "bidi"]

_TAG: Final = "\U000e0000-\U000e007f"
_ZERO_WIDTH: Final = "\u200b-\u200d\u2060-\u2064\ufeff\u180e"
_BIDI: Final = "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
HIDDEN: Final = re.compile(f"[{_TAG}{_ZERO_WIDTH}{_BIDI}]")
"""Any flagged character."""
_KIND_TAG: Final = re.compile(f"[{_TAG}]")
_KIND_ZERO_WIDTH: Final = re.compile(f"[{_ZERO_WIDTH}]")
# What reveal() escapes besides the flagged set: C0 controls but tab and newline, DEL, C1 controls.
_REVEAL: Final = re.compile(f"[{_TAG}{_ZERO_WIDTH}{_BIDI}\x00-\x08\x0b-\x1f\x7f-\x9f]+")


@dataclass(frozen=True, slots=True)
class HiddenCharacter:
    """One flagged character.

    Attributes:
        path: Where it is, as dotted keys and ``[i]`` indices:
            ``description``, ``inputSchema.properties.org.description``,
            ``arguments[0].name``. Hidden characters in a key on the path are
            shown escaped (:func:`reveal`), so the path itself is readable.
        code_point: The character, as an integer (``0xE0049``).
        kind: ``tag``, ``zero-width`` or ``bidi``.
        offset: Its index in the string.
        in_key: Whether the string is the last key of ``path`` rather than the value there.
    """

    path: str
    code_point: int
    kind: HiddenKind
    offset: int
    in_key: bool = False

    @property
    def label(self) -> str:
        """``U+E0049``."""
        return f"U+{self.code_point:04X}"


def kind_of(character: str) -> HiddenKind | None:
    """The flagged kind of one character, None if it is not flagged."""
    if _KIND_TAG.match(character):
        return "tag"
    if _KIND_ZERO_WIDTH.match(character):
        return "zero-width"
    if HIDDEN.match(character):
        return "bidi"
    return None


def contains_hidden(text: str) -> bool:
    """Whether ``text`` (a string, or a definition's canonical JSON) holds any flagged character."""
    # Every flagged character is outside ASCII, and ``isascii`` is a C pass over a compact
    # string, far faster than the regex (which an astral range slows to a crawl).
    return not text.isascii() and HIDDEN.search(text) is not None


def hidden_characters(definition: Definition) -> tuple[HiddenCharacter, ...]:
    """Every flagged character in the strings (keys and values) of ``definition``, in document order."""
    if not contains_hidden(json.dumps(definition, ensure_ascii=False)):
        return ()
    return tuple(_walk(definition, ""))


def reveal(text: str) -> str:
    """``text`` with every invisible or control character shown: for a person to read (diffs, status).

    A run of tag characters becomes ``<tags "IGNORE ALL">`` (a tag is an ASCII
    character plus 0xE0000); any other becomes ``<U+200B>``. Tab and newline
    are kept.
    """
    return _REVEAL.sub(_revealed, text)


def _revealed(match: re.Match[str]) -> str:
    shown: list[str] = []
    tags: list[str] = []
    for character in match.group():
        code = ord(character)
        if 0xE0020 <= code <= 0xE007E:
            tags.append(chr(code - 0xE0000))
            continue
        if tags:
            shown.append(f"<tags {json.dumps(''.join(tags))}>")
            tags.clear()
        shown.append(f"<U+{code:04X}>")
    if tags:
        shown.append(f"<tags {json.dumps(''.join(tags))}>")
    return "".join(shown)


def _walk(value: Any, path: str) -> Iterator[HiddenCharacter]:
    if isinstance(value, str):
        yield from _in_string(value, path, in_key=False)
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{reveal(key)}" if path else reveal(key)
            yield from _in_string(key, child, in_key=True)
            yield from _walk(item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")


def _in_string(text: str, path: str, *, in_key: bool) -> Iterator[HiddenCharacter]:
    if text.isascii():
        return
    for match in HIDDEN.finditer(text):
        kind = kind_of(match.group())
        assert kind is not None  # HIDDEN is the union of the kinds
        yield HiddenCharacter(path, ord(match.group()), kind, match.start(), in_key)


__all__ = [
    "HIDDEN",
    "HiddenCharacter",
    "HiddenKind",
    "contains_hidden",
    "hidden_characters",
    "kind_of",
    "reveal",
]
