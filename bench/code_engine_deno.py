"""Deno as a code-mode engine, for ``bench.code_engines``: a comparison prototype.

One ``deno run`` process (no ``--allow-*`` flag at all) runs
``code_engine_deno_host.js``, which runs each program in a fresh module Worker
with ``deno: {permissions: "none"}`` and relays its tool calls to us as JSON
lines on its stdout; we answer on its stdin. The program is JavaScript: the
body of an async function with ``tools`` in scope
(``return await tools.demo.echo({text: "hi"})``), so there is no last-expression
value and no type check (``deno check`` would be a separate process per program).

Concurrency: :meth:`DenoEngine.run` is used inside ``open_deno()``, whose nursery
owns the reader task and the deno process; each run owns a nursery for its
calls, cancelled when the run ends. A cancelled run tells deno to terminate its
Worker (best effort, not awaited).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import trio
from deno import find_deno_bin  # type: ignore[import-untyped]

from bench.code_engine_monty import RunResult, ToolCall, ToolFailed

HOST_JS: Final = Path(__file__).with_name("code_engine_deno_host.js")


class DenoProgramError(Exception):
    """The program failed (threw, timed out, or its Worker died): the error text deno gave."""


@dataclass(slots=True)
class _Run:
    call: ToolCall
    nursery: trio.Nursery
    done: trio.Event = field(default_factory=trio.Event)
    answer: dict[str, Any] = field(default_factory=dict)
    calls: int = 0


class DenoEngine:
    """The deno process and its protocol; build with :func:`open_deno`."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._runs: dict[int, _Run] = {}
        self._next = 0
        self._send_lock = trio.Lock()
        self.ready = trio.Event()
        self.hello: dict[str, Any] = {}

    async def _send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        async with self._send_lock:
            await self._stdin.send_all(data)

    async def serve(self) -> None:
        """Read deno's lines until it exits (a bytearray and a saved search offset: linear framing)."""
        buffer = bytearray()
        start = 0
        while True:
            chunk = await self._stdout.receive_some(65536)
            if not chunk:
                for run in self._runs.values():
                    run.answer = {"ok": False, "error": "deno exited"}
                    run.done.set()
                return
            buffer += chunk
            while (newline := buffer.find(b"\n", start)) >= 0:
                self._handle(json.loads(buffer[:newline]))
                del buffer[: newline + 1]
                start = 0
            start = len(buffer)

    def _handle(self, message: dict[str, Any]) -> None:
        op = message["op"]
        if op == "ready":
            self.hello = message
            self.ready.set()
            return
        run = self._runs.get(message["run"])
        if run is None:
            return
        if op == "call":
            run.calls += 1
            run.nursery.start_soon(self._answer, message["run"], run, message)
        elif op == "done":
            run.answer = message
            run.done.set()

    async def _answer(self, run_id: int, run: _Run, message: dict[str, Any]) -> None:
        try:
            value = await run.call(message["server"], message["tool"], message["args"])
            reply = {"op": "result", "run": run_id, "call": message["call"], "ok": True, "value": value}
        except ToolFailed as exc:
            reply = {"op": "result", "run": run_id, "call": message["call"], "ok": False, "error": str(exc)}
        await self._send(reply)

    async def run(self, code: str, call: ToolCall, *, timeout_ms: int = 30_000) -> RunResult:
        """Run one program; raise :class:`DenoProgramError` if it fails."""
        self._next += 1
        run_id = self._next
        async with trio.open_nursery() as nursery:
            run = _Run(call, nursery)
            self._runs[run_id] = run
            try:
                await self._send({"op": "run", "run": run_id, "code": code, "timeout_ms": timeout_ms})
                await run.done.wait()
            except trio.Cancelled:
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    await self._send({"op": "cancel", "run": run_id})
                raise
            finally:
                self._runs.pop(run_id, None)
                nursery.cancel_scope.cancel()
        answer = run.answer
        if not answer.get("ok"):
            raise DenoProgramError(answer.get("error", "?"))
        return RunResult(answer.get("value"), answer.get("output", ""), run.calls)


@asynccontextmanager
async def open_deno(*, v8_flags: str | None = None) -> AsyncIterator[DenoEngine]:
    """Start deno with no permissions, wait for its ready line, yield the engine; kill deno on exit."""
    command = [find_deno_bin(), "run", "--quiet", "--no-prompt", "--no-config", "--unstable-worker-options"]
    if v8_flags:
        command.append(f"--v8-flags={v8_flags}")
    command.append(str(HOST_JS))
    process = await trio.lowlevel.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    engine = DenoEngine(process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(engine.serve)
            await engine.ready.wait()
            try:
                yield engine
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(2):
            process.kill()
            await process.wait()
