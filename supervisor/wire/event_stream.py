"""Server-sent events from a byte stream, as the HTML standard's event-stream parser reads them.

``EventStreamDecoder`` is fed the body of a ``text/event-stream`` response
chunk by chunk (``upstream.http1``, the fast path's own HTTP/1.1 client) and
returns each event completed so far: its type (``message`` unless an ``event:``
field named another) and its data (the ``data:`` lines joined by newlines).
Lines end with CRLF, LF or CR; a CR that ends a chunk ends its line at once
(so an event is never held back for bytes that may not come), and an LF that
starts the next chunk is then the rest of that CRLF; comments (``:`` lines) and fields
other than ``event``/``data`` are skipped; one space after a field's colon is
not part of its value; a leading byte-order mark is dropped; an event without
data is not dispatched (a priming event that only carries an ``id``). The text
is UTF-8, a bad byte replaced as the standard says.

An event larger than ``max_event_bytes`` raises ``EventTooLarge`` (the SDK's
transports bound events the same way: ``compat.sdk.MAX_SSE_EVENT_SIZE``), and
so does a line that has no end yet beyond it: a server cannot make the decoder
hold more than about that much.

Pure; nothing here awaits.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"


class Event(NamedTuple):
    """One dispatched event: its type and its data."""

    event: str
    data: str


class EventTooLarge(Exception):
    """An event, or a line of one, beyond the decoder's bound."""


class EventStreamDecoder:
    """The events of one event stream, fed in chunks; one decoder per stream."""

    def __init__(self, max_event_bytes: int) -> None:
        self._max = max_event_bytes
        self._pending = b""
        """Bytes of a line whose end has not arrived (or a final CR that may be half of a CRLF)."""
        self._started = False
        self._after_cr = False
        self._event = ""
        self._data: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[Event]:
        """The events ``chunk`` completes, in order."""
        if not self._started:
            chunk = self._pending + chunk
            self._pending = b""
            if len(chunk) < len(_BOM) and _BOM.startswith(chunk):
                self._pending = chunk  # maybe the start of a byte-order mark
                return []
            self._started = True
            chunk = chunk.removeprefix(_BOM)
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the LF of a CRLF whose CR ended the last chunk (and its line, then)
        if not chunk:
            return []
        text = self._pending + chunk if self._pending else chunk
        events: list[Event] = []
        start = 0
        for match in _LINE_END.finditer(text):
            self._line(text[start : match.start()], events)
            start = match.end()
        self._after_cr = text.endswith(b"\r")
        self._pending = text[start:]
        if len(self._pending) + self._size > self._max:
            raise EventTooLarge(f"an event of more than {self._max} bytes")
        return events

    def _line(self, line: bytes, events: list[Event]) -> None:
        if not line:
            if self._data:
                data = b"\n".join(self._data).decode("utf-8", "replace")
                events.append(Event(self._event or "message", data))
            self._event, self._data, self._size = "", [], 0
            return
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._size += len(value) + 1
            if self._size > self._max:
                raise EventTooLarge(f"an event of more than {self._max} bytes")
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        # ``id``, ``retry``, comments (an empty name) and unknown fields: nothing the caller reads
