"""Shared helpers for the end-to-end tests: settings files, a host driving ``supervisor run``, fixture logs.

Every process these helpers start carries the current test's marker
(``MCP_SUPERVISOR_TEST_MARK``, set by ``conftest.py``) in its environment: the
sidecar through its own environment, fixture servers through their ``env``
table in the generated settings (the sidecar passes it on, and grandchildren
inherit it). ``conftest.py`` scans ``/proc`` for the marker after each test (I11).

The host is a real ``mcp.Client`` over a small stdio transport of our own, so a
test knows the sidecar's pid and exit code, and sees any stdout line that is not
a JSON-RPC frame (``Host.bad_frames``) instead of having it swallowed. For the
HTTP front, ``open_http_sidecar`` runs the sidecar as a service (stopped with
SIGTERM, exit code recorded) and ``open_http_host`` connects a host to it over
streamable HTTP with the bearer token.

Every process started here listens on port 0 where it listens at all, and the
test reads the real address from the line the process logs (``ProcessLog``):
nothing guesses a free port.

**One scale factor.** Every deadline of the e2e tests (``trio.fail_after``
bounds, the bounds of the waits here, the timeouts and windows written into
generated settings) is a nominal number of seconds passed through ``scaled``,
which multiplies it by ``$MCP_SUPERVISOR_TEST_SCALE`` (default 1.0). On a slow
or loaded machine, ``MCP_SUPERVISOR_TEST_SCALE=3 pytest`` gives every deadline
three times the room without touching a test.

Concurrency: ``open_host`` owns one nursery (the transport's pumps, the sidecar's
stderr relay, and for 2026-era hosts a task holding ``subscriptions/listen``
open). Every wait here is bounded, either by the caller's ``trio.fail_after`` or
by an explicit (scaled) bound.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
import trio
from mcp import Client, MCPError
from mcp.client.client import ConnectMode
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from supervisor.compat.sdk import TransportStreams, create_mcp_http_client
from supervisor.wire.frames import LineBuffer

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
FIXTURE_MODULE: Final = "tests.fixtures.fixture_server"
MARK_ENV: Final = "MCP_SUPERVISOR_TEST_MARK"
SCALE_ENV: Final = "MCP_SUPERVISOR_TEST_SCALE"
HOST_MODES: Final = ("auto", "legacy")


def _scale_from_environment() -> float:
    text = os.environ.get(SCALE_ENV, "1.0")
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{SCALE_ENV}={text!r}: expected a positive number of times the nominal deadlines, e.g. 2")
    return value


SCALE: Final = _scale_from_environment()
"""``$MCP_SUPERVISOR_TEST_SCALE``: the factor every e2e deadline is multiplied by (default 1.0)."""


def scaled(seconds: float) -> float:
    """A nominal deadline in seconds, times the suite's scale factor: every e2e deadline goes through here."""
    return seconds * SCALE


def scaled_ms(milliseconds: float) -> int:
    """``scaled`` for the millisecond windows of generated settings (reconnect delays)."""
    return max(1, round(milliseconds * SCALE))


SIDECAR_EXIT_BOUND_SEC: Final = scaled(10.0)
"""How long the sidecar may take to exit once the host closes its stdin."""
STARTUP_BOUND_SEC: Final = scaled(30.0)
"""How long a process may take to start and announce itself (Python start-up is slow on a loaded machine)."""
WAIT_BOUND_SEC: Final = scaled(30.0)
"""Default bound of ``wait_until``, ``Host.wait_tools`` and ``run_cli``."""
POLL_FALLBACK_SEC: Final = 0.5
"""``wait_tools`` re-lists at least this often even if no change notice arrives."""
DRAIN_BOUND_SEC: Final = scaled(2.0)
"""How long the stderr relay may read the tail of an exited process's stderr."""

