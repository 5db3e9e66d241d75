"""Where the members of a JSON object lie in its UTF-8 bytes, found without decoding the large ones.

The wire splice (``wire.large``) must read and change a large message's
envelope (its id, the ``_meta`` stamp, the shape of a result) and forward the
rest as it came. For a 1 MB tool result, decoding and re-encoding the big string
costs more than everything else the sidecar does for the call, so
``scan_object`` walks the bytes token by token in Python and skips each string
with ``bytes.find`` (C speed, no copy), while proving what it skips well-formed:

* the line as a whole, once, by ``pydantic_core.from_json`` (the parser the
  SDKs at both ends use): every string's bytes (no control byte, valid escapes,
  strict UTF-8, no lone surrogate) in one pass of compiled code, 0.13 ms for a
  1 MB line where a ``bytes.translate`` pass alone took 0.36 ms (the value it
  builds is dropped);
* the structure (braces, brackets, colons, commas) token by token, numbers by a
  regular expression of the JSON grammar and literals by comparison, so a line
  both accept is one ``json.loads`` accepts too (``from_json`` alone would take
  NaN);
* a string ends at its first quote no backslash precedes (one ``bytes.find``:
  its bytes are not also searched for a backslash, so 1 MB of text is one pass,
  not two); past a quote a backslash precedes, at the first quote an even run
  of backslashes precedes (found quote by quote, each run counted in C, up to
  ``_MAX_QUOTE_HOPS``, then by the stdlib's C ``scanstring`` on the line
  decoded once; offsets in a non-ASCII line are mapped by counting UTF-8
  continuation bytes, left to right, once).

Members of the two levels the splice reads (the message, and its ``params`` or
``result``) are decoded as ``json.loads`` decodes them. A member whose value
ends within ``OPAQUE_BYTES`` (the envelope's ids, names, flags and ``_meta``)
is read and located in one call of ``json.loads``'s own C scanner on that
window of the line (``_small_value``), where walking it took a dozen Python
calls per token; any other is walked, then decoded from its slice, except a
large one the caller never reads, which becomes an empty ``Opaque*``
placeholder of its JSON type (so shape checks such as "``content`` is a list"
still work on it) and is forwarded as its original text.

Whatever the scan cannot prove cheaply raises ``Unproven``: a malformed line,
but also NaN, a duplicate key, whitespace other than spaces where the scan
walks, or more tokens than ``TOKEN_BUDGET``. The caller then decodes the whole line as before, so the
scan never accepts a line that ``json.loads`` would refuse, and what it accepts
it reads as ``json.loads`` would (``tests/wire/test_json_spans.py`` checks both
against mutated lines).

Pure functions; nothing here awaits.
"""

from __future__ import annotations

import json
import re
from _json import make_scanner, scanstring  # the C scanners ``json.decoder`` uses
from collections.abc import Callable
from typing import Any, Final

from pydantic_core import from_json

Span = tuple[Any, int, int]
"""A member's value (decoded, or an ``Opaque*`` placeholder) and the start and end of its text."""

TOKEN_BUDGET: Final = 2048
"""Python-level steps one scan may take; past it the line is decoded whole (``Unproven``)."""
OPAQUE_BYTES: Final = 1024
"""A member the caller does not read is left undecoded (a placeholder) from this length of text on."""

_MAX_QUOTE_HOPS: Final = 32
"""Escaped quotes a string may hold before its end is found by the C scanner instead of quote by quote."""
_FIRST_RUN_CHUNK: Final = 64
"""Bytes before a quote read first while counting the backslashes that escape it; the chunks then double."""
_BACKSLASHES: Final = b"\\" * 65536
"""The longest run of backslashes one chunk is compared with."""
_NOT_CONTINUATION: Final = bytes(range(0x80)) + bytes(range(0xC0, 0x100))
"""Deleting these leaves the UTF-8 continuation bytes: one per character beyond a character's first byte."""
_SPACES: Final = re.compile(rb" *")
_NUMBER: Final = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_LITERALS: Final = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}
_QUOTE, _BACKSLASH, _COMMA, _COLON, _OPEN_OBJECT, _CLOSE_OBJECT, _OPEN_ARRAY, _CLOSE_ARRAY = b'"\\,:{}[]'
"""Byte values (ints), as indexing ``bytes`` gives them; ``bytes.find`` takes them too."""


