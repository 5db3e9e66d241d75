"""Interop fidelity (DESIGN I13): server-everything behind the sidecar looks to a host as it does directly.

``@modelcontextprotocol/server-everything`` (TypeScript SDK 1.x, handshake era;
installed by ``tests/interop/install.sh``) exercises every MCP feature. Two
scenarios run per host era (``auto`` → 2026-07-28, ``legacy`` → the 2025-11-25
handshake) and per front (stdio, streamable HTTP):

* ``…look_as_they_do_directly``: tools, prompts, resources and templates as
  listed, tool results, prompts/get, resources/read and completion/complete
  answers, each compared with what a direct ``mcp.Client`` of the same era gets
  from its own server-everything process (names under ``mcp__everything__``,
  everything else equal but for what the host's era cannot carry), then a
  resource the server adds at run time (``gzip-file-as-resource``): its
  ``resources/list_changed`` reaches the host, which lists and reads it.
* ``…reach_the_host``: roots (``get-roots-list``), progress
  (``trigger-long-running-operation``, in order on the host's wire before the
  result; the ``wire`` fixture records what the host's transport receives),
  sampling, form and URL elicitation (both the request path and the -32042
  error path), logging (``toggle-simulated-logging``, logger named after the
  server; a handshake-era host's ``logging/setLevel`` honoured) and resource
  subscriptions (``toggle-subscriber-updates``).

One more test puts two hosts of different eras on one HTTP front: each gets
updates for its own subscribed URI only, and its own answers to sampling.

Facts about the server that the assertions rely on: conditional tools (roots,
sampling, elicitation) are registered on ``initialized`` and announced with
``tools/list_changed``. 350 ms after ``initialized`` it asks for roots on its
own; if no host call is in flight then, the sidecar cannot attribute the request
and refuses it, and the server asks again inside ``get-roots-list``, which every
``…reach_the_host`` scenario calls first. Logging and resource updates send one
message at once, then one every 5 s (the tests never wait for the second).

Every test is bounded by ``trio.fail_after``; no test sleeps for ordering.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final

import mcp_types as types
import pytest
import trio
from mcp import Client, MCPError
from mcp.client.client import ConnectMode
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types import URL_ELICITATION_REQUIRED
from pydantic import BaseModel

from supervisor.wire.streams import ReadStreamView
from tests import sidecar
from tests.fidelity_host import (
    FRONTS,
    HOST_ERAS,
    HTTP_CLIENT_LEAKS_ASYNCGENS,
    ROOT_URI,
    Recorder,
    listening_for_updates,
)
from tests.interop.test_interop import EVERYTHING_JS
from tests.sidecar import (
    REPO_ROOT,
    Host,
    http_supervisor_table,
    open_host,
    open_http_host,
    open_http_sidecar,
    scaled,
    text_of,
    write_settings,
)

pytestmark = pytest.mark.e2e

BOUND_SEC: Final = scaled(45)
"""Per test; a scenario takes 3-5 s, most of it node's startup (twice with the direct baseline)."""
CATALOG_BOUND_SEC: Final = scaled(25)
SERVER: Final = "everything"
PREFIX: Final = f"mcp__{SERVER}__"
TEXT_TEMPLATE: Final = "demo://resource/dynamic/text/{resourceId}"
BLOB_TEMPLATE: Final = "demo://resource/dynamic/blob/{resourceId}"
STATIC_DOC: Final = "demo://resource/static/document/features.md"
SUBSCRIBED: Final = "demo://resource/dynamic/text/1"
OTHER: Final = "demo://resource/dynamic/text/2"
CONDITIONAL_TOOL: Final = f"{PREFIX}trigger-url-elicitation"
"""Registered last, on ``initialized``: once the host lists it, the catalog is complete."""
SIMULATED_LOGS: Final[dict[str, str]] = {
    "debug": "Debug-level message",
    "info": "Info-level message",
    "notice": "Notice-level message",
    "warning": "Warning-level message",
    "error": "Error-level message",
    "critical": "Critical-level message",
    "alert": "Alert level-message",  # sic: the server's own spelling
    "emergency": "Emergency-level message",
}
"""What ``toggle-simulated-logging`` sends (one of these, at a random level) with a stdio session."""
ELICITED_FIELDS: Final = [
    "name",
    "check",
    "firstLine",
    "email",
    "homepage",
    "birthdate",
    "integer",
    "number",
    "untitledSingleSelectEnum",
    "untitledMultipleSelectEnum",
    "titledSingleSelectEnum",
    "titledMultipleSelectEnum",
    "legacyTitledEnum",
]


