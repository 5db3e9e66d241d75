"""A stdio host's first-page ``tools/list``, answered on the wire splice from the encoded catalog (issue 11).

``list_answer`` reads one host line and, when it is a first-page list the
catalog wire cache (``catalog.wire_form``) holds for the host's protocol
version, returns the whole answer line; otherwise None, and the SDK answers
(and fills the cache). ``send_list_answer`` hands it to the host wire's
writer if that can take it at once (``host.stdio.reader.HostSplice``).

No state; nothing here awaits.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final, Protocol

import anyio
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from supervisor.host.pipeline.paths import ENVELOPE_KEYS
from supervisor.wire.codec import load_request

logger = logging.getLogger(__name__)

_ABSENT: Final = object()
"""A request without ``params``."""


class EncodedListings(Protocol):
    """The catalog wire cache (``catalog.wire_form.ToolsListWireCache``)."""

    def encoded(self, protocol_version: str) -> bytes | None: ...

    def answered(self) -> None:
        """A first-page answer was just given (the Front's record of what hosts hold, I22)."""


def send_list_answer(line: bytes, handshake_version: str | None, cache: EncodedListings, out: Any) -> bool:
    """Answer the first-page ``tools/list`` on ``line`` on the host wire's queue ``out`` at once (True); False:
    not one the cache holds, or the wire's writer cannot take it now (the SDK answers)."""
    answer = list_answer(line, handshake_version, cache)
    if answer is None:
        return False
    try:
        out.send_nowait(answer)  # the wire's writer is idle: handed over at once, or the SDK answers
    except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
        return False
    cache.answered()
    logger.debug("tools/list answered on the wire splice (%d bytes)", len(answer))
    return True


def list_answer(line: bytes, handshake_version: str | None, cache: EncodedListings) -> bytes | None:
    """The answer line to the first-page ``tools/list`` on ``line``; None: the SDK answers it.

    ``handshake_version``: the version a handshake-era host negotiated (None: a 2026-era host).
    """
    request = load_request(line, "tools/list")
    if request is None:
        return None
    message = request[0]
    version = _list_version(message.get("params", _ABSENT), handshake_version)
    encoded = cache.encoded(version) if version is not None else None
    if encoded is None:
        return None
    return b'{"jsonrpc":"2.0","id":' + json.dumps(message["id"]).encode() + b',"result":' + encoded + b"}\n"


def _list_version(params: Any, handshake_version: str | None) -> str | None:
    """The protocol version a first-page list with ``params`` is answered in; None: the SDK answers it.

    A 2026-era host names its version in the request's envelope; a handshake-era
    host's is the one it negotiated, and its list carries no params beyond ``{}``.
    Anything else (a cursor, a progress token, any other ``_meta``) is the SDK's.
    """
    if handshake_version is not None:
        return handshake_version if params is _ABSENT or params == {} else None
    meta = params.get("_meta") if isinstance(params, dict) and len(params) == 1 else None
    if not isinstance(meta, dict) or not ENVELOPE_KEYS.issuperset(meta):
        return None
    version = meta.get(PROTOCOL_VERSION_META_KEY)
    return version if version in MODERN_PROTOCOL_VERSIONS else None
