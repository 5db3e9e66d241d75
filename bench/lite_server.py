"""A minimal handshake-era MCP server on the standard library only (``python -S -I bench/lite_server.py N``).

The SDK-based fixture costs about a CPU-second of imports per process, so a
fleet of 50 of them measures Python start-up, not the sidecar. This server
imports only ``json`` and ``sys`` (not even ``typing``), so launched by file path
with ``-S -I`` (no ``site``, no venv ``.pth`` files, no package import) it
starts in about 15 ms of CPU, against about 36 ms for ``python -m
bench.lite_server`` with the venv's site. It answers ``initialize``,
``tools/list`` (N echo tools ``t_0..t_{N-1}``), ``tools/call`` and ``ping``;
``server/discover`` gets "method not found", so clients fall back to the
handshake era. Newline-delimited JSON-RPC on stdin/stdout; exits on EOF.
"""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # typing costs ~5 ms of this server's start-up; only the type checker needs it
if TYPE_CHECKING:
    from typing import Any


def _tools(count: int) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return [{"name": f"t_{i}", "description": f"Echo tool {i}.", "inputSchema": schema} for i in range(count)]


def _answer(request: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any] | None:
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
    tools = _tools(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = _answer(json.loads(line), tools)
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
