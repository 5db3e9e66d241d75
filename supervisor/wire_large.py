"""Large messages on the stdio wire splice: the envelope read from the bytes, the big members forwarded unread.

A spliced ``tools/call`` (``wire_splice``) whose line is large, typically a
1 MB argument or result, crosses the sidecar as bytes end to end: the
envelope is read by ``_json_spans.scan_object`` without decoding the big
members (which are proven well-formed, not decoded), and the line written on is
joined once from a few new small pieces and the original bytes of everything
else (``request_line``, ``answer_line``): no ``decode``/``encode`` of the line,
no ``json.loads``/``json.dumps`` of the large member, one copy into the output.

Copies of a 1 MB member per direction: the pipe read; the line cut out of the
chunk read (``_frames.LineBuffer``); the string ``pydantic_core.from_json``
builds while it proves the line well-formed (dropped at once); the join here;
the pipe write. Passes that copy nothing: the line buffer's newline search and
the scan's ``bytes.find`` of the string's closing quote and of a backslash.

A line the scan cannot prove (``Unproven``) is decoded whole and carried like a
small message (``load`` returns None and the caller falls back), so what is
refused, and with which text, is decided exactly as for a small line.

Pure functions; nothing here awaits.
"""

from __future__ import annotations

import json
from typing import Any, Final

from supervisor._json_spans import Span, Unproven, scan_object

READ_MEMBERS: Final = {
    "params": frozenset({"name", "_meta"}),
    "result": frozenset({"_meta", "isError", "resultType"}),
}
"""Members of a request's ``params`` and an answer's ``result`` the splice reads (always decoded)."""
_COMMA: Final = b","


def load(line: bytes, descend: str) -> tuple[dict[str, Any], dict[str, Span] | None] | None:
    """The message on a large ``line`` and the spans of its ``descend`` member; None if the scan cannot prove it.

    In the message, a large member of ``descend`` that the splice does not read
    (not in ``READ_MEMBERS``) is an empty ``Opaque*`` placeholder of its JSON
    type: its text is in the spans. No ``descend`` member: every value is decoded
    and the spans are None.
    """
    try:
        top = scan_object(line, descend=descend, read=READ_MEMBERS[descend])
    except Unproven:
        return None
    message = {key: value for key, (value, _, _) in top.items()}
    if descend not in top:
        return message, None
    inner: dict[str, Span] = top[descend][0]
    message[descend] = {key: value for key, (value, _, _) in inner.items()}
    return message, inner


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()  # ASCII: escapes even lone surrogates


def request_line(request_id: str, name: str, arguments: memoryview, meta: dict[str, Any]) -> bytes:
    """A framed ``tools/call`` request whose ``arguments`` is the host's own text of them."""
    return b"".join((
        b'{"jsonrpc":"2.0","id":', _dumps(request_id), b',"method":"tools/call","params":{"name":', _dumps(name),
        b',"arguments":', arguments, b',"_meta":', _dumps(meta), b"}}\n",
    ))  # fmt: skip


def answer_line(request_id: str | int, text: memoryview, members: dict[str, Span], replace: dict[str, Any]) -> bytes:
    """A framed answer whose ``result`` is ``members`` (slices of ``text``), ``replace``'s values instead or added."""
    parts: list[bytes | memoryview] = [b'{"jsonrpc":"2.0","id":', _dumps(request_id), b',"result":{']
    for key, (_, start, end) in members.items():
        parts += (_dumps(key), b":", _dumps(replace[key]) if key in replace else text[start:end], _COMMA)
    for key, value in replace.items():
        if key not in members:
            parts += (_dumps(key), b":", _dumps(value), _COMMA)
    if parts[-1] is _COMMA:
        parts.pop()
    parts.append(b"}}\n")
    return b"".join(parts)
