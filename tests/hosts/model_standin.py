"""A stand-in for the Anthropic Messages API, so that a real Claude Code plays one scripted model turn in tests.

Claude Code sends every model request to ``$ANTHROPIC_BASE_URL``. Pointed at this loopback HTTP/1.1 server,
it gets answers from a script instead of a model, and the test gets a record of every request it made: which
tools the host put in front of the model, their names and bytes, and the ``tool_result`` it sent back.

* ``ScriptedTurn`` is the script: in the main loop (the first request whose ``tools`` carry ``tool``) the
  "model" calls ``tool`` with ``arguments``; when the host comes back with that call's ``tool_result``, it
  answers ``final(result text)`` and ends the turn. Anything else (titles, summaries, small-model side calls,
  a request after the turn) gets a short text, so it cannot break the script.
* ``ModelStandin.answer_for`` is the one place that decides which request gets which answer (its table).
* Streaming requests (``"stream": true``, what Claude Code sends) are answered with the Messages API's SSE
  events; others with one JSON message. ``/v1/messages/count_tokens`` gets a rough count. Any other path gets
  the API's ``not_found_error``, and is recorded like the rest (``ModelRequest.answer == "not_found"``).

Concurrency: ``ModelStandin.run`` owns one nursery: ``trio.serve_tcp`` on 127.0.0.1, port 0 (the port it
really bound is handed back through ``task_status.started``, so nothing guesses a free port), and one task
per connection. A connection serves its requests one after another (keep-alive, h11 for the framing); each
request is read whole before it is answered. Reads wait for the client; the caller bounds the whole run
(``trio.fail_after``) and cancels the nursery to stop it, which closes every connection.

``python -m tests.hosts.model_standin --tool NAME --arguments JSON --record FILE`` runs it on its own (for
trying a host by hand): it prints ``model_standin listening on http://127.0.0.1:PORT`` on stderr and appends
each request to FILE as a JSON line.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import sys
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, Literal

import h11
import trio

Answer = Literal["tool_use", "final", "side", "count_tokens", "not_found"]

SIDE_TEXT: Final = "OK."
"""What every request outside the script gets: short, plausible for a title or a summary."""
MAX_REQUEST_BYTES: Final = 64 * 1024 * 1024
"""A model request carries the whole conversation and every tool: far larger than h11's default limit."""
READ_CHUNK: Final = 65536


def compact_json(value: Any) -> bytes:
    """``value`` as ``JSON.stringify`` writes it (no spaces, non-ASCII kept): how the host's bytes are counted."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _quote(result: str) -> str:
    return f"The tool answered: {result}"


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One model turn: call ``tool`` (the name as the host shows it) with ``arguments``, then answer ``final``."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    final: Callable[[str], str] = _quote
    """The final text, from the text of the tool result the host sent back."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One request the host made, as it arrived, and which answer it got."""

    method: str
    target: str
    headers: Mapping[str, str]
    body: bytes
    received_at: float
    """``trio.current_time()`` when the request had arrived whole."""
    answer: Answer

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def json(self) -> dict[str, Any]:
        """The body as JSON (``{}`` for an empty or non-JSON body)."""
        try:
            value = json.loads(self.body) if self.body else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and self.path == "/v1/messages"

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The ``tools`` array the host sent the model (empty if none)."""
        return tools_of(self.json())

    @property
    def tool_names(self) -> list[str]:
        return [str(tool.get("name")) for tool in self.tools]

    def tool_sizes(self) -> dict[str, int]:
        """Each tool's name and its bytes as the host serialized it (``JSON.stringify``: ``compact_json``)."""
        return {str(tool.get("name")): len(compact_json(tool)) for tool in self.tools}

    def tools_bytes(self, names: Callable[[str], bool] = lambda _name: True) -> int:
        """Bytes of the tools whose name ``names`` accepts (the commas between them not counted)."""
        return sum(size for name, size in self.tool_sizes().items() if names(name))

    def tool_results(self) -> list[dict[str, Any]]:
        """Every ``tool_result`` block in the conversation the host sent."""
        return tool_results_of(self.json())

    def summary(self) -> dict[str, Any]:
        """What ``--record`` writes: the request line, the answer, the parsed body."""
        return {
            "at": self.received_at,
            "method": self.method,
            "target": self.target,
            "answer": self.answer,
            "headers": dict(self.headers),
            "body_bytes": len(self.body),
            "body": self.json() or self.body.decode(errors="replace"),
        }


