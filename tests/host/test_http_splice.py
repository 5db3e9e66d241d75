"""The wire splice's HTTP half (``host.http.splice``): an HTTP front's plain 2026 call, as bytes to a stdio upstream.

In-process, through ``HttpFastCalls`` over raw ASGI (as ``test_http_fast_calls.py``),
with a real ``UpstreamSplice``: the test reads the request line off its stdin
queue and answers as the upstream's stdout pump would (``claim``, then
``deliver``). Which calls take this way is pinned with the rest of the table in
``test_tool_call_paths.py``; end to end, every HTTP-front suite's plain calls to
stdio servers cross it (``test_http_front.py``, ``test_fidelity.py``, chaos).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any, Final

import anyio
import pytest
import trio
import trio.testing
from mcp import MCPError
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types import INVALID_PARAMS, PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY

from supervisor.host.http.answers import PING_SEC
from supervisor.host.http.posts import HttpFastCalls
from supervisor.upstream.splice import UpstreamSplice
from tests.host import detaching
from tests.host.test_http_fast_calls import BODY, HEADERS, LIMIT, _FakeSdk
from tests.sidecar import scaled

MODERN: Final = "2026-07-28"
STAMP: Final = {"name": "mcp-supervisor", "version": "test"}
BOUND_SEC: Final = scaled(5)


class _Upstream:
    """A 2026-era stdio generation's splice: its stdin read by the test, its answers delivered as its pump would."""

    def __init__(self, timeout_sec: float = 60.0, *, modern: bool = True) -> None:
        self.stdin, self.reads = anyio.create_memory_object_stream[Any](8)
        self.splice = UpstreamSplice("fx", timeout_sec)
        self.splice.attach(self.stdin, None)
        if modern:
            self.splice.set_envelope({PROTOCOL_VERSION_META_KEY: MODERN})
        else:
            self.splice.set_handshake()
        self.healed: list[tuple[str, int]] = []

    def heal_unknown_tool(self, raw_name: str, error: MCPError) -> None:
        self.healed.append((raw_name, error.code))

    async def request(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(await self.reads.receive())
        return message

    async def answer(self, message: dict[str, Any]) -> None:
        claimed = self.splice.claim(json.dumps(message).encode())
        assert claimed is not None, "not an answer to a spliced call"
        await self.splice.deliver(*claimed)


class _Front:
    """What ``HttpFastCalls`` and ``HttpSplice`` read of a Front; the fast path records what it was given."""

    def __init__(self, upstream: _Upstream, *, shutting_down: bool = False) -> None:
        self.tool = SimpleNamespace(
            raw_name="echo",
            owner="fx",
            source=SimpleNamespace(output_schema=None),
            definition=SimpleNamespace(input_schema={"type": "object"}),
            upstream_arguments=lambda arguments: arguments,
            transforms_arguments=False,
        )
        self.actor = SimpleNamespace(
            ready_upstream=SimpleNamespace(splice=upstream.splice, modern=upstream.splice.modern),
            heal_unknown_tool=upstream.heal_unknown_tool,
        )
        self.server = SimpleNamespace(server_info_stamp=STAMP)
        self.shutting_down = shutting_down
        self.outcomes: list[str] = []
        self.failures: list[tuple[str, str]] = []
        self.fast_calls = 0
        self.tool_calls = self

    def route(self, name: str) -> Any:
        return (self.tool, self.actor) if name == "mcp__fx__echo" else None

    def note_call(self, tool: Any, outcome: str, seconds: float) -> None:
        self.outcomes.append(outcome)

    def note_call_failure(self, tool: Any, kind: str, text: str) -> None:
        self.failures.append((kind, text))

    async def run(self, call: Any) -> dict[str, Any]:
        self.fast_calls += 1
        return {"content": [], "resultType": "complete"}


Watch = Callable[[dict[str, Any]], None]


async def _post(
    front: _Front, *, hang_up: trio.Event | None = None, watch: Watch | None = None
) -> tuple[HttpFastCalls, list[dict[str, Any]]]:
    """POST the plain call to a fresh ``HttpFastCalls``; the host hangs up once ``hang_up`` is set.

    ``watch`` sees each message the app sends, as it is sent.
    """
    app = HttpFastCalls(front, _FakeSdk(), LIMIT)  # type: ignore[arg-type]
    headers = [(k.encode(), v.encode()) for k, v in HEADERS.items()]
    return app, await detaching.post(app, headers, BODY, hang_up=hang_up, watch=watch)


def _answer_of(sent: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    start, body = sent
    assert (b"content-type", b"application/json") in start["headers"]
    return start["status"], json.loads(body["body"])


async def _post_while(
    front: _Front,
    plays_upstream: Callable[[], Awaitable[None]],
    *,
    hang_up: trio.Event | None = None,
    watch: Watch | None = None,
    bound_sec: float = BOUND_SEC,
) -> tuple[HttpFastCalls, list[dict[str, Any]]]:
    """POST the call while ``plays_upstream`` is the upstream (reads the request, answers or not); bounded."""
    results: list[tuple[HttpFastCalls, list[dict[str, Any]]]] = []

    async def host() -> None:
        results.append(await _post(front, hang_up=hang_up, watch=watch))

    with trio.fail_after(bound_sec):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host)
            await plays_upstream()
    return results[0]


async def test_a_plain_call_crosses_the_splice_with_our_id_and_its_answer_is_the_posts_body_stamped(
    make_upstream: Callable[..., _Upstream],
) -> None:
    upstream = make_upstream()
    front = _Front(upstream)
    result = {"content": [{"type": "text", "text": "hi"}]}

    async def echoing() -> None:
        request = await upstream.request()
        assert request["id"].startswith("mcp-supervisor/splice/") and request["method"] == "tools/call"
        assert request["params"]["name"] == "echo" and request["params"]["arguments"] == {"text": "hi"}
        assert request["params"]["_meta"][PROTOCOL_VERSION_META_KEY] == MODERN  # our envelope, the host's era
        await upstream.answer({"jsonrpc": "2.0", "id": request["id"], "result": result})

    app, sent = await _post_while(front, echoing)
    status, answer = _answer_of(sent)
    assert status == 200 and answer["id"] == 7
    assert answer["result"] == {**result, "_meta": {SERVER_INFO_META_KEY: STAMP}, "resultType": "complete"}
    assert app.taken == {"splice": 1} and front.fast_calls == 0 and front.outcomes == ["ok"]


async def test_a_silent_spliced_call_pings_until_its_answer_which_is_the_streams_last_event(
    autojump_clock: trio.testing.MockClock, make_upstream: Callable[..., _Upstream]
) -> None:
    upstream = make_upstream()
    front = _Front(upstream)
    result = {"content": [], "resultType": "complete"}
    started = trio.current_time()
    pings: list[float] = []
    pinged_twice = trio.Event()

    def watch(message: dict[str, Any]) -> None:
        if message.get("body") == b": ping\r\n\r\n":
            pings.append(trio.current_time() - started)
            if len(pings) == 2:
                pinged_twice.set()

    async def silent_until_pinged_twice() -> None:
        request = await upstream.request()
        await pinged_twice.wait()  # the clock jumps to each ping
        await upstream.answer({"jsonrpc": "2.0", "id": request["id"], "result": result})

    _, sent = await _post_while(front, silent_until_pinged_twice, watch=watch, bound_sec=10 * PING_SEC)
    assert pings == [pytest.approx(PING_SEC), pytest.approx(2 * PING_SEC)]
    start, *middle, last = sent
    assert start["status"] == 200 and (b"content-type", b"text/event-stream") in start["headers"]
    assert [m["body"] for m in middle] == [b": ping\r\n\r\n"] * 2
    assert last["more_body"] is False
    answer = json.loads(last["body"].removeprefix(b"event: message\r\ndata: "))
    assert answer["id"] == 7 and answer["result"]["_meta"] == {SERVER_INFO_META_KEY: STAMP}
    assert front.outcomes == ["ok"]


@pytest.mark.parametrize("code", [INVALID_PARAMS, -32042])
async def test_a_json_rpc_error_passes_through_with_the_sdks_status_and_the_actor_hears_of_it_for_its_heal(
    code: int, make_upstream: Callable[..., _Upstream]
) -> None:
    upstream = make_upstream()
    front = _Front(upstream)
    error = {"code": code, "message": "no", "data": {"why": 1}}

    async def refusing() -> None:
        request = await upstream.request()
        await upstream.answer({"jsonrpc": "2.0", "id": request["id"], "error": error})

    _, sent = await _post_while(front, refusing)
    status, answer = _answer_of(sent)
    assert status == ERROR_CODE_HTTP_STATUS.get(code, 200)
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": error}
    assert upstream.healed == [("echo", code)]  # the actor heals on -32602 (I8), as for every path
    assert front.outcomes == ["rpc_error"]


async def test_a_host_that_hangs_up_abandons_the_call_upstream_and_gets_no_answer(
    make_upstream: Callable[..., _Upstream],
) -> None:
    upstream = make_upstream()
    front = _Front(upstream)
    hang_up = trio.Event()
    requests: list[dict[str, Any]] = []

    async def silent_until_cancelled() -> None:
        requests.append(await upstream.request())
        hang_up.set()
        requests.append(await upstream.request())

    _, sent = await _post_while(front, silent_until_cancelled, hang_up=hang_up)
    request, cancel = requests
    assert cancel["method"] == "notifications/cancelled"
    assert cancel["params"] == {"requestId": request["id"], "reason": "the host cancelled the request"}
    assert sent == [] and front.outcomes == ["cancelled"]
    assert upstream.splice.claim(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {}}).encode()) is None