# -- the host's wire ---------------------------------------------------------------------


class _RecordingReader(ReadStreamView):
    """A transport's read stream that appends every JSON-RPC message to ``wire`` as the host receives it."""

    def __init__(self, inner: Any, wire: list[types.JSONRPCMessage]) -> None:
        super().__init__(inner)
        self._wire = wire

    async def receive(self) -> SessionMessage | Exception:
        item = await super().receive()
        if isinstance(item, SessionMessage):
            self._wire.append(item.message)
        return item


def _recording(
    transport: Callable[..., AbstractAsyncContextManager[Any]], wire: list[types.JSONRPCMessage]
) -> Callable[..., AbstractAsyncContextManager[Any]]:
    @asynccontextmanager
    async def recorded(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with transport(*args, **kwargs) as (read_stream, write_stream):
            yield _RecordingReader(read_stream, wire), write_stream

    return recorded


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> list[types.JSONRPCMessage]:
    """What the host receives, in wire order (both fronts' host transports are wrapped)."""
    received: list[types.JSONRPCMessage] = []
    monkeypatch.setattr(sidecar, "line_transport", _recording(sidecar.line_transport, received))
    monkeypatch.setattr(sidecar, "streamable_http_client", _recording(streamable_http_client, received))
    return received


def _progress_then_result(wire: list[types.JSONRPCMessage], result_prefix: str) -> tuple[list[Any], list[Any]]:
    """Progress values for the request whose result text starts with ``result_prefix``: (before it, after it)."""
    answer = next(
        (
            i
            for i, message in enumerate(wire)
            if isinstance(message, types.JSONRPCResponse)
            and str(message.result.get("content", [{}])[0].get("text", "")).startswith(result_prefix)
        ),
        None,
    )
    assert answer is not None, f"no response starting {result_prefix!r} reached the host"
    response = wire[answer]
    assert isinstance(response, types.JSONRPCResponse)
    token = response.id  # the SDK client uses the request id as the progress token

    def values(messages: list[types.JSONRPCMessage]) -> list[Any]:
        return [
            (m.params["progress"], m.params.get("total"))
            for m in messages
            if isinstance(m, types.JSONRPCNotification)
            and m.method == "notifications/progress"
            and m.params is not None
            and m.params.get("progressToken") == token
        ]

    return values(wire[:answer]), values(wire[answer + 1 :])


# -- hosts ---------------------------------------------------------------------------------


@asynccontextmanager
async def everything_host(
    tmp_path: Path, front: str, mode: ConnectMode, recorder: Recorder, server: dict[str, object]
) -> AsyncIterator[Host]:
    """One sidecar (stdio or HTTP front) over server-everything, and one host on it with every capability.

    The host opts into every log level: a 2026-era host per request (``log_level``),
    a handshake-era one with ``logging/setLevel``. It returns once the host lists
    the tools the server registers on ``initialized``.
    """
    servers = {SERVER: server}
    options: dict[str, Any] = {"log_level": "debug", **recorder.client_options(Host())}
    if front == "stdio":
        async with open_host(write_settings(tmp_path, servers), mode, **options) as host:
            await _ready(host)
            yield host
        assert host.bad_frames == []
        assert host.exit_code == 0
        return
    config = write_settings(tmp_path, servers, supervisor=http_supervisor_table())
    async with (
        open_http_sidecar(config) as sidecar,
        open_http_host(sidecar.url, sidecar.token, mode, **options) as host,
    ):
        await _ready(host)
        yield host
    assert sidecar.exit_code == 0


async def _ready(host: Host) -> None:
    await host.wait_tools(lambda names: CONDITIONAL_TOOL in names, bound_sec=CATALOG_BOUND_SEC)
    if not host.modern:
        await _set_level(host, "debug")


@asynccontextmanager
async def direct_client(mode: ConnectMode, recorder: Recorder) -> AsyncIterator[Client]:
    """A host's ``mcp.Client`` on its own server-everything process, no sidecar in between: the baseline."""
    node = shutil.which("node")
    assert node is not None
    params = StdioServerParameters(
        command=node, args=[str(EVERYTHING_JS), "stdio"], env=dict(os.environ), cwd=str(REPO_ROOT)
    )
    watcher = Host()  # counts the server's tools/list_changed notices
    async with Client(params, mode=mode, **recorder.client_options(watcher)) as client:
        with trio.fail_after(CATALOG_BOUND_SEC):
            while True:
                seen = watcher.notices
                tools = await client.list_tools(cache_mode="bypass")
                if CONDITIONAL_TOOL.removeprefix(PREFIX) in [tool.name for tool in tools.tools]:
                    break
                await watcher.wait_notice(after=seen)
        yield client


async def _set_level(host: Host, level: types.LoggingLevel) -> None:
    """``logging/setLevel`` (handshake era; the Client wrapper is deprecated, so it is sent raw)."""
    await host.session.session.send_request(
        types.SetLevelRequest(params=types.SetLevelRequestParams(level=level)), types.EmptyResult
    )


def _acknowledged(message: types.LoggingMessageNotificationParams, uri: str) -> bool:
    """Whether ``message`` is the server's info-level log of a ``resources/subscribe`` to ``uri`` (stdio session)."""
    return (message.level, message.logger, message.data) == (
        "info",
        SERVER,
        f"Received Subscribe Resource request for URI: {uri} ",
    )


async def _subscribe(host: Host, uri: str) -> None:
    await host.session.session.send_request(
        types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
    )


async def _unsubscribe(host: Host, uri: str) -> None:
    await host.session.session.send_request(
        types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)), types.EmptyResult
    )


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