class Unproven(Exception):
    """The scan could not prove the text well-formed cheaply; decode it whole to know more."""


class OpaqueObject(dict[str, Any]):
    """A large object member that is forwarded as its text and never read: empty, but an object."""


class OpaqueArray(list[Any]):
    """A large array member that is forwarded as its text and never read: empty, but an array."""


class OpaqueString(str):
    """A large string member that is forwarded as its text and never read: empty, but a string."""

    __slots__ = ()


_PLACEHOLDERS: Final = {_OPEN_OBJECT: OpaqueObject, _OPEN_ARRAY: OpaqueArray, _QUOTE: OpaqueString}
_CLOSERS: Final = {_QUOTE: _QUOTE, _OPEN_OBJECT: _CLOSE_OBJECT, _OPEN_ARRAY: _CLOSE_ARRAY}
"""The byte a string, object or array ends with, whatever it holds."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: the walk refuses them, json.loads decides


_SCAN_VALUE: Final[Callable[[str, int], tuple[Any, int]]] = make_scanner(
    json.JSONDecoder(parse_constant=_refuse_constant)  # type: ignore[arg-type]  # typeshed: "context: make_scanner"
)
"""``json.loads``'s own C value scanner: ``(value, end)`` of the value at a character offset of a ``str``."""


class _Scanner:
    """One scan of one line: the bytes, proven well-formed strings at once, and the steps taken so far."""

    __slots__ = ("_ascii", "_mark", "_text", "buf", "steps")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.steps = 0
        self._ascii: bool | None = None
        self._text: str | None = None
        """The line decoded, once one of its strings needs the C scanner to find its end."""
        self._mark = (0, 0)
        """A byte offset the scan has passed and its character offset (non-ASCII lines)."""
        try:
            # Every string's bytes checked in one pass of compiled code: no control byte, valid
            # escapes, strict UTF-8 (no encoded or escaped lone surrogates). It builds the message,
            # 1 MB string and all, faster than a bytes.translate pass over the line looks for controls.
            from_json(buf, cache_strings=False)
        except ValueError as exc:
            raise Unproven(str(exc)) from None

    def step(self) -> None:
        self.steps += 1
        if self.steps > TOKEN_BUDGET:
            raise Unproven("too many tokens")

    def spaces(self, index: int) -> int:
        """Past the spaces at ``index`` (other whitespace, which compact encoders never write, is unproven)."""
        if self.buf[index : index + 1] != b" ":
            return index
        match = _SPACES.match(self.buf, index)
        assert match is not None  # the pattern matches the empty string
        return match.end()

    def expect(self, index: int, byte: int) -> int:
        """Past ``byte`` at ``index`` and the spaces after it."""
        if self.buf[index] != byte:
            raise Unproven(f"expected {chr(byte)!r} at {index}")
        return self.spaces(index + 1)

    def string_end(self, index: int) -> int:
        """Past the string whose opening quote is at ``index``."""
        buf = self.buf
        close = buf.find(_QUOTE, index + 1)
        if close < 0:
            raise Unproven("an unterminated string")
        if buf[close - 1] != _BACKSLASH:
            return close + 1  # a quote no backslash precedes closes it; the line check covered its bytes
        return self._escaped_string_end(index)

    def _escaped_string_end(self, index: int) -> int:
        """Past the string at ``index``, whose escapes the line check proved valid: only its end is sought."""
        buf, start = self.buf, index + 1
        for _ in range(_MAX_QUOTE_HOPS):
            close = buf.find(_QUOTE, start)
            if close < 0:
                raise Unproven("an unterminated string")
            if _backslashes_before(buf, close, start) % 2 == 0:
                return close + 1
            start = close + 1
        return self._scanned_string_end(index)

    def _scanned_string_end(self, index: int) -> int:
        """Past the string at ``index``, by the C scanner on the line decoded once (many escaped quotes)."""
        if self._ascii is None:
            self._ascii = self.buf.isascii()
        if self._text is None:
            self._text = self.buf.decode()
        char_index = self._char_index(index)
        try:
            char_end = int(scanstring(self._text, char_index + 1, True)[1])
        except ValueError as exc:  # cannot happen after the line check; unproven all the same
            raise Unproven(str(exc)) from None
        if self._ascii:  # byte and character offsets agree
            return char_end
        end = index + len(self._text[char_index:char_end].encode())
        self._mark = (end, char_end)
        return end

    def _char_index(self, index: int) -> int:
        """The character offset of byte ``index`` of a line whose scan has passed ``_mark`` (so counted once)."""
        if self._ascii:
            return index
        mark_byte, mark_char = self._mark
        continuations = len(self.buf[mark_byte:index].translate(None, _NOT_CONTINUATION))
        self._mark = (index, mark_char + index - mark_byte - continuations)
        return self._mark[1]

    def value_end(self, index: int) -> int:
        """Past the value at ``index`` (no spaces before it)."""
        self.step()
        buf = self.buf
        first = buf[index]
        if first == _QUOTE:
            return self.string_end(index)
        if first == _OPEN_OBJECT:
            return self._object_end(index)
        if first == _OPEN_ARRAY:
            return self._array_end(index)
        literal = _LITERALS.get(first)
        if literal is not None:
            if not buf.startswith(literal, index):
                raise Unproven(f"not a literal at {index}")
            return index + len(literal)
        number = _NUMBER.match(buf, index)
        if number is None:
            raise Unproven(f"not a value at {index}")  # NaN and Infinity too: json.loads decides those
        return number.end()

    def _object_end(self, index: int) -> int:
        index = self.spaces(index + 1)
        if self.buf[index] == _CLOSE_OBJECT:
            return index + 1
        while True:
            self.step()
            if self.buf[index] != _QUOTE:
                raise Unproven(f"expected a key at {index}")
            index = self.expect(self.spaces(self.string_end(index)), _COLON)
            index = self.spaces(self.value_end(index))
            if self.buf[index] == _CLOSE_OBJECT:
                return index + 1
            index = self.expect(index, _COMMA)

    def _array_end(self, index: int) -> int:
        index = self.spaces(index + 1)
        if self.buf[index] == _CLOSE_ARRAY:
            return index + 1
        while True:
            index = self.spaces(self.value_end(index))
            if self.buf[index] == _CLOSE_ARRAY:
                return index + 1
            index = self.expect(index, _COMMA)

    def members(
        self, index: int, *, descend: str | None = None, read: frozenset[str] | None = None
    ) -> tuple[dict[str, Span], int]:
        """The members of the object at ``index`` and the index past it.

        ``descend``: that member's value is its own ``members``, where a member
        not named in ``read`` whose text is at least ``OPAQUE_BYTES`` long is a
        placeholder instead of its decoded value. Without ``descend``, ``read``
        applies here.
        """
        buf = self.buf
        if buf[index] != _OPEN_OBJECT:
            raise Unproven(f"expected an object at {index}")
        found: dict[str, Span] = {}
        index = self.spaces(index + 1)
        if buf[index] == _CLOSE_OBJECT:
            return found, index + 1
        while True:
            self.step()
            if buf[index] != _QUOTE:
                raise Unproven(f"expected a key at {index}")
            key_end = self.string_end(index)
            key = _decode(buf[index:key_end])
            if key in found:
                raise Unproven(f"a duplicate key {key!r}")  # json.loads keeps the last one: let it decide
            start = self.expect(self.spaces(key_end), _COLON)
            value: Any
            small = None if key == descend else _small_value(buf, start)
            if small is not None:
                value, end = small
            elif key == descend:
                value, end = self.members(start, read=read)
            else:
                end = self.value_end(start)
                opaque = descend is None and read is not None and key not in read
                placeholder = _PLACEHOLDERS.get(buf[start]) if opaque else None
                if placeholder is not None and end - start >= OPAQUE_BYTES:
                    value = placeholder()
                else:
                    value = _decode(buf[start:end])
            found[key] = (value, start, end)
            index = self.spaces(end)
            if buf[index] == _CLOSE_OBJECT:
                return found, index + 1
            index = self.expect(index, _COMMA)


