"""Where an HTTP listener (the HTTP front, the admin endpoint) really listens: port 0, the log line, a port in use.

In-process and fast (no child process): each server (``serve_http1``, the front's;
``serve_asgi``, hypercorn for the admin endpoint) serves a one-line ASGI app on
loopback, bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import httpx2
import pytest
import trio
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from supervisor.errors import SupervisorError
from supervisor.ops.http import LOCAL_NAMES, HttpGuard
from supervisor.ops.http1_server import serve_http1
from supervisor.ops.hypercorn_worker import serve_asgi

BOUND_SEC = 10
Serve = Callable[..., Awaitable[None]]


async def _say_hello(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse("hello")(scope, receive, send)


# The guard also answers hypercorn's lifespan messages, as it does for the real listeners.
_hello = HttpGuard(_say_hello, token=None, names=LOCAL_NAMES, paths={"/mcp"}, max_body_bytes=1024)
SERVERS = pytest.mark.parametrize("serve", [serve_http1, serve_asgi], ids=["http1", "hypercorn"])


@SERVERS
async def test_port_0_serves_on_the_port_the_os_picked_reports_and_logs_that_url_and_closes_it_when_cancelled(
    caplog: pytest.LogCaptureFixture, serve: Serve
) -> None:
    caplog.set_level(logging.INFO, logger="supervisor.ops.listen")
    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            urls = await nursery.start(
                lambda task_status: serve(
                    _hello,
                    host="127.0.0.1",
                    port=0,
                    settings_key="supervisor.front",
                    url_path="/mcp",
                    task_status=task_status,
                )
            )
            (url,) = urls
            port = urlsplit(url).port
            assert port is not None and port > 0
            assert url == f"http://127.0.0.1:{port}/mcp"
            async with httpx2.AsyncClient() as http:
                assert (await http.get(url)).text == "hello"
            nursery.cancel_scope.cancel()
        # Once the listener is cancelled the port is closed at once, not whenever the socket is collected.
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", port)
    (record,) = [r for r in caplog.records if getattr(r, "event", None) == "listening"]
    assert record.getMessage() == f"front listening on {url}"
    # Structured fields, so a JSON-log reader finds the URL without parsing the message.
    assert (getattr(record, "listener", None), getattr(record, "url", None)) == ("front", url)


@SERVERS
async def test_a_port_in_use_is_a_supervisor_error_that_names_the_settings_key(serve: Serve) -> None:
    with socket.socket() as taken, trio.fail_after(BOUND_SEC):
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SupervisorError) as refused:
            await serve(_hello, host="127.0.0.1", port=port, settings_key="supervisor.admin")
    message = str(refused.value)
    assert f"127.0.0.1:{port}" in message
    assert "supervisor.admin.port" in message
