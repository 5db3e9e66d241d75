"""The wire splice's line codec: JSON-RPC lines read and written without a model (issue 11).

``load`` reads a line the splice takes or claims: small lines through
``pydantic_core.from_json`` with ``json.loads`` as the judge, large ones from
their bytes (``wire.large``: big members proven, not decoded). ``frame`` and
``to_json`` write values as compact UTF-8 JSON; ``utf8_line`` builds a line
from texts with the stdlib encoder, escaping only what UTF-8 cannot hold.

Pure functions: nothing here awaits or keeps state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pydantic_core

from supervisor.wire import large as wire_large
from supervisor.wire.json_spans import Span
from supervisor.wire.large import encode_ascii

BIG_LINE_BYTES: Final = 64 * 1024
"""From this size on, a message is read from its bytes and its large members forwarded unread (``wire.large``)."""


_encode_utf8 = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False).encode


def utf8_line(build: Callable[[Callable[[Any], str]], str]) -> bytes:
    """The line ``build`` assembles with a JSON encoder, as UTF-8: non-ASCII text crosses as itself.

    A string the host or a server sent as an escaped lone surrogate (valid JSON
    text, ``"\\ud800"``) decodes to a ``str`` UTF-8 cannot encode: then the line
    is built again with every non-ASCII character escaped, as it arrived.
    """
    try:
        return build(_encode_utf8).encode()
    except UnicodeEncodeError:
        return build(encode_ascii).encode()


def to_json(value: Any) -> bytes:
    """``value`` as compact JSON in UTF-8: the text ``utf8_line`` makes of it, in a quarter of the time.

    ``pydantic_core.to_json`` writes what ``json.dumps`` writes with our options
    for every value a JSON parse yields (the same escapes, non-ASCII text as
    itself, ``NaN`` and ``Infinity`` as ``inf_nan_mode="constants"`` spells them),
    except a float's exponent (``1e-5`` for ``1e-05``: the same number). It
    refuses a lone surrogate (UTF-8 has no bytes for it) and nesting beyond its
    depth limit; such a value is encoded by ``utf8_line``, as before.
    ``tests/host/test_splice_encoding.py`` holds it to ``json.dumps``.
    """
    try:
        return pydantic_core.to_json(value, inf_nan_mode="constants")
    except ValueError:  # PydanticSerializationError
        return utf8_line(lambda encode: encode(value))


def frame(message: Mapping[str, Any]) -> bytes:
    """One JSON-RPC message as one line."""
    return to_json(message) + b"\n"


@dataclass(frozen=True, slots=True)
class Spans:
    """A large message's bytes and where the members of its ``params`` or ``result`` lie in them."""

    text: memoryview
    inner: dict[str, Span]


def load(line: bytes, descend: str) -> tuple[Any, Spans | None]:
    """The message on ``line``; for a large line also the spans of its ``descend`` member (``wire.large``).

    A large line's big ``descend`` members that the splice does not read are
    empty placeholders in the message (their text is in the spans). A large line
    the scan cannot prove well-formed is decoded whole and carried like a small
    one (no spans). Lines are strict UTF-8: ``json.loads`` of the bytes would let
    encoded lone surrogates through, which no line written on can hold.

    Raises:
        ValueError: Not JSON (or nested beyond the decoder's recursion limit).
    """
    try:
        if len(line) < BIG_LINE_BYTES:
            return load_small(line), None
        loaded = wire_large.load(line, descend)
        if loaded is None:
            return json.loads(line.decode()), None
    except RecursionError as exc:
        raise ValueError("JSON nested too deep") from exc
    message, inner = loaded
    return message, (Spans(memoryview(line), inner) if inner is not None else None)


def load_request(line: bytes, method: str) -> tuple[dict[str, Any], Spans | None] | None:
    """The ``method`` request on ``line`` and its ``params``' spans (``load``); None: not JSON, or not a
    JSON-RPC 2.0 request for ``method`` with an id (a string or a number) that the splice may answer by."""
    try:
        message, spans = load(line, "params")
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != method or message.get("jsonrpc") != "2.0":
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return message, spans


def load_small(line: bytes) -> Any:
    """A small line's message: the same values, and the same lines refused, as ``json.loads(line.decode())``.

    ``pydantic_core.from_json`` parses a call's line in about half the time (1.9
    against 3.6 us for an echo answer). It refuses what the strict decode
    refuses (bytes that are not UTF-8, encoded lone surrogates) but also two
    things ``json.loads`` takes: an escaped lone surrogate (``"\\ud800"``) and
    nesting beyond ~200 levels. Those lines, and every line that is not JSON,
    are decoded again by ``json.loads``, which has the last word.
    """
    try:
        return pydantic_core.from_json(line)
    except ValueError:
        return json.loads(line.decode())