async def test_a_call_past_tool_timeout_sec_is_the_general_paths_timeout_result_and_is_cancelled_upstream(
    autojump_clock: trio.testing.MockClock, make_upstream: Callable[..., _Upstream]
) -> None:
    upstream = make_upstream(timeout_sec=10.0)  # below PING_SEC: the answer is plain JSON
    front = _Front(upstream)
    results: list[Any] = []
    with trio.fail_after(BOUND_SEC * 100):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(upstream.splice.serve_deadlines)
            started = trio.current_time()
            results.append(await _post(front))
            assert trio.current_time() - started == pytest.approx(10.0)
            nursery.cancel_scope.cancel()
    ((_, sent),) = results
    status, answer = _answer_of(sent)
    assert status == 200 and answer["result"]["isError"] is True
    assert "did not answer within 10s (tool_timeout_sec)" in answer["result"]["content"][0]["text"]
    assert front.outcomes == ["timeout"] and front.failures[0][0] == "UpstreamTimeout"
    request, cancel = upstream.reads.receive_nowait(), upstream.reads.receive_nowait()
    assert json.loads(cancel)["params"]["requestId"] == json.loads(request)["id"]


async def test_a_lost_transport_answers_the_call_with_the_general_paths_unavailable_result(
    make_upstream: Callable[..., _Upstream],
) -> None:
    upstream = make_upstream()
    front = _Front(upstream)

    async def lost() -> None:
        await upstream.request()
        await upstream.splice.fail_all("the pipe closed")

    _, sent = await _post_while(front, lost)
    _, answer = _answer_of(sent)
    assert answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"] == "server 'fx': connection lost during tools/call echo"
    assert front.outcomes == ["unavailable"] and front.failures[0][0] == "UpstreamUnavailable"


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"modern": False}, id="a handshake-era upstream: it may ask its host something mid-call"),
        pytest.param({"shutting_down": True}, id="shutting down: the fast path refuses it"),
        pytest.param({"lost": True}, id="a splice that cannot queue it now"),
    ],
)
async def test_a_call_the_splice_cannot_carry_takes_the_fast_path(
    change: dict[str, Any], make_upstream: Callable[..., _Upstream]
) -> None:
    upstream = make_upstream(modern=change.get("modern", True))
    if change.get("lost"):
        await upstream.splice.fail_all("gone")
    front = _Front(upstream, shutting_down=change.get("shutting_down", False))
    with trio.fail_after(BOUND_SEC):
        app, sent = await _post(front)
    assert app.taken == {"fast": 1} and front.fast_calls == 1
    assert _answer_of(sent)[1]["result"] == {"content": [], "resultType": "complete"}