def _backslashes_before(buf: bytes, end: int, floor: int) -> int:
    """How many backslashes stand right before ``end``, none before ``floor``: counted in C, chunk by chunk.

    Counting them byte by byte in Python made a line of escaped backslashes
    cost ~60 ms per MB on the event loop (I15). Here each chunk is compared
    whole with a run of backslashes (``memcmp``), and the chunks double from a
    few bytes (a lone ``\\"`` costs one small copy) to ``len(_BACKSLASHES)``: ~55 us per MB.
    """
    stop, size = end, _FIRST_RUN_CHUNK
    while stop > floor:
        low = max(floor, stop - size)
        chunk = buf[low:stop]
        if chunk != _BACKSLASHES[: stop - low]:
            return end - low - len(chunk.rstrip(b"\\"))
        stop, size = low, min(size * 2, len(_BACKSLASHES))
    return end - floor


def _small_value(buf: bytes, index: int) -> tuple[Any, int] | None:
    """The value at ``index`` and the index past it, if it ends within ``OPAQUE_BYTES``: decoded in C in one call.

    The C scanner ``json.loads`` uses, run on the next ``OPAQUE_BYTES`` of the
    line decoded (a window's last character may be cut: ``surrogateescape``
    keeps the offsets). A value that ends before the window does is read
    exactly as ``json.loads`` reads it, members, nesting and all, where the walk
    (``value_end``) took a dozen Python calls per token. None (walk it) when it
    does not end inside the window, or the scanner refuses it (NaN, Infinity:
    the walk refuses those; anything else it proves or refuses itself).

    A string, object or array whose closing byte is nowhere in the window
    cannot end inside it, which one ``bytes.find`` tells: 0.2 us for a 1 MB
    argument or result, where decoding the window and letting the scanner fail
    (an exception built) took 2.8 us warm.
    """
    closer = _CLOSERS.get(buf[index])
    if closer is not None and buf.find(closer, index + 1, index + OPAQUE_BYTES) < 0:
        return None
    text = buf[index : index + OPAQUE_BYTES].decode("utf-8", "surrogateescape")
    try:
        value, end = _SCAN_VALUE(text, 0)
    except (StopIteration, ValueError):
        return None
    if end >= len(text):  # ends where the window does: a number may go on, a cut may hide more
        return None
    return value, index + (end if text.isascii() else len(text[:end].encode("utf-8", "surrogateescape")))