FAST_DEFAULTS: Final[dict[str, Any]] = {
    "startup_timeout_sec": scaled(20),
    "tool_timeout_sec": scaled(20),
    "reconnect": {"max_attempts": 5, "initial_delay_ms": 100, "max_delay_ms": 1000, "jitter": 0},
}


def current_mark() -> str:
    """The running test's marker (``conftest.py`` puts it into the environment)."""
    return os.environ[MARK_ENV]


# -- settings files ----------------------------------------------------------------------


def fixture_server(*args: str, **table: Any) -> dict[str, Any]:
    """A ``[mcp_servers.<name>]`` table that starts the fixture server with ``args``."""
    return {"command": sys.executable, "args": ["-m", FIXTURE_MODULE, *args], "cwd": str(REPO_ROOT), **table}


def command_server(argv: Sequence[str], **table: Any) -> dict[str, Any]:
    """A stdio server table for an arbitrary command line."""
    return {"command": argv[0], "args": list(argv[1:]), "cwd": str(REPO_ROOT), **table}


def write_settings(
    tmp_path: Path,
    servers: Mapping[str, Mapping[str, Any]],
    *,
    defaults: Mapping[str, Any] | None = None,
    supervisor: Mapping[str, Any] | None = None,
    views: Mapping[str, Mapping[str, Any]] | None = None,
    name: str = "settings.toml",
) -> Path:
    """Write a settings file with ``[views.<name>]`` tables; every stdio server's ``env`` gets the marker."""
    marked: dict[str, Any] = {}
    for server_name, table in servers.items():
        server = dict(table)
        if "command" in server:
            server["env"] = {**server.get("env", {}), MARK_ENV: current_mark()}
        marked[server_name] = server
    # The suite was written in the mcp__<server>__<tool> form ([supervisor.names] form = "mcp"); the short
    # default has tests of its own (tests/config/test_names.py, tests/hosts, tests/e2e/test_code_mode.py).
    document: dict[str, Any] = {
        "supervisor": {
            "log_level": "debug",
            "shutdown_grace_sec": scaled(2),
            "names": {"form": "mcp"},
            **(supervisor or {}),
        },
        "defaults": _deep_merge(FAST_DEFAULTS, defaults or {}),
        "mcp_servers": marked,
        **({"views": views} if views else {}),
    }
    path = tmp_path / name
    path.write_text(to_toml(document), encoding="utf-8")
    return path


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def to_toml(document: Mapping[str, Any]) -> str:
    """Serialize nested dicts of strings, numbers, bools, lists of them and lists of tables (all this suite needs)."""
    lines: list[str] = []

    def is_table_array(value: Any) -> bool:
        return isinstance(value, list) and bool(value) and all(isinstance(item, Mapping) for item in value)

    def emit(prefix: str, table: Mapping[str, Any], *, header: str | None = None) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping) and not is_table_array(v)}
        if header is not None:
            lines.append(header)
        elif prefix:
            lines.append(f"[{prefix}]")
        # JSON strings, numbers, booleans and arrays of them are valid TOML values.
        lines.extend(f"{json.dumps(key)} = {json.dumps(value)}" for key, value in scalars.items())
        lines.append("")
        for key, value in table.items():
            path = f"{prefix}.{json.dumps(key)}" if prefix else json.dumps(key)
            if isinstance(value, Mapping):
                emit(path, value)
            elif is_table_array(value):
                for item in value:
                    emit(path, item, header=f"[[{path}]]")

    emit("", document)
    return "\n".join(lines)


# -- fixture logs ------------------------------------------------------------------------


