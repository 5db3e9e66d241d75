"""What both sides check of a ``tools/call`` result, and how a call ended (issue 11, DESIGN I13).

The host side (the Front's general and fast paths, the splice's host half) and
the upstream side (one generation's session, the splice's upstream half) read
and edit the same results; the checks live here so that neither imports the
other. Pure functions and types: no I/O, no state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import serialize_server_result
from pydantic import BaseModel

CallOutcome = Literal["ok", "tool_error", "rpc_error", "unavailable", "timeout", "cancelled"]
"""How one host ``tools/call`` ended, as metrics count it."""


def wire_result_shaped(result: Mapping[str, Any]) -> bool:
    """Whether a raw ``tools/call`` result is shaped like one: the host's client validates the rest.

    A complete result carries a ``content`` list (and ``isError``, if any, is a
    boolean); an ``input_required`` one is passed on to the host as it is.
    """
    if result.get("resultType") == "input_required":
        return True
    is_error = result.get("isError")
    return isinstance(result.get("content"), list) and (is_error is None or isinstance(is_error, bool))


def strip_server_stamp(result: Any) -> Any:
    """Drop the upstream's ``serverInfo`` ``_meta`` stamp: the host talks to us, not to it."""
    meta = getattr(result, "meta", None)
    if meta and SERVER_INFO_META_KEY in meta:
        rest = {key: value for key, value in meta.items() if key != SERVER_INFO_META_KEY}
        return result.model_copy(update={"meta": rest or None})
    return result


def handshake_shaped(result: dict[str, Any]) -> dict[str, Any]:
    """A wire result as a handshake-era host gets it (in place): no ``resultType``, no upstream ``serverInfo``."""
    if result.get("resultType") == "complete":
        del result["resultType"]
    meta = result.get("_meta")
    if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
        rest = {key: value for key, value in meta.items() if key != SERVER_INFO_META_KEY}
        if rest:
            result["_meta"] = rest
        else:
            del result["_meta"]
    return result


def sieved(method: str, version: str, result: BaseModel) -> dict[str, Any]:
    """``result`` in the wire shape of ``version``, as the SDK's server sieves a handler's result.

    For results the sidecar writes itself (the fast path's and the splice's input
    rounds, a spliced call's input rounds run for a handshake-era host): fields
    ``version`` lacks are dropped (a 2026 input request has no ``elicitationId``,
    a handshake result no ``resultType``).
    """
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return serialize_server_result(method, version, dumped)