def _decode(text: bytes) -> Any:
    """One member's text (or a key's), decoded by the stdlib (so every value the caller reads is checked twice).

    A string without a backslash is its bytes between the quotes, decoded as
    strict UTF-8, and a run of digits is an ``int``: what ``json.loads`` gives
    for them (the line check proved them well-formed; the scan's grammar, that
    digits have no leading zero) in a tenth of its time, ~0.3 against ~3 us,
    which it took for each of the ~13 keys and values of a call's envelope.
    """
    try:
        if text[:1] == b'"' and text.find(_BACKSLASH) < 0:
            return text[1:-1].decode()
        if text.isdigit():
            return int(text)
        return json.loads(text)
    except ValueError as exc:  # e.g. an integer too long to convert (UnicodeDecodeError is one too)
        raise Unproven(str(exc)) from None


def scan_object(line: bytes, *, descend: str, read: frozenset[str]) -> dict[str, Span]:
    """The members of the JSON object that ``line`` must hold and nothing else (bar spaces).

    Every member is decoded except ``descend``, whose value is its own members:
    decoded if named in ``read`` or shorter than ``OPAQUE_BYTES``, else an
    ``Opaque*`` placeholder. A ``descend`` that is not an object is unproven.

    Raises:
        Unproven: Not proven one well-formed object this way (``json.loads`` decides).
    """
    try:
        scanner = _Scanner(line)
        members, end = scanner.members(scanner.spaces(0), descend=descend, read=read)
    except IndexError:
        raise Unproven("the line ends inside a value") from None
    if scanner.spaces(end) != len(line):
        raise Unproven("extra data after the object")
    return members