def read_log(path: Path) -> list[dict[str, Any]]:
    """The fixture's ``--log`` events (empty if the file does not exist yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def started_pids(path: Path) -> list[int]:
    """Pids of every fixture process that logged a start, in order."""
    return [int(event["pid"]) for event in read_log(path) if event["event"] == "start"]


def called_tools(path: Path) -> list[str]:
    """Raw tool names of every ``tools/call`` the fixture received."""
    return [str(e["tool"]) for e in read_log(path) if e["event"] == "request" and e.get("method") == "tools/call"]


async def wait_until(predicate: Callable[[], bool], *, what: str, bound_sec: float = WAIT_BOUND_SEC) -> None:
    """Poll external state (a log file, /proc) until ``predicate`` holds; fail after ``bound_sec``."""
    with trio.move_on_after(bound_sec):
        # Polling: there is no event for "another process wrote a file / exited".
        while not predicate():  # noqa: ASYNC110
            await trio.sleep(0.02)
        return
    raise AssertionError(f"timed out after {bound_sec:g}s waiting for {what}")


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


# -- what a child process says on stderr ------------------------------------------------

_LISTENING: Final = re.compile(r"(?P<listener>[\w.-]+) (?:listening on|ready) (?P<url>https?://\S+)")
"""The sidecar's ``<listener> listening on URL`` log line, or the HTTP fixture's ``fixture_server ready URL``."""


@dataclass
class ProcessLog:
    """A child's stderr, relayed to ours (pytest shows it on failure) and watched for the URLs it listens on.

    ``listening`` maps a listener (``host.front``, ``admin``, ``fixture_server``) to its URL,
    from the text line or from a JSON log line with ``"event": "listening"``.
    """

    listening: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    """Every complete line so far."""
    closed: bool = False
    _changed: trio.Event = field(default_factory=trio.Event)

    async def pump(self, stream: trio.abc.ReceiveStream) -> None:
        """Relay ``stream`` to our stderr until EOF, noting each complete line."""
        pending = bytearray()
        try:
            async for chunk in stream:
                os.write(2, chunk)
                pending += chunk
                while (end := pending.find(b"\n")) >= 0:
                    self._note(pending[:end].decode(errors="replace"))
                    del pending[: end + 1]
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        finally:
            self.closed = True
            self._wake()

    def _note(self, line: str) -> None:
        self.lines.append(line)
        self._wake()  # for wait_line
        if line.startswith("{"):
            with suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("event") == "listening":
                    self.listening[str(entry["listener"])] = str(entry["url"])
                    self._wake()
            return
        match = _LISTENING.search(line)
        if match is not None:
            self.listening[match["listener"]] = match["url"]
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_listening(self, listener: str, *, bound_sec: float = STARTUP_BOUND_SEC) -> str:
        """The URL ``listener`` announced, once it has; fails if the process ends first or after ``bound_sec``."""
        with trio.move_on_after(bound_sec):
            while listener not in self.listening:
                if self.closed:
                    tail = "\n".join(self.lines[-5:])
                    raise AssertionError(
                        f"the process ended without announcing its {listener} URL; its last lines:\n{tail}"
                    )
                await self._changed.wait()
            return self.listening[listener]
        raise AssertionError(f"no {listener} URL announced within {bound_sec:g}s")

    async def wait_line(self, pattern: str, *, bound_sec: float = STARTUP_BOUND_SEC, after: int = 0) -> re.Match[str]:
        """The first line so far or to come that ``pattern`` matches (from line ``after`` on); fails if the process
        ends first."""
        with trio.move_on_after(bound_sec):
            seen = after
            while True:
                for line in self.lines[seen:]:
                    if (match := re.search(pattern, line)) is not None:
                        return match
                seen = len(self.lines)
                if self.closed:
                    raise AssertionError(f"the process ended without logging a line matching {pattern!r}")
                await self._changed.wait()
        raise AssertionError(f"no line matching {pattern!r} within {bound_sec:g}s")

    async def wait_closed(self) -> None:
        """Return once the relay has read the process's stderr to EOF."""
        while not self.closed:
            await self._changed.wait()