def tools_of(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``tools`` array of a Messages request body (empty if none)."""
    tools = body.get("tools")
    return [tool for tool in tools if isinstance(tool, dict)] if isinstance(tools, list) else []


def tool_results_of(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every ``tool_result`` block in the conversation of a Messages request body."""
    found: list[dict[str, Any]] = []
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            found.extend(b for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return found


def result_text(block: Mapping[str, Any]) -> str:
    """The text of a ``tool_result`` block: its string content, or its text blocks joined."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    headers: Sequence[tuple[str, str]]
    chunks: Sequence[bytes]


class ModelStandin:
    """The loopback Messages API: ``await nursery.start(standin.run)`` gives its base URL."""

    def __init__(self, turn: ScriptedTurn, *, on_request: Callable[[ModelRequest], None] | None = None) -> None:
        self.turn = turn
        self.requests: list[ModelRequest] = []
        self.tool_use_id: str | None = None
        """The id of the scripted ``tool_use``, once the model has called the tool."""
        self.finished = trio.Event()
        """Set when the final text went out."""
        self._on_request = on_request
        self._ids = itertools.count(1)

    # -- what the test reads -------------------------------------------------------------

    @property
    def messages_requests(self) -> list[ModelRequest]:
        return [r for r in self.requests if r.is_messages]

    def main_loop_requests(self) -> list[ModelRequest]:
        """The model requests that carried the scripted tool: the turn's own requests."""
        return [r for r in self.messages_requests if self.turn.tool in r.tool_names]

    def returned_results(self) -> list[str]:
        """Texts of the ``tool_result`` blocks the host sent for the scripted call."""
        return [text for r in self.messages_requests for text in self._our_results(r.json())]

    # -- the decision --------------------------------------------------------------------

    def answer_for(self, method: str, path: str, body: Mapping[str, Any]) -> Answer:
        """Which answer a request gets. The one place this is decided:

        ========================================================  ==============
        request                                                   answer
        ========================================================  ==============
        ``POST /v1/messages/count_tokens``                         count_tokens
        ``POST /v1/messages`` with a ``tool_result`` for our call  final
        ``POST /v1/messages`` whose tools carry ``turn.tool``,     tool_use
        before the model called it
        any other ``POST /v1/messages``                            side (text)
        anything else                                              not_found
        ========================================================  ==============
        """
        if method == "POST" and path == "/v1/messages/count_tokens":
            return "count_tokens"
        if method != "POST" or path != "/v1/messages":
            return "not_found"
        if self.tool_use_id is not None and self._our_results(body):
            return "final"
        if self.tool_use_id is None and any(tool.get("name") == self.turn.tool for tool in tools_of(body)):
            return "tool_use"
        return "side"

    def _our_results(self, body: Mapping[str, Any]) -> list[str]:
        return [result_text(b) for b in tool_results_of(body) if b.get("tool_use_id") == self.tool_use_id]

    def _reply(self, answer: Answer, body: Mapping[str, Any]) -> _Reply:
        model = str(body.get("model", "claude-standin"))
        input_tokens = max(1, len(compact_json(dict(body))) // 4)
        match answer:
            case "count_tokens":
                return _json_reply(200, {"input_tokens": input_tokens})
            case "not_found":
                error = {"type": "not_found_error", "message": "the model stand-in does not serve this path"}
                return _json_reply(404, {"type": "error", "error": error})
            case "tool_use":
                self.tool_use_id = f"toolu_standin_{next(self._ids):04d}"
                block: dict[str, Any] = {
                    "type": "tool_use",
                    "id": self.tool_use_id,
                    "name": self.turn.tool,
                    "input": dict(self.turn.arguments),
                }
                stop = "tool_use"
            case "final":
                block = {"type": "text", "text": self.turn.final(self._our_results(body)[-1])}
                stop = "end_turn"
            case "side":
                block = {"type": "text", "text": SIDE_TEXT}
                stop = "end_turn"
        message = {
            "id": f"msg_standin_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 8},
        }
        if body.get("stream") is True:
            return _Reply(200, [("content-type", "text/event-stream"), ("cache-control", "no-cache")], _sse(message))
        return _json_reply(200, message)

    # -- serving -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; ``task_status.started`` gets the base URL (``http://127.0.0.1:PORT``)."""
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, host="127.0.0.1"), self._serve_connection, 0)
            port = listeners[0].socket.getsockname()[1]
            task_status.started(f"http://127.0.0.1:{port}")

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
        async with stream:
            try:
                while await self._serve_one(connection, stream):
                    connection.start_next_cycle()
            except (h11.ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the host hung up or sent garbage: nothing to answer

    async def _serve_one(self, connection: h11.Connection, stream: trio.SocketStream) -> bool:
        """Read one request whole, record it, answer it; whether the connection may carry another."""
        event = await _next_event(connection, stream)
        if not isinstance(event, h11.Request):
            return False
        if connection.they_are_waiting_for_100_continue:
            await stream.send_all(connection.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        body = bytearray()
        while True:
            part = await _next_event(connection, stream)
            if isinstance(part, h11.Data):
                body += part.data
            elif isinstance(part, h11.EndOfMessage):
                break
            else:
                return False
        headers = {name.decode().lower(): value.decode(errors="replace") for name, value in event.headers}
        raw = _decoded(bytes(body), headers.get("content-encoding", ""))
        method, target = event.method.decode(), event.target.decode()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {}
        payload: Mapping[str, Any] = parsed if isinstance(parsed, dict) else {}
        answer = self.answer_for(method, target.split("?", 1)[0], payload)
        reply = self._reply(answer, payload)
        request = ModelRequest(method, target, headers, raw, trio.current_time(), answer)
        self.requests.append(request)
        if self._on_request is not None:
            self._on_request(request)
        response_headers = [*reply.headers, ("request-id", f"req_standin_{len(self.requests):04d}")]
        await stream.send_all(connection.send(h11.Response(status_code=reply.status, headers=response_headers)) or b"")
        for chunk in reply.chunks:
            await stream.send_all(connection.send(h11.Data(data=chunk)) or b"")
        await stream.send_all(connection.send(h11.EndOfMessage()) or b"")
        if answer == "final":
            self.finished.set()
        return connection.our_state is h11.DONE and connection.their_state is h11.DONE


async def _next_event(connection: h11.Connection, stream: trio.SocketStream) -> Any:
    while True:
        event = connection.next_event()
        if event is not h11.NEED_DATA:
            return event
        connection.receive_data(await stream.receive_some(READ_CHUNK))


def _decoded(body: bytes, encoding: str) -> bytes:
    match encoding.strip().lower():
        case "gzip":
            return gzip.decompress(body)
        case "deflate":
            return zlib.decompress(body)
        case _:
            return body


def _json_reply(status: int, value: Mapping[str, Any]) -> _Reply:
    data = compact_json(dict(value))
    return _Reply(status, [("content-type", "application/json"), ("content-length", str(len(data)))], [data])


def _event(kind: str, data: Mapping[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + compact_json(dict(data)) + b"\n\n"


def _sse(message: Mapping[str, Any]) -> list[bytes]:
    """``message`` as the Messages API streams it: start, one block (start, one delta, stop), delta, stop."""
    (block,) = message["content"]
    opening = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    if block["type"] == "tool_use":
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": compact_json(block["input"]).decode()}
    else:
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    return [
        _event("message_start", {"type": "message_start", "message": opening}),
        _event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
        _event("ping", {"type": "ping"}),
        _event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        ),
        _event("message_stop", {"type": "message_stop"}),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the stand-in alone until interrupted, appending each request to ``--record`` as a JSON line."""
    parser = argparse.ArgumentParser(prog="python -m tests.hosts.model_standin", description=__doc__)
    parser.add_argument("--tool", required=True, help="the tool the model calls, as the host names it")
    parser.add_argument("--arguments", default="{}", help="the call's arguments (JSON)")
    parser.add_argument("--record", type=Path, required=True, help="append each request here (JSON lines)")
    options = parser.parse_args(argv)

    def record(request: ModelRequest) -> None:
        with options.record.open("a", encoding="utf-8") as out:
            out.write(json.dumps(request.summary()) + "\n")

    standin = ModelStandin(ScriptedTurn(options.tool, json.loads(options.arguments)), on_request=record)

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            url = await nursery.start(standin.run)
            print(f"model_standin listening on {url}", file=sys.stderr, flush=True)

    trio.run(serve)


if __name__ == "__main__":
    main()