def _texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


# -- what a host sees of the catalog ---------------------------------------------------------


async def _catalog_view(client: Client, prefix: str) -> dict[str, Any]:
    """Everything a host can ask server-everything that does not depend on the time of day."""
    tools = await client.list_tools(cache_mode="bypass")
    prompts = await client.list_prompts(cache_mode="bypass")
    resources = await client.list_resources(cache_mode="bypass")
    templates = await client.list_resource_templates(cache_mode="bypass")
    args = await client.get_prompt(f"{prefix}args-prompt", {"city": "Paris", "state": "TX"})
    simple = await client.get_prompt(f"{prefix}simple-prompt")
    doc = await client.read_resource(STATIC_DOC, cache_mode="bypass")
    completable = types.PromptReference(name=f"{prefix}completable-prompt")
    department = await client.complete(completable, {"name": "department", "value": "S"})
    member = await client.complete(
        completable, {"name": "name", "value": ""}, context_arguments={"department": "Engineering"}
    )
    resource_type = await client.complete(
        types.PromptReference(name=f"{prefix}resource-prompt"), {"name": "resourceType", "value": "B"}
    )
    template_id = await client.complete(
        types.ResourceTemplateReference(uri=TEXT_TEMPLATE), {"name": "resourceId", "value": "42"}
    )
    not_an_id = await client.complete(
        types.ResourceTemplateReference(uri=BLOB_TEMPLATE), {"name": "resourceId", "value": "x"}
    )
    results = [
        await client.call_tool(f"{prefix}{tool}", arguments)
        for tool, arguments in (
            ("echo", {"message": "through the sidecar"}),
            ("get-sum", {"a": 2, "b": 40.5}),
            ("get-sum", {"a": "two", "b": 40}),  # refused by the server's own argument validation
            ("get-tiny-image", {}),
            ("get-annotated-message", {"messageType": "error", "includeImage": True}),
            ("get-structured-content", {"location": "Chicago"}),
            ("get-resource-links", {"count": 4}),
        )
    ]
    return {
        "tool results": [result.model_copy(update={"meta": None}) for result in results],
        "tools": sorted((t.model_copy(update={"name": t.name.removeprefix(prefix)}) for t in tools.tools), key=_name),
        "prompts": sorted(
            (p.model_copy(update={"name": p.name.removeprefix(prefix)}) for p in prompts.prompts), key=_name
        ),
        "resources": sorted(resources.resources, key=lambda r: str(r.uri)),
        "templates": sorted(templates.resource_templates, key=lambda t: t.uri_template),
        "args-prompt": args.messages,
        "simple-prompt": simple.messages,
        "static document": doc.contents,
        "completions": [c.completion for c in (department, member, resource_type, template_id, not_an_id)],
    }