@asynccontextmanager
async def relaying_stderr(proc: trio.Process, log: ProcessLog) -> AsyncIterator[None]:
    """Run ``log.pump`` on ``proc``'s stderr; on exit let it read the tail (bounded), then stop it."""
    assert proc.stderr is not None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(log.pump, proc.stderr)
        try:
            yield
        finally:
            with trio.move_on_after(DRAIN_BOUND_SEC):
                await log.wait_closed()
            nursery.cancel_scope.cancel()


# -- results -----------------------------------------------------------------------------


def text_of(result: types.CallToolResult) -> str:
    """The text of the result's first content block."""
    block = result.content[0]
    assert isinstance(block, types.TextContent), block
    return block.text


# -- the host ----------------------------------------------------------------------------


@dataclass
class Host:
    """A connected host: the ``mcp.Client`` plus what the test can observe about the sidecar."""

    client: Client | None = None
    process: trio.Process | None = None
    exit_code: int | None = None
    exit_after_stdin_closed_sec: float | None = None
    bad_frames: list[bytes] = field(default_factory=list)
    notices: int = 0
    notice_times: list[float] = field(default_factory=list)
    """When each notice arrived (``trio.current_time()``)."""
    log: ProcessLog = field(default_factory=ProcessLog)
    """The sidecar's stderr (relayed to ours): ``await host.log.wait_listening("admin")`` gives the admin URL."""
    _changed: trio.Event = field(default_factory=trio.Event)

    @property
    def session(self) -> Client:
        assert self.client is not None
        return self.client

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def modern(self) -> bool:
        return self.session.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def close_stdin(self) -> None:
        """Hang up the way a host that is done writing does: its answers may still come."""
        assert self.process is not None and self.process.stdin is not None
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await self.process.stdin.aclose()

    def note_change(self) -> None:
        self.notices += 1
        self.notice_times.append(trio.current_time())
        self._changed.set()
        self._changed = trio.Event()

    async def on_message(self, message: IncomingMessage) -> None:
        # A 2026-era host's notices come on its listen stream (``hold_listen_stream`` counts them); the SDK
        # hands each to the message handler as well, and counting both would count every notice twice.
        # (A Host that only counts another connection's notices has no client: it counts them all.)
        if isinstance(message, types.ToolListChangedNotification) and not (self.client is not None and self.modern):
            self.note_change()
        await trio.lowlevel.checkpoint()

    async def wait_notice(self, *, after: int) -> None:
        """Wait until more than ``after`` change notices have arrived (era-appropriate channel)."""
        while self.notices <= after:
            await self._changed.wait()

    async def tool_names(self) -> list[str]:
        """The host's current view of the catalog, never from its cache."""
        return [tool.name for tool in (await self.session.list_tools(cache_mode="bypass")).tools]

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        return await self.session.call_tool(name, arguments or {})

    async def wait_call_succeeds(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        """Call ``name`` until it succeeds (a reconnecting server fails fast); the caller bounds this."""
        while True:
            try:
                result = await self.call(name, arguments)
            except MCPError:
                pass
            else:
                if not result.is_error:
                    return result
            # Polling: the host has no event for "that server is ready again".
            await trio.sleep(0.05)

    async def wait_tools(
        self,
        predicate: Callable[[list[str]], bool],
        *,
        bound_sec: float = WAIT_BOUND_SEC,
        poll_sec: float = POLL_FALLBACK_SEC,
    ) -> list[str]:
        """Re-list on every change notice (or every ``poll_sec``) until ``predicate`` holds."""
        names: list[str] = []
        with trio.move_on_after(bound_sec):
            while True:
                seen = self.notices
                names = await self.tool_names()
                if predicate(names):
                    return names
                with trio.move_on_after(poll_sec):
                    await self.wait_notice(after=seen)
        raise AssertionError(f"the host's tool list did not reach the expected state in {bound_sec:g}s: {names}")


def sidecar_argv(config: Path, command: str = "run", *extra: str) -> list[str]:
    return [sys.executable, "-m", "supervisor", command, "--config", str(config), *extra]


def sidecar_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The sidecar's environment: ours (which carries the marker) plus ``extra``."""
    return {**os.environ, MARK_ENV: current_mark(), **(extra or {})}


@asynccontextmanager
async def line_transport(
    proc: trio.Process,
    *,
    on_bad_line: Callable[[bytes], None] | None = None,
    on_close: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[TransportStreams]:
    """Newline-delimited JSON-RPC over ``proc``'s stdin/stdout, as an ``mcp.Client`` transport.

    A stdout line that is not JSON-RPC goes to ``on_bad_line`` instead of the session.
    ``on_close`` runs (shielded) while the pumps still run, so the peer can flush on its way out.
    Also used by ``bench/``.
    """
    to_client, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_client = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_stdout() -> None:
        assert proc.stdout is not None
        lines = LineBuffer()
        async with to_client:
            async for chunk in proc.stdout:
                lines.feed(chunk)
                while (line := lines.next_line()) is not None:
                    if not line.strip():
                        continue
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValidationError:
                        if on_bad_line is not None:
                            on_bad_line(line)
                        continue
                    try:
                        await to_client.send(SessionMessage(message))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return

    async def pump_stdin() -> None:
        assert proc.stdin is not None
        async with from_client:
            async for message in from_client:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    await proc.stdin.send_all(data.encode())
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump_stdout)
            nursery.start_soon(pump_stdin)
            try:
                yield read_stream, write_stream
            finally:
                if on_close is not None:
                    with trio.CancelScope(shield=True):
                        await on_close()
                nursery.cancel_scope.cancel()
    finally:
        for stream in (read_stream, write_stream, to_client, from_client):
            stream.close()


@asynccontextmanager
async def _sidecar_transport(
    host: Host, argv: Sequence[str], env: Mapping[str, str]
) -> AsyncIterator[TransportStreams]:
    """Spawn the sidecar and speak newline-delimited JSON-RPC to it; its stderr is relayed to ours (``host.log``)."""
    proc = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(REPO_ROOT),
        env=dict(env),
    )
    host.process = proc

    async def stop() -> None:
        await _stop_sidecar(host, proc)

    async with (
        relaying_stderr(proc, host.log),
        line_transport(proc, on_bad_line=host.bad_frames.append, on_close=stop) as streams,
    ):
        yield streams


