"""The stdio wire splice (``supervisor.host.stdio.reader``): which calls cross as bytes, and that nothing is lost.

End to end: a real host drives ``python -m supervisor run`` over stdio with a real
fixture server behind it. The fixture logs every request's JSON-RPC id, so a test
can tell a spliced call (our ``mcp-supervisor/splice/N`` id) from one the SDK
sent (an integer). Host cancellation and ``tool_timeout_sec`` on the splice are
covered by ``test_fidelity_routing``'s cancellation test (stdio front, 2026 x
2026 case); shutdown with calls in flight by ``test_stdio_eof``.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

import mcp_types as types
import pytest
import trio
from mcp import MCPError
from mcp.client.client import ConnectMode
from mcp_types import SERVER_INFO_META_KEY

from supervisor.calls.splice import ID_PREFIX
from supervisor.wire.codec import frame
from supervisor.wire.frames import LineBuffer
from tests.fidelity_host import Recorder
from tests.sidecar import (
    Host,
    fixture_server,
    open_host,
    read_log,
    scaled,
    sidecar_argv,
    sidecar_env,
    text_of,
    wait_until,
    write_settings,
)

pytestmark = pytest.mark.e2e

BOUND_SEC = scaled(60)
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "h", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _call_ids(log: Path, tool: str) -> list[Any]:
    return [e["id"] for e in read_log(log) if e["event"] == "request" and e.get("tool") == tool]


def _cancelled(log: Path) -> list[Any]:
    """The tools whose calls the fixture saw cancelled (by a host's cancel or our courtesy one)."""
    return [e.get("tool") for e in read_log(log) if e["event"] == "request_cancelled"]


def _spliced(request_id: Any) -> bool:
    return isinstance(request_id, str) and request_id.startswith(ID_PREFIX)


NOT_SPLICED: Final = cast(types.RequestParamsMeta, {"x-test/own": 1})
"""A ``_meta`` key of the host's own: the splice forwards only what it knows, so such a call goes the SDK's way."""


async def test_a_plain_call_crosses_the_splice_and_a_call_with_meta_of_its_own_goes_through_the_sdk(
    tmp_path: Path,
) -> None:
    log = tmp_path / "fx.jsonl"
    config = write_settings(tmp_path, {"fx": fixture_server("--name", "fx", "--tools", "echo", "--log", str(log))})
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            await host.wait_tools(lambda names: "mcp__fx__echo" in names)
            spliced = await host.call("mcp__fx__echo", {"text": "hi"})
            general = await host.session.call_tool("mcp__fx__echo", {"text": "hi"}, meta=NOT_SPLICED)
    first, second = _call_ids(log, "echo")
    assert _spliced(first), first
    assert isinstance(second, int), second
    assert spliced.model_dump(exclude={"meta"}) == general.model_dump(exclude={"meta"})
    assert text_of(spliced) == "hi"
    assert spliced.meta is not None and general.meta is not None
    assert spliced.meta[SERVER_INFO_META_KEY] == general.meta[SERVER_INFO_META_KEY]
    assert spliced.meta[SERVER_INFO_META_KEY]["name"] == "mcp-supervisor"


async def test_a_handshake_era_hosts_calls_to_a_handshake_era_server_cross_the_splice_and_its_questions_reach_it(
    tmp_path: Path,
) -> None:
    log, recorder = tmp_path / "fx.jsonl", Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with _fidelity_host(tmp_path, "legacy", recorder, log, "--legacy-only") as host:
            spliced = await host.call("mcp__fx__echo", {"text": "hi"})
            general = await host.session.call_tool("mcp__fx__echo", {"text": "hi"}, meta=NOT_SPLICED)
            # The server asks its host mid-call (sampling, elicitation, roots): the spliced call's host answers.
            assert text_of(await host.call("mcp__fx__sample", {"text": "hi"})) == "sampled: model of ada (ada-model)"
            assert text_of(await host.call("mcp__fx__elicit", {})) == 'elicited: accept {"name": "ada"}'
            assert text_of(await host.call("mcp__fx__roots", {})) == "roots: file:///work/project"
    assert spliced.model_dump() == general.model_dump(), "a handshake-era result crosses as it came"
    assert recorder.samples == ["hi"] and recorder.elicitations == ["form"] and recorder.roots_asked == 1
    first, second = _call_ids(log, "echo")
    assert _spliced(first) and isinstance(second, int), (first, second)
    for tool in ("sample", "elicit", "roots"):
        assert [_spliced(i) for i in _call_ids(log, tool)] == [True], tool


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-host", "handshake-host"])
async def test_a_call_with_a_progress_token_crosses_the_splice_its_notices_first_against_the_hosts_token(
    tmp_path: Path, mode: ConnectMode
) -> None:
    """Issue 47: a progress token keeps a call on the splice; the upstream gets a token of ours (the call's id), and
    the host gets each notice against its own token, in order, before the result."""
    log, recorder = tmp_path / "fx.jsonl", Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with _fidelity_host(tmp_path, mode, recorder, log) as host:
            result = await host.session.call_tool(
                "mcp__fx__progress", {"steps": 3}, progress_callback=recorder.on_progress
            )
            assert [p for p, _, _ in recorder.progress] == [1, 2, 3], "every notice, before the result"
    assert text_of(result) == "progressed 3"
    (request,) = [e for e in read_log(log) if e["event"] == "request" and e.get("tool") == "progress"]
    assert _spliced(request["id"]) and request["meta"]["progressToken"] == request["id"], "our token: the call's id"


@asynccontextmanager
async def _fidelity_host(
    tmp_path: Path, mode: ConnectMode, recorder: Recorder, log: Path, *fixture_args: str
) -> AsyncIterator[Host]:
    """A host of ``mode``'s era (answering as ``recorder``) on a sidecar over the fidelity fixture ``fx``."""
    servers = {"fx": fixture_server("--fidelity", "--name", "fx", "--log", str(log), *fixture_args)}
    bare = Host()
    async with open_host(write_settings(tmp_path, servers), mode, **recorder.client_options(bare)) as host:
        bare.on_message = host.on_message  # type: ignore[method-assign]
        await host.wait_tools(lambda names: "mcp__fx__echo" in names)
        yield host


async def test_a_handshake_era_hosts_calls_to_a_2026_era_server_cross_the_splice_with_its_logs_and_input_rounds(
    tmp_path: Path,
) -> None:
    log, recorder = tmp_path / "fx.jsonl", Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with _fidelity_host(tmp_path, "legacy", recorder, log) as host:
            spliced = await host.call("mcp__fx__echo", {"text": "hi"})
            general = await host.session.call_tool("mcp__fx__echo", {"text": "hi"}, meta=NOT_SPLICED)
            # The host never set a level: it gets every log message of its call, as from the server itself.
            assert text_of(await host.call("mcp__fx__log", {})) == "logged"
            await recorder.wait_for(lambda: len(recorder.logs) == 4, what="four log messages")
            # The server answers with input rounds; the host is asked on its own connection, mid-call.
            assert text_of(await host.call("mcp__fx__sample", {"text": "hi"})) == "sampled: model of ada (ada-model)"
            assert text_of(await host.call("mcp__fx__elicit", {})) == 'elicited: accept {"name": "ada"}'
            assert text_of(await host.call("mcp__fx__roots", {})) == "roots: file:///work/project"
    assert spliced.model_dump() == general.model_dump(), "no resultType, no upstream stamp: as the SDK path"
    assert [(m.level, m.logger) for m in recorder.logs] == [
        ("debug", "fx.fx"), ("info", "fx.fx"), ("warning", "fx.fx"), ("error", "fx.fx")
    ]  # fmt: skip
    assert recorder.samples == ["hi"] and recorder.elicitations == ["form"] and recorder.roots_asked == 1
    first, second = _call_ids(log, "echo")
    assert _spliced(first) and isinstance(second, int), (first, second)
    assert [_spliced(i) for i in _call_ids(log, "log")] == [True]
    for tool in ("sample", "elicit", "roots"):  # the first request on the splice, the round's retry by the SDK
        assert [_spliced(i) for i in _call_ids(log, tool)] == [True, False], tool


async def test_a_2026_era_hosts_calls_to_a_handshake_era_server_cross_the_splice_and_its_questions_are_input_rounds(
    tmp_path: Path,
) -> None:
    log, recorder = tmp_path / "fx.jsonl", Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with _fidelity_host(tmp_path, "auto", recorder, log, "--legacy-only") as host:
            spliced = await host.call("mcp__fx__echo", {"text": "hi"})
            general = await host.session.call_tool("mcp__fx__echo", {"text": "hi"}, meta=NOT_SPLICED)
            # Mid-call the server asks its host: the spliced call becomes an exchange, the host gets an
            # input round on its original request, and its retry (the SDK path) resumes the same upstream call.
            assert text_of(await host.call("mcp__fx__sample", {"text": "hi"})) == "sampled: model of ada (ada-model)"
            assert text_of(await host.call("mcp__fx__elicit", {})) == 'elicited: accept {"name": "ada"}'
            assert text_of(await host.call("mcp__fx__roots", {})) == "roots: file:///work/project"
            assert text_of(await host.call("mcp__fx__echo", {"text": "after"})) == "after"
            await host.call("mcp__fx__elicit_url", {})  # the round in the host's era's shape: no elicitationId
            asked = recorder.elicit_params[-1]
            assert isinstance(asked, types.ElicitRequestURLParams) and asked.elicitation_id is None
    assert spliced.model_dump() == general.model_dump()
    assert recorder.samples == ["hi"] and recorder.elicitations == ["form", "url"] and recorder.roots_asked == 1
    for tool, ids in (("echo", [True, False, True]), ("sample", [True]), ("elicit", [True]), ("roots", [True])):
        assert [_spliced(i) for i in _call_ids(log, tool)] == ids, f"{tool}: sent once, on the splice"


async def test_on_the_splice_server_errors_pass_through_an_unknown_tool_heals_and_a_crash_is_an_error_result(
    tmp_path: Path,
) -> None:
    log = tmp_path / "fx.jsonl"
    tools = "echo,drop_tool,invalid_params,crash"
    config = write_settings(tmp_path, {"fx": fixture_server("--name", "fx", "--tools", tools, "--log", str(log))})
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            await host.wait_tools(lambda names: "mcp__fx__crash" in names)
            # The server drops echo silently: only the unknown-tool heal (I8) can notice. (First: any
            # -32602 re-lists, so an earlier one could drop echo from the catalog before the call.)
            await host.call("mcp__fx__drop_tool", {"name": "echo"})
            with pytest.raises(MCPError) as unknown:
                await host.call("mcp__fx__echo", {"text": "hi"})
            assert unknown.value.error.message == "Unknown tool: echo"
            await host.wait_tools(lambda names: "mcp__fx__echo" not in names)
            with pytest.raises(MCPError) as raised:
                await host.call("mcp__fx__invalid_params")
            assert raised.value.code == types.INVALID_PARAMS
            assert raised.value.error.message == "invalid_params: this tool always rejects its arguments"
            crashed = await host.call("mcp__fx__crash")
            assert crashed.is_error
            assert text_of(crashed) == "server 'fx': connection lost during tools/call crash"
    for tool in ("invalid_params", "drop_tool", "echo", "crash"):
        assert all(_spliced(i) for i in _call_ids(log, tool)), tool
    assert len(_call_ids(log, "echo")) == 1, "the failed call must never be re-sent"


async def test_a_tools_list_is_answered_from_the_encoded_catalog_with_the_same_answer(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    servers = {"fx": fixture_server("--name", "fx", "--tools", "echo", "--extra-tools", "50")}
    with trio.fail_after(BOUND_SEC):
        async with open_host(write_settings(tmp_path, servers)) as host:
            await host.wait_tools(lambda names: len(names) == 51)
            listings = [await host.session.list_tools(cache_mode="bypass") for _ in range(3)]
    assert listings[0] == listings[1] == listings[2]
    assert "tools/list answered on the wire splice" in capfd.readouterr().err


async def test_a_large_call_crosses_the_splice_with_its_text_intact(tmp_path: Path) -> None:
    log = tmp_path / "fx.jsonl"
    config = write_settings(tmp_path, {"fx": fixture_server("--name", "fx", "--tools", "echo", "--log", str(log))})
    text = ('a "quoted" line\\ with \u00e9, \U0001f600 and a tab\t\n' * 4000)[:200_000]
    with trio.fail_after(BOUND_SEC):
        async with open_host(config) as host:
            await host.wait_tools(lambda names: "mcp__fx__echo" in names)
            result = await host.call("mcp__fx__echo", {"text": text})
    assert text_of(result) == text
    assert result.meta is not None and result.meta[SERVER_INFO_META_KEY]["name"] == "mcp-supervisor"
    assert [_spliced(i) for i in _call_ids(log, "echo")] == [True]


async def test_a_large_call_is_routed_cancelled_and_timed_out_like_a_small_one(tmp_path: Path) -> None:
    fx_log, fy_log = tmp_path / "fx.jsonl", tmp_path / "fy.jsonl"
    servers = {
        "fx": fixture_server("--name", "fx", "--tools", "echo,hang", "--log", str(fx_log), tool_timeout_sec=scaled(60)),
        "fy": fixture_server("--name", "fy", "--tools", "echo,hang", "--log", str(fy_log), tool_timeout_sec=scaled(2)),
    }
    pad = "p" * 300_000  # every line below is a large one: read from its bytes, the pad forwarded unread

    def ended(log: Path) -> int:
        return sum(e["event"] == "call_ended" for e in read_log(log))

    with trio.fail_after(BOUND_SEC):
        async with open_host(write_settings(tmp_path, servers)) as host:
            await host.wait_tools(lambda names: {"mcp__fx__hang", "mcp__fy__hang"} <= set(names))
            assert text_of(await host.call("mcp__fx__echo", {"text": "fx" + pad})) == "fx" + pad
            assert text_of(await host.call("mcp__fy__echo", {"text": "fy" + pad})) == "fy" + pad
            with trio.move_on_after(scaled(1.0)):  # the host gives up on its call
                await host.session.call_tool("mcp__fx__hang", {"pad": pad})
            await wait_until(lambda: ended(fx_log) == 1, what="the cancelled call to end upstream")
            timed_out = await host.session.call_tool("mcp__fy__hang", {"pad": pad})  # tool_timeout_sec = 2
            assert timed_out.is_error
            assert "tool_timeout_sec" in text_of(timed_out)
            await wait_until(lambda: ended(fy_log) == 1, what="the timed-out call to end upstream")
    for log in (fx_log, fy_log):
        assert [_spliced(i) for i in _call_ids(log, "echo") + _call_ids(log, "hang")] == [True, True], log


@dataclass
class _RawHost:
    """A host that writes JSON-RPC lines of its own making to the sidecar's stdin (an SDK client would refuse to)."""

    proc: trio.Process
    stdin: trio.abc.SendStream
    stdout: trio.abc.ReceiveStream
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)
    buffer: LineBuffer = field(default_factory=LineBuffer)

    async def send(self, *lines: str) -> None:
        await self.stdin.send_all("".join(line + "\n" for line in lines).encode())

    async def answered(self, request_id: int) -> dict[str, Any]:
        while request_id not in self.answers:
            chunk = await self.stdout.receive_some()
            assert chunk, f"the sidecar closed its stdout (exit {self.proc.poll()}); answers: {self.answers}"
            self.buffer.feed(chunk)
            while (line := self.buffer.next_line()) is not None:
                message = json.loads(line)
                if "id" in message:  # not a notification
                    self.answers[message["id"]] = message
        return self.answers[request_id]


@asynccontextmanager
async def _raw_sidecar(config: Path) -> AsyncIterator[_RawHost]:
    """The sidecar on ``config``, nothing sent yet; on exit its stdin is closed and it must exit 0."""
    proc = await trio.lowlevel.open_process(
        sidecar_argv(config), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=sidecar_env()
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        yield _RawHost(proc, proc.stdin, proc.stdout)
        await proc.stdin.aclose()
        assert await proc.wait() == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            await proc.wait()


@asynccontextmanager
async def _raw_host(config: Path) -> AsyncIterator[_RawHost]:
    """A 2026-era raw host on the sidecar on ``config``, its catalog listed (later calls are spliced)."""
    async with _raw_sidecar(config) as host:
        await host.send(_request(0, "tools/list", {}))  # answered once the catalog is in
        await host.answered(0)
        yield host


def _request(request_id: int, method: str, params: dict[str, Any], raw_arguments: str | None = None) -> str:
    """A 2026-era request line; ``raw_arguments``: the text of ``arguments``, written as it is."""
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": ENVELOPE}})
    return (
        line
        if raw_arguments is None
        else line.replace('"params": {', '"params": {"arguments": ' + raw_arguments + ", ", 1)
    )


async def test_an_escaped_lone_surrogate_in_a_spliced_call_is_answered_and_the_sidecar_keeps_serving(
    tmp_path: Path,
) -> None:
    # "\ud800" is valid JSON text that decodes to a str UTF-8 cannot encode. Re-encoded
    # without escapes, it once raised in the host wire's reader and took the sidecar down.
    config = write_settings(
        tmp_path, {"fx": fixture_server("--name", "fx", "--tools", "echo", tool_timeout_sec=scaled(2))}
    )
    with trio.fail_after(BOUND_SEC):
        async with _raw_host(config) as host:
            await host.send(
                _request(2, "tools/call", {"name": "mcp__fx__echo"}, raw_arguments='{"text": "\\ud800"}'),
                _request(3, "tools/call", {"name": "mcp__fx__echo", "arguments": {"text": "after"}}),
            )
            after, surrogate = await host.answered(3), await host.answered(2)
    assert after["result"]["content"] == [{"type": "text", "text": "after"}]
    # The fixture (an SDK server) cannot parse the lone surrogate and never answers: the splice's timeout does.
    assert surrogate["result"]["isError"] is True
    assert "tool_timeout_sec" in surrogate["result"]["content"][0]["text"]


async def test_host_lines_the_splice_cannot_read_go_to_the_sdk_and_the_sidecar_keeps_serving(tmp_path: Path) -> None:
    # Each line names a method the splice looks for (a list, a cancel while a call is in flight)
    # but is nested past the JSON decoder's recursion limit, or is not an object: once they
    # raised in the host wire's reader and took the sidecar down.
    fx = fixture_server("--name", "fx", "--tools", "echo,hang", tool_timeout_sec=scaled(2))
    config = write_settings(tmp_path, {"fx": fx})
    deep = "[" * 100_000 + "]" * 100_000
    with trio.fail_after(BOUND_SEC):
        async with _raw_host(config) as host:
            await host.send(_request(1, "tools/call", {"name": "mcp__fx__hang", "arguments": {}}))
            await host.send(
                '{"jsonrpc":"2.0","id":5,"method":"tools/list","x":' + deep + "}",
                '{"jsonrpc":"2.0","method":"notifications/cancelled","x":' + deep + "}",
                '["notifications/cancelled", "tools/list"]',
                '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":true}}',
                _request(3, "tools/call", {"name": "mcp__fx__echo", "arguments": {"text": "after"}}),
            )
            after = await host.answered(3)
            hung = await host.answered(1)  # none of them cancelled it (a cancelled call gets no answer)
    assert after["result"]["content"] == [{"type": "text", "text": "after"}]
    assert "tool_timeout_sec" in hung["result"]["content"][0]["text"]


async def test_a_promoted_calls_upstream_request_is_still_bounded_by_tool_timeout_sec(tmp_path: Path) -> None:
    log = tmp_path / "fx.jsonl"
    fx = fixture_server("--fidelity", "--name", "fx", "--legacy-only", "--log", str(log), tool_timeout_sec=scaled(2))
    with trio.fail_after(BOUND_SEC):
        async with _raw_host(write_settings(tmp_path, {"fx": fx})) as host:
            await host.send(_request(1, "tools/call", {"name": "mcp__fx__elicit", "arguments": {}}))
            first = (await host.answered(1))["result"]
            assert first["resultType"] == "input_required"
            ((key, question),) = first["inputRequests"].items()
            assert question["method"] == "elicitation/create"
            # The host does not answer within tool_timeout_sec (2 s): the sidecar abandons the upstream request
            # (a courtesy cancel, which the fixture logs), and the late retry gets the general path's error.
            await wait_until(lambda: "elicit" in _cancelled(log), what="the upstream request abandoned")
            retry = {"name": "mcp__fx__elicit", "arguments": {}, "requestState": first["requestState"]}
            answer = {key: {"action": "accept", "content": {"name": "late"}}}
            await host.send(_request(2, "tools/call", {**retry, "inputResponses": answer}))
            late = (await host.answered(2))["result"]
    assert late["isError"] is True
    assert "tool_timeout_sec" in late["content"][0]["text"]
    assert [_spliced(i) for i in _call_ids(log, "elicit")] == [True]


async def test_a_handshake_era_hosts_first_page_list_is_answered_on_the_splice_in_the_version_it_negotiated(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    config = write_settings(tmp_path, {"fx": fixture_server("--name", "fx", "--tools", "echo", "--extra-tools", "5")})
    with trio.fail_after(BOUND_SEC):
        async with _raw_sidecar(config) as host:
            await host.send('{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}')
            early = await host.answered(1)  # before the handshake: the SDK's refusal, never the catalog
            init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}
            await host.send(
                json.dumps({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": init}),
                '{"jsonrpc":"2.0","method":"notifications/initialized"}',
                '{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}',  # answered once the catalog is in
            )
            negotiated = (await host.answered(2))["result"]["protocolVersion"]
            sdk_answer = (await host.answered(3))["result"]
            request_ids = itertools.count(4)

            async def listed(params: str) -> tuple[dict[str, Any], bool]:
                """One list with ``params`` (JSON text, or "" for none); whether the splice answered it."""
                request_id = next(request_ids)
                await host.send(f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/list"{params}}}')
                answer = (await host.answered(request_id))["result"]
                return answer, "tools/list answered on the wire splice" in capfd.readouterr().err

            async def listed_on_the_splice(params: str) -> dict[str, Any]:
                # The SDK answers until the encoded catalog is filled (once the start-up settled), and
                # whenever the wire's writer is busy (e.g. with a notification): then the next one.
                while True:
                    answer, spliced = await listed(params)
                    if spliced:
                        return answer

            capfd.readouterr()
            first_spliced = await listed_on_the_splice(',"params":{}')
            no_params = await listed_on_the_splice("")
            # A progress token or a cursor is the SDK's (which ignores a cursor it never issued).
            with_meta, meta_spliced = await listed(',"params":{"_meta":{"progressToken":"p"}}')
            with_cursor, cursor_spliced = await listed(',"params":{"cursor":"nope"}')
    assert "error" in early, early
    assert negotiated == "2025-06-18"
    assert len(sdk_answer["tools"]) == 6
    assert [first_spliced, no_params, with_meta, with_cursor] == [sdk_answer] * 4
    assert not meta_spliced
    assert not cursor_spliced


def test_a_spliced_line_keeps_non_ascii_text_as_utf8_and_escapes_only_what_utf8_cannot_hold() -> None:
    assert frame({"text": "d\u00e9j\u00e0 \U0001f600"}) == '{"text":"d\u00e9j\u00e0 \U0001f600"}\n'.encode()
    assert frame({"text": "\u00e9\ud800"}) == b'{"text":"\\u00e9\\ud800"}\n'
