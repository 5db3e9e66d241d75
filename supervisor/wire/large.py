"""Large messages on the stdio wire splice: the envelope read from the bytes, the big members forwarded unread.

A spliced ``tools/call`` (``host.stdio.reader``) whose line is large, typically a
1 MB argument or result, crosses the sidecar as bytes end to end: the
envelope is read by ``wire.json_spans.scan_object`` without decoding the big
members (which are proven well-formed, not decoded), and the line written on is
a few new small pieces around views of the original bytes of everything else
(``request_pieces``, ``answer_pieces``), written with one ``writev`` while the
pipe's writer task is idle (``wire.pipes.DirectWrite.write_pieces``) and joined
only when it has to be queued: no ``decode``/``encode`` of the line, no
``json.loads``/``json.dumps`` of the large member.

Copies of a 1 MB member per direction: the pipe read; the line copied out of
the read buffer (``wire.frames.LineBuffer``: once, the line is that copy); the
string ``pydantic_core.from_json`` builds while it proves the line well-formed
(dropped at once); the pipe write. Only a line that must wait for a busy writer
is joined into one more copy. Passes that copy nothing: the line buffer's
newline search and the scan's ``bytes.find`` of the string's closing quote.

A line the scan cannot prove (``Unproven``) is decoded whole and carried like a
small message (``load`` returns None and the caller falls back), so what is
refused, and with which text, is decided exactly as for a small line.

Pure functions; nothing here awaits.
"""

from __future__ import annotations

import json
from typing import Any, Final

from supervisor.wire.json_spans import Span, Unproven, scan_object

READ_MEMBERS: Final = {
    "params": frozenset({"name", "_meta"}),
    "result": frozenset({"_meta", "isError", "resultType"}),
}
"""Members of a request's ``params`` and an answer's ``result`` the splice reads (always decoded)."""
_COMMA: Final = b","
_SMALL_PIECE_BYTES: Final = 4096
"""Members shorter than this are copied into the small piece around them rather than written as views."""


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


encode_ascii = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
"""``json.dumps`` with our options, without building an encoder per call (our values are fresh trees)."""


def _dumps(value: Any) -> bytes:
    return encode_ascii(value).encode()  # ASCII: escapes even lone surrogates


Pieces = list[bytes | memoryview]
"""A framed line as the buffers it is made of, in order (``os.writev`` takes them as they are)."""


def request_pieces(request_id: str, name: str, arguments: memoryview, meta: dict[str, Any] | None) -> Pieces:
    """A framed ``tools/call`` request whose ``arguments`` is the host's own text (no ``meta``: no ``_meta``)."""
    return [
        b"".join((b'{"jsonrpc":"2.0","id":', _dumps(request_id), b',"method":"tools/call","params":{"name":',
                  _dumps(name), b',"arguments":')),
        arguments,
        b"}}\n" if meta is None else b"".join((b',"_meta":', _dumps(meta), b"}}\n")),
    ]  # fmt: skip


def answer_pieces(
    request_id: str | int,
    text: memoryview,
    members: dict[str, Span],
    replace: dict[str, Any],
    omit: frozenset[str] = frozenset(),
) -> Pieces:
    """A framed answer whose ``result`` is ``members`` (slices of ``text``), ``replace``'s values instead or added.

    Members named in ``omit`` are left out. Small pieces next to each other are
    joined, so a ``writev`` gets one piece per large member and a few around them.
    """
    pieces: Pieces = []
    small: list[bytes] = [b'{"jsonrpc":"2.0","id":', _dumps(request_id), b',"result":{']
    for key, (_, start, end) in members.items():
        if key in omit:
            continue
        small += (_dumps(key), b":")
        if key in replace:
            small.append(_dumps(replace[key]))
        elif end - start < _SMALL_PIECE_BYTES:
            small.append(bytes(text[start:end]))
        else:
            pieces += (b"".join(small), text[start:end])
            small = []
        small.append(_COMMA)
    for key, value in replace.items():
        if key not in members:
            small += (_dumps(key), b":", _dumps(value), _COMMA)
    if small and small[-1] is _COMMA:
        small.pop()
    small.append(b"}}\n")
    pieces.append(b"".join(small))
    return pieces


def join(pieces: Pieces) -> bytes:
    """The line ``pieces`` make, as one buffer (for a writer that is busy: it is queued)."""
    return b"".join(pieces)