async def _stop_sidecar(host: Host, proc: trio.Process) -> None:
    """Close the sidecar's stdin (the host hanging up) and wait for it to exit, bounded; kill on overrun."""
    assert proc.stdin is not None
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        await proc.stdin.aclose()
    closed_at = trio.current_time()
    with trio.move_on_after(SIDECAR_EXIT_BOUND_SEC):
        await proc.wait()
    if proc.returncode is None:
        with suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)
        await proc.wait()
    else:
        host.exit_after_stdin_closed_sec = trio.current_time() - closed_at
    host.exit_code = proc.returncode


async def hold_listen_stream(host: Host, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """2026-era hosts learn about changes only through an open ``subscriptions/listen`` stream."""
    started = False
    try:
        async with host.session.listen(tools_list_changed=True) as subscription:
            task_status.started()
            started = True
            async for _event in subscription:
                host.note_change()
    except (SubscriptionLost, MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # the server went away (a test or benchmark stopped it); the caller judges what matters
    finally:
        if not started:
            task_status.started()


@asynccontextmanager
async def open_host(
    config: Path,
    mode: ConnectMode = "auto",
    *,
    env: Mapping[str, str] | None = None,
    run_args: Sequence[str] = (),
    **client_options: Any,
) -> AsyncIterator[Host]:
    """Launch ``python -m supervisor run --config CONFIG [RUN_ARGS]`` and connect to it as a host.

    On exit the host closes the sidecar's stdin and waits (bounded) for it to exit;
    ``Host.exit_code`` and ``Host.exit_after_stdin_closed_sec`` record how that went.
    """
    host = Host()
    transport = _sidecar_transport(host, sidecar_argv(config, "run", *run_args), sidecar_env(env))
    client_options.setdefault("message_handler", host.on_message)
    async with Client(transport, mode=mode, **client_options) as client:
        host.client = client
        async with trio.open_nursery() as nursery:
            if host.modern:
                await nursery.start(hold_listen_stream, host)
            yield host
            nursery.cancel_scope.cancel()


async def run_cli(*args: str, env: Mapping[str, str] | None = None, bound_sec: float = WAIT_BOUND_SEC) -> CliResult:
    """Run ``python -m supervisor ARGS`` to completion, bounded, capturing its output."""
    with trio.fail_after(bound_sec):
        done = await trio.run_process(
            [sys.executable, "-m", "supervisor", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(REPO_ROOT),
            env=sidecar_env(env),
        )
    return CliResult(done.returncode, done.stdout.decode(), done.stderr.decode())


@dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str


@asynccontextmanager
async def open_http_fixture(
    *args: str, log: Path | None = None, module: str = FIXTURE_MODULE, path: str = "/mcp"
) -> AsyncIterator[HttpFixture]:
    """Start the fixture server over HTTP on a port the OS picks; killed (and reaped) on exit.

    ``module``/``path``: another fixture speaking HTTP (``tests.fixtures.sse_server`` at ``/sse``).
    """
    fixture = HttpFixture(list(args), log, module=module, path=path)
    async with trio.open_nursery() as nursery:
        fixture.nursery = nursery  # for the stderr relay of each (re)start
        try:
            await fixture.start()
            yield fixture
        finally:
            with trio.CancelScope(shield=True):
                await fixture.kill()
            nursery.cancel_scope.cancel()


@dataclass
class HttpFixture:
    """A fixture server over HTTP; ``start`` again after ``kill`` to restart it on the same port."""

    args: list[str]
    log: Path | None
    port: int = 0
    """0 until the first start has announced the port the OS picked; restarts reuse it."""
    process: trio.Process | None = None
    stderr: ProcessLog = field(default_factory=ProcessLog)
    nursery: trio.Nursery | None = None
    module: str = FIXTURE_MODULE
    """The fixture's module; it takes ``--http-port`` and announces ``<its last dotted part> ready URL``."""
    path: str = "/mcp"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    async def start(self) -> None:
        """Start the server and wait (bounded) until it announces the URL it listens on."""
        argv = [sys.executable, "-m", self.module, "--http-port", str(self.port), *self.args]
        if self.log is not None:
            argv += ["--log", str(self.log)]
        self.stderr = ProcessLog()
        self.process = await trio.lowlevel.open_process(
            argv, stderr=subprocess.PIPE, cwd=str(REPO_ROOT), env=sidecar_env()
        )
        assert self.nursery is not None and self.process.stderr is not None
        self.nursery.start_soon(self.stderr.pump, self.process.stderr)
        url = await self.stderr.wait_listening(self.module.rsplit(".", 1)[-1])
        port = urlsplit(url).port
        assert port is not None and port != 0, url
        self.port = port

    async def kill(self) -> None:
        if self.process is not None:
            with suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
            self.process = None
            with trio.move_on_after(DRAIN_BOUND_SEC):
                await self.stderr.wait_closed()


# -- the sidecar as an HTTP service -------------------------------------------------------

TOKEN_ENV: Final = "MCP_SUPERVISOR_TOKEN"


def http_supervisor_table(*, admin: bool = False, grace_sec: float | None = None, **front: Any) -> dict[str, Any]:
    """The ``[supervisor]`` table of a sidecar serving HTTP on a port the OS picks (token from the environment).

    ``grace_sec`` is ``shutdown_grace_sec`` (nominal, scaled here); with ``admin``, the
    admin endpoint is enabled too, also on port 0.
    """
    table: dict[str, Any] = {
        "shutdown_grace_sec": scaled(2 if grace_sec is None else grace_sec),
        "front": {"transport": "http", "port": 0, "token": "${MCP_SUPERVISOR_TOKEN}", **front},
    }
    if admin:
        table["admin"] = {"enabled": True, "port": 0}
    return table


@dataclass
class HttpSidecar:
    """A ``supervisor run`` process serving HTTP; ``exit_code`` is set once it has exited."""

    process: trio.Process
    url: str
    """``http://127.0.0.1:PORT/mcp``, from the sidecar's ``host.front listening on`` line."""
    token: str
    log: ProcessLog
    exit_code: int | None = None
    exit_after_sigterm_sec: float | None = None
    sigterm_at: float | None = None

    def terminate(self) -> None:
        """Send SIGTERM once (a second one during the graceful stop could hit the default handler)."""
        if self.sigterm_at is None and self.process.returncode is None:
            self.sigterm_at = trio.current_time()
            with suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)

    async def stop(self) -> int:
        """SIGTERM (unless sent already), wait (bounded) for the exit, SIGKILL on overrun; return the exit code."""
        proc = self.process
        self.terminate()
        sent_at = self.sigterm_at if self.sigterm_at is not None else trio.current_time()
        with trio.move_on_after(SIDECAR_EXIT_BOUND_SEC):
            await proc.wait()
        if proc.returncode is None:
            with suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)
            await proc.wait()
        elif self.exit_after_sigterm_sec is None:
            self.exit_after_sigterm_sec = trio.current_time() - sent_at
        assert proc.returncode is not None
        self.exit_code = proc.returncode
        return proc.returncode


@asynccontextmanager
async def open_http_sidecar(
    config: Path,
    *,
    token: str = "test-token",
    env: Mapping[str, str] | None = None,
    argv: Callable[[Path], list[str]] | None = None,
) -> AsyncIterator[HttpSidecar]:
    """Start ``supervisor run`` with an HTTP front (port 0); on exit stop it with SIGTERM (bounded).

    The front's URL is read from the sidecar's ``host.front listening on URL`` line. ``argv``: the
    command for ``config`` (default: this checkout's ``sidecar_argv``; a benchmark runs another's).
    """
    proc = await trio.lowlevel.open_process(
        (argv or sidecar_argv)(config),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=str(REPO_ROOT),
        env=sidecar_env({TOKEN_ENV: token, **(env or {})}),
    )
    log = ProcessLog()
    try:
        async with relaying_stderr(proc, log):
            sidecar = HttpSidecar(proc, await log.wait_listening("front"), token, log)
            try:
                yield sidecar
            finally:
                with trio.CancelScope(shield=True):
                    await sidecar.stop()
    finally:
        if proc.returncode is None:  # it never announced its URL
            with suppress(ProcessLookupError):
                proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()


@asynccontextmanager
async def open_http_host(
    url: str, token: str, mode: ConnectMode = "auto", *, server_may_be_gone: bool = False, **client_options: Any
) -> AsyncIterator[Host]:
    """Connect a host to an HTTP front with ``Authorization: Bearer <token>``; 2026-era hosts hold a listen stream.

    With ``server_may_be_gone``, the connection errors the SDK client raises when the
    server closes the session (it then cancels the body) end the host quietly: the
    test stopped the sidecar and asserts what it recorded itself.
    """
    host = Host()
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with create_mcp_http_client(headers=headers) as http_client:
            transport = streamable_http_client(url, http_client=http_client)
            client_options.setdefault("message_handler", host.on_message)
            async with Client(transport, mode=mode, **client_options) as client:
                host.client = client
                async with trio.open_nursery() as nursery:
                    if host.modern:
                        await nursery.start(hold_listen_stream, host)
                    yield host
                    nursery.cancel_scope.cancel()
    except* (httpx2.TransportError, MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError) as group:
        if not server_may_be_gone:
            raise group.with_traceback(group.__traceback__) from None