def _name(item: types.Tool | types.Prompt) -> str:
    return item.name


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("mode", HOST_ERAS)
async def test_server_everything_catalog_prompts_resources_and_completions_look_as_they_do_directly(
    tmp_path: Path, mode: ConnectMode, front: str, everything_server: dict[str, object]
) -> None:
    recorder = Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with direct_client(mode, Recorder(name="direct")) as direct:
            expected = await _catalog_view(direct, "")
        async with everything_host(tmp_path, front, mode, recorder, everything_server) as host:
            seen = await _catalog_view(host.session, PREFIX)
            if host.modern:
                # The direct client fell back to the handshake; the 2026-07-28 wire has no Tool.execution
                # (tasks left the core spec), so a 2026-era host cannot be shown it, by us or anyone.
                expected["tools"] = [tool.model_copy(update={"execution": None}) for tool in expected["tools"]]
            # What differs is only the prefix on tool and prompt names (taken off above).
            for key, value in expected.items():
                assert _dump(seen[key]) == _dump(value), key
            assert [c.values for c in seen["completions"]] == [
                ["Sales", "Support"],
                ["Alice", "Bob", "Charlie"],
                ["Blob"],
                ["42"],
                [],
            ]
            results: list[types.CallToolResult] = seen["tool results"]
            assert [r.is_error for r in results] == [False, False, True, False, False, False, False]
            assert text_of(results[0]) == "Echo: through the sidecar"
            assert {type(block).__name__ for r in results for block in r.content} >= {
                "TextContent",
                "ImageContent",
                "ResourceLink",
            }
            assert results[5].structured_content is not None
            assert set(results[5].structured_content) == {"temperature", "conditions", "humidity"}
            assert seen["args-prompt"][0].content == types.TextContent(text="What's weather in Paris, TX?")
            assert {t.uri_template for t in seen["templates"]} == {TEXT_TEMPLATE, BLOB_TEMPLATE}
            assert STATIC_DOC in {str(r.uri) for r in seen["resources"]}

            # Content made at read time (it carries the time of day) is still the server's own.
            text = await host.session.read_resource("demo://resource/dynamic/text/5", cache_mode="bypass")
            assert len(text.contents) == 1 and isinstance(text.contents[0], types.TextResourceContents)
            assert text.contents[0].text.startswith("Resource 5: This is a plaintext resource created at ")
            blob = await host.session.read_resource("demo://resource/dynamic/blob/6", cache_mode="bypass")
            assert len(blob.contents) == 1 and isinstance(blob.contents[0], types.BlobResourceContents)
            decoded = base64.b64decode(blob.contents[0].blob).decode()
            assert decoded.startswith("Resource 6: This is a base64 blob created at ")
            embedded = await host.session.get_prompt(
                f"{PREFIX}resource-prompt", {"resourceType": "Text", "resourceId": "3"}
            )
            assert embedded.messages[0].content == types.TextContent(
                text="This prompt includes the Text resource with id: 3. Please analyze the following resource:"
            )
            block = embedded.messages[1].content
            assert isinstance(block, types.EmbeddedResource)
            assert str(block.resource.uri) == "demo://resource/dynamic/text/3"

            # A resource added at run time: the host is told, lists it and reads it.
            session_uri = "demo://resource/session/hello.txt.gz"
            async with listening_for_updates(host, [], resources=True) if host.modern else _nothing():
                notices = recorder.resource_notices
                added = await host.call(
                    f"{PREFIX}gzip-file-as-resource",
                    {"name": "hello.txt.gz", "data": "data:text/plain,hello%20sidecar"},
                )
                assert not added.is_error, added
                link = added.content[0]
                assert isinstance(link, types.ResourceLink)
                assert str(link.uri) == session_uri
                await recorder.wait_for(lambda: recorder.resource_notices > notices, what="resources/list_changed")
            listed = await host.session.list_resources(cache_mode="bypass")
            assert session_uri in {str(r.uri) for r in listed.resources}
            read = await host.session.read_resource(session_uri, cache_mode="bypass")
            assert isinstance(read.contents[0], types.BlobResourceContents)
            assert gzip.decompress(base64.b64decode(read.contents[0].blob)) == b"hello sidecar"


