"""Newline-delimited JSON-RPC framing shared by the stdio pumps (host wire and upstream children).

``encode_batch`` turns one message plus everything already queued behind it
into one buffer, so a burst of answers costs one ``write`` instead of one per
message. It never waits: it only takes what ``receive_nowait`` hands over.
"""

from __future__ import annotations

from typing import Final, Protocol

import anyio
from mcp.shared.message import SessionMessage

MAX_BATCH_MESSAGES: Final = 256
"""Bound on one batch, so a flood of small messages still yields to the writer."""


class _NowaitSource(Protocol):
    def receive_nowait(self) -> SessionMessage: ...


def encode_frame(message: SessionMessage) -> bytes:
    """One message as one JSON line."""
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


def encode_batch(first: SessionMessage, source: _NowaitSource) -> bytes:
    """``first`` and every message already waiting in ``source`` (up to a bound), framed."""
    frames = [encode_frame(first)]
    while len(frames) < MAX_BATCH_MESSAGES:
        try:
            frames.append(encode_frame(source.receive_nowait()))
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            break
    return b"".join(frames)
