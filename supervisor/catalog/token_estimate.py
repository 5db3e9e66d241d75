"""How many tokens a ``tools/list`` answer costs a host's model: the estimator behind ``tools --tokens``.

A model reads a tool listing as text; what it costs is the tokens of that
text. No tokenizer ships with the sidecar (every vendor's differs, and the
common ones fetch their vocabularies at run time, which the sidecar must not
do), so the estimate is the JSON a host receives, compact, in UTF-8 bytes,
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

BYTES_PER_TOKEN: Final = 4.0


def listing_json(tools: Iterable[types.Tool]) -> str:
    """The ``tools/list`` result a host receives for ``tools``, as compact JSON."""
    dumped = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]
    return json.dumps({"tools": dumped}, separators=(",", ":"), ensure_ascii=False)


def estimate_tokens(tools: Iterable[types.Tool]) -> int:
    """The estimated tokens of the listing of ``tools`` (module docstring: how, and how far to trust it)."""
    return math.ceil(len(listing_json(tools).encode()) / BYTES_PER_TOKEN)
