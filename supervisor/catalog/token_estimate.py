"""How many tokens a ``tools/list`` answer costs a host's model: the estimator behind ``tools --tokens``.

A model reads a tool listing as text; what it costs is the tokens of that
text. No tokenizer ships with the sidecar (every vendor's differs, and the
common ones fetch their vocabularies at run time, which the sidecar must not
do), so the estimate is the JSON a host of a given protocol version receives
(the eras differ: a handshake-era host also gets each tool's ``execution``), compact, in UTF-8 bytes,
divided by ``BYTES_PER_TOKEN`` and rounded up. JSON schemas are dense with
punctuation and short keys, so real tokenizers land within about ±25% of it;
the figure is for comparing listings (a server against another, a view
against everything, search against listing), not for billing.

Pure functions; nothing here awaits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Final

import mcp_types as types
from mcp_types import methods as sdk_methods
from mcp_types.version import LATEST_MODERN_VERSION

BYTES_PER_TOKEN: Final = 4.0


def listing_json(tools: Iterable[types.Tool], version: str = LATEST_MODERN_VERSION) -> str:
    """The ``tools`` of a ``tools/list`` result as a host of protocol ``version`` receives them, as compact JSON.

    Per version, as the SDK serializes the answer: a 2026-era host gets no
    ``execution`` (task support), a handshake-era host does.
    """
    dumped = types.ListToolsResult(tools=list(tools)).model_dump(mode="json", by_alias=True, exclude_none=True)
    shown = sdk_methods.serialize_server_result("tools/list", version, dumped)["tools"]
    return json.dumps({"tools": shown}, separators=(",", ":"), ensure_ascii=False)


def estimate_tokens(tools: Iterable[types.Tool], version: str = LATEST_MODERN_VERSION) -> int:
    """The estimated tokens of the listing of ``tools`` for a host of ``version`` (module docstring: how good)."""
    return math.ceil(len(listing_json(tools, version).encode()) / BYTES_PER_TOKEN)