# -- server→client requests, progress, logging, subscriptions ----------------------------------


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("mode", HOST_ERAS)
async def test_server_everything_roots_progress_sampling_elicitation_logging_and_subscriptions_reach_the_host(
    tmp_path: Path,
    mode: ConnectMode,
    front: str,
    everything_server: dict[str, object],
    wire: list[types.JSONRPCMessage],
) -> None:
    recorder = Recorder(name="ada")
    with trio.fail_after(BOUND_SEC):
        async with everything_host(tmp_path, front, mode, recorder, everything_server) as host:
            session = host.session

            # roots: the server asks the host (inside this call) and reports the host's answer
            roots = await host.call(f"{PREFIX}get-roots-list")
            assert not roots.is_error, roots
            assert text_of(roots).startswith(f"Current MCP Roots (1 total):\n\n1. ada\n   URI: {ROOT_URI}\n")
            assert recorder.roots_asked >= 1
            await recorder.wait_for(
                lambda: (
                    ("info", "everything.everything-server", "Roots updated: 1 root(s) received from client")
                    in [(m.level, m.logger, m.data) for m in recorder.logs]
                ),
                what="the server's log about the roots, under logger everything.everything-server",
            )

            # progress: every step, in order, on the host's wire before the result
            done = await session.call_tool(
                f"{PREFIX}trigger-long-running-operation",
                {"duration": 0.3, "steps": 3},
                progress_callback=recorder.on_progress,
            )
            assert text_of(done) == "Long running operation completed. Duration: 0.3 seconds, Steps: 3."
            before, after = _progress_then_result(wire, "Long running operation completed.")
            assert (before, after) == ([(1, 3), (2, 3), (3, 3)], [])
            await recorder.wait_for(lambda: len(recorder.progress) == 3, what="3 progress callbacks")
            assert recorder.progress == [(1, 3, None), (2, 3, None), (3, 3, None)]

            # sampling: the host's model answers, and the server returns that answer
            sampled = await host.call(f"{PREFIX}trigger-sampling-request", {"prompt": "hi there", "maxTokens": 5})
            assert not sampled.is_error, sampled
            head, _, answer = text_of(sampled).partition("\n")
            assert head == "LLM sampling result: "
            assert json.loads(answer) == {
                "model": "ada-model",
                "role": "assistant",
                "content": {"type": "text", "text": "model of ada"},
            }
            assert recorder.samples == ["Resource trigger-sampling-request context: hi there"]

            # form elicitation: the server's whole schema reaches the host, the host's answer reaches the server
            elicited = await host.call(f"{PREFIX}trigger-elicitation-request")
            assert _texts(elicited)[:2] == ["✅ User provided the requested information!", "User inputs:\n- Name: ada"]
            form = recorder.elicit_params[-1]
            assert isinstance(form, types.ElicitRequestFormParams)
            assert form.message == "Please provide inputs for the following fields:"
            assert list(form.requested_schema["properties"]) == ELICITED_FIELDS
            assert form.requested_schema["required"] == ["name"]
            assert form.requested_schema["properties"]["legacyTitledEnum"]["enumNames"][0] == "Cats"

            # URL elicitation, request path: the host is sent to the URL and accepts
            url = await host.call(
                f"{PREFIX}trigger-url-elicitation", {"url": "https://example.com/consent", "elicitationId": "el-1"}
            )
            assert _texts(url)[0] == (
                "✅ User completed the URL elicitation flow.\nElicitation ID: el-1\nURL: https://example.com/consent"
            )
            asked = recorder.elicit_params[-1]
            assert isinstance(asked, types.ElicitRequestURLParams)
            assert asked.url == "https://example.com/consent"
            # The 2026-07-28 wire has no elicitationId in an input request; the handshake carries it.
            assert asked.elicitation_id == (None if host.modern else "el-1")

            # URL elicitation, error path: -32042 with its elicitations; the same call again then proceeds
            arguments = {"url": "https://example.com/after", "elicitationId": "el-2", "errorPath": True}
            with pytest.raises(MCPError) as required:
                await host.call(f"{PREFIX}trigger-url-elicitation", arguments)
            assert required.value.code == URL_ELICITATION_REQUIRED
            assert (
                required.value.error.message == "MCP error -32042: This request requires browser-based authorization."
            )
            assert isinstance(required.value.error.data, dict)
            [prerequisite] = required.value.error.data["elicitations"]
            assert (prerequisite["mode"], prerequisite["url"]) == ("url", "https://modelcontextprotocol.io")
            retried = await host.call(f"{PREFIX}trigger-url-elicitation", arguments)
            assert _texts(retried)[0].endswith("Elicitation ID: el-2\nURL: https://example.com/after")

            # logging: the server's message, its level and data intact, under logger "everything"
            toggled = await host.call(f"{PREFIX}toggle-simulated-logging")
            assert text_of(toggled).startswith("Started simulated, random-leveled logging")
            await recorder.wait_for(
                lambda: any(m.logger == SERVER for m in recorder.logs), what="a simulated log message"
            )
            simulated = [m for m in recorder.logs if m.logger == SERVER]
            assert all(m.data == SIMULATED_LOGS[m.level] for m in simulated), simulated
            stopped = await host.call(f"{PREFIX}toggle-simulated-logging")
            assert text_of(stopped).startswith("Stopped simulated logging")

            # subscriptions: updates for the subscribed URI only (the other one was given up again);
            # a handshake-era host also sees the server acknowledge each subscription in an info-level log,
            # except while it has set its level above info
            async with listening_for_updates(host, [SUBSCRIBED]) if host.modern else _nothing():
                if not host.modern:
                    await _set_level(host, "warning")
                    await _subscribe(host, OTHER)
                    await _set_level(host, "debug")
                    await _subscribe(host, SUBSCRIBED)
                    await _unsubscribe(host, OTHER)
                    await recorder.wait_for(
                        lambda: any(_acknowledged(m, SUBSCRIBED) for m in recorder.logs),
                        what="the server's log about the subscription",
                    )
                    assert [m for m in recorder.logs if _acknowledged(m, OTHER)] == []
                started = await host.call(f"{PREFIX}toggle-subscriber-updates")
                assert text_of(started).startswith("Started simulated resource updated notifications")
                await recorder.wait_for(lambda: len(recorder.updated) >= 1, what="resources/updated")
                stopped = await host.call(f"{PREFIX}toggle-subscriber-updates")
                assert text_of(stopped).startswith("Stopped simulated resource updates")
            assert recorder.updated == [SUBSCRIBED] * len(recorder.updated)


