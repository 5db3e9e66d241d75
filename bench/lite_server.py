"""A minimal handshake-era MCP server on the standard library only (``python -S -I bench/lite_server.py N [K]``).

The SDK-based fixture costs about a CPU-second of imports per process, so a
fleet of 50 of them measures Python start-up, not the sidecar. This server
imports only ``sys`` and ``_json``, so launched by file path with ``-S -I`` (no
``site``, no venv ``.pth`` files, no package import) it starts in about 8 ms of
CPU, what ``python -S -I -c pass`` costs, against about 36 ms for ``python -m
bench.lite_server`` with the venv's site. ``_json`` is the C half of the
standard ``json`` package: ``json`` itself imports ``re`` (and with it ``enum``),
half of this server's start-up, and ``typing`` would be another 5 ms. It
answers ``initialize``,
``tools/list`` (N echo tools ``t_0..t_{N-1}``; with K, named as a sidecar in
front of K such servers of N/K tools names them, ``mcp__s00__t_0``...), ``tools/call`` and ``ping``;
``server/discover`` gets "method not found", so clients fall back to the
handshake era. Newline-delimited JSON-RPC on stdin/stdout; exits on EOF.
"""

from __future__ import annotations

import _json
import sys

TYPE_CHECKING = False  # typing costs ~5 ms of this server's start-up; only the type checker needs it
if TYPE_CHECKING:
    from typing import Any


class _DecoderSettings:
    """What ``_json.make_scanner`` reads from a ``json.JSONDecoder``: the decoder's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float


_scan = _json.make_scanner(_DecoderSettings())  # type: ignore[arg-type]  # typeshed types the context as itself


def _loads(text: str) -> Any:
    """``json.loads`` of one JSON-RPC line (surrounding whitespace allowed)."""
    value, _end = _scan(text.strip(), 0)
    return value


class _Encoded(str):
    """JSON text encoded once (the tool listing): ``_dumps`` writes it as it is."""


def _dumps(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"))`` for the JSON values this server writes."""
    if isinstance(value, _Encoded):
        return value
    if isinstance(value, str):
        return _json.encode_basestring_ascii(value)
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dumps(str(key))}:{_dumps(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_dumps(item) for item in value) + "]"
    raise TypeError(f"not a JSON value: {value!r}")


def _tools(count: int, as_fleet: int = 0) -> list[dict[str, Any]]:
    """``count`` echo tools; with ``as_fleet``, named as a sidecar in front of that many of us names them."""
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    if not as_fleet:
        return [{"name": f"t_{i}", "description": f"Echo tool {i}.", "inputSchema": schema} for i in range(count)]
    each = count // as_fleet
    return [
        {"name": f"mcp__s{k:02d}__t_{j}", "description": f"Echo tool {j}.", "inputSchema": schema}
        for k in range(as_fleet)
        for j in range(each)
    ]


def _answer(request: dict[str, Any], tools: _Encoded) -> dict[str, Any] | None:
    method, request_id = request.get("method"), request.get("id")
    if request_id is None:
        return None  # a notification
    params = request.get("params") or {}
    result: dict[str, Any]
    match method:
        case "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "lite", "version": "1.0"},
            }
        case "tools/list":
            result = {"tools": tools}
        case "tools/call":
            text = str((params.get("arguments") or {}).get("text", ""))
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        case "ping":
            result = {}
        case _:
            return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def main() -> None:
    # Encoded once, like a server that keeps its listing ready: _dumps is Python, ~3x json.dumps's cost.
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    tools = _Encoded(_dumps(_tools(count, int(sys.argv[2]) if len(sys.argv) > 2 else 0)))
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = _answer(_loads(line), tools)
        if answer is not None:
            sys.stdout.write(_dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