@HTTP_CLIENT_LEAKS_ASYNCGENS
async def test_two_hosts_on_one_http_front_get_only_their_own_updates_and_answer_only_their_own_sampling(
    tmp_path: Path, everything_server: dict[str, object]
) -> None:
    """A 2026-era host listens to one URI, a handshake-era host subscribes to another, on one sidecar."""
    alice, bob = Recorder(name="alice"), Recorder(name="bob")
    config = write_settings(tmp_path, {SERVER: everything_server}, supervisor=http_supervisor_table())
    with trio.fail_after(BOUND_SEC):
        async with (
            open_http_sidecar(config) as sidecar,
            open_http_host(sidecar.url, sidecar.token, "auto", **alice.client_options(Host())) as a,
            open_http_host(sidecar.url, sidecar.token, "legacy", **bob.client_options(Host())) as b,
        ):
            assert (a.modern, b.modern) == (True, False)
            await _ready(a)
            await _ready(b)
            for host, recorder in ((a, alice), (b, bob)):
                sampled = await host.call(f"{PREFIX}trigger-sampling-request", {"prompt": recorder.name})
                assert json.loads(text_of(sampled).partition("\n")[2])["model"] == f"{recorder.name}-model"
            assert alice.samples == ["Resource trigger-sampling-request context: alice"]
            assert bob.samples == ["Resource trigger-sampling-request context: bob"]

            async with listening_for_updates(a, [SUBSCRIBED]):
                await _subscribe(b, OTHER)
                # The server sends one update per subscribed URI at once, both on the sidecar's one connection.
                await b.call(f"{PREFIX}toggle-subscriber-updates")
                await alice.wait_for(lambda: len(alice.updated) >= 1, what="alice's update")
                await bob.wait_for(lambda: len(bob.updated) >= 1, what="bob's update")
                await b.call(f"{PREFIX}toggle-subscriber-updates")
            assert alice.updated == [SUBSCRIBED] * len(alice.updated)
            assert bob.updated == [OTHER] * len(bob.updated)
        assert sidecar.exit_code == 0


def _dump(value: Any) -> Any:
    if isinstance(value, list):
        return [_dump(item) for item in value]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value
