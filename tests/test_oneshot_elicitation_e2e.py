"""``mcp-supervisor call`` in a real terminal answers an upstream's elicitation (issue 30, item 5).

``python -m supervisor call`` runs with its stdin on a pseudo-terminal (Python's
``pty``), so it sees a TTY as a person's shell would give it; stdout and stderr
are pipes, read here. The upstream is the fixture server with ``--fidelity``,
whose ``elicit`` tool asks for a form (a name) and ``elicit_url`` for a URL
visit, in either protocol era. ``--no-input``, and a stdin that is no terminal,
give the refusal a script gets.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest
import trio

from tests.sidecar import REPO_ROOT, fixture_server, scaled, sidecar_env, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC: Final = scaled(30)


class Captured:
    """One pipe's bytes as they arrive, and a wait for some text to appear in them."""

    def __init__(self) -> None:
        self.data = bytearray()
        self._changed = trio.Event()
        self.closed = False

    async def pump(self, stream: trio.abc.ReceiveStream) -> None:
        async for chunk in stream:
            self.data += chunk
            self._wake()
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, text: str) -> None:
        """Return once ``text`` was written (a prompt ends without a newline); fail if the pipe closes first."""
        while text.encode() not in self.data:
            assert not self.closed, f"the process ended without writing {text!r}: {self.text}"
            await self._changed.wait()

    @property
    def text(self) -> str:
        return self.data.decode(errors="replace")


async def _call_in_a_terminal(
    config: Path, tool: str, *extra: str, answers: list[tuple[str, bytes]]
) -> tuple[int, str, str]:
    """Run ``call TOOL`` with a pty as stdin; for each (prompt, keys), wait for the prompt, then type the keys."""
    controller, terminal = pty.openpty()
    argv = [sys.executable, "-m", "supervisor", "call", tool, "{}", "--config", str(config), *extra]
    try:
        process = await trio.lowlevel.open_process(
            argv, stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO_ROOT), env=sidecar_env()
        )
    finally:
        os.close(terminal)  # the child holds its own copy
    stdout, stderr = Captured(), Captured()
    try:
        async with trio.open_nursery() as nursery:
            assert process.stdout is not None and process.stderr is not None
            nursery.start_soon(stdout.pump, process.stdout)
            nursery.start_soon(stderr.pump, process.stderr)
            for prompt, keys in answers:
                await stderr.wait_for(prompt)
                os.write(controller, keys)  # what the person types (the terminal echoes it to the controller)
            await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()
        os.close(controller)
    os.write(2, stderr.data)  # pytest shows the CLI's stderr on failure
    assert process.returncode is not None
    return process.returncode, stdout.text, stderr.text


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_call_in_a_terminal_asks_the_person_for_an_elicited_form_and_passes_the_answer_on(
    tmp_path: Path, protocol: str
) -> None:
    config = write_settings(tmp_path, {"fx": fixture_server("--fidelity", protocol=protocol)})
    with trio.fail_after(BOUND_SEC):
        code, stdout, stderr = await _call_in_a_terminal(config, "mcp__fx__elicit", answers=[("  name: ", b"Ada\n")])
    assert code == 0, stderr
    assert "fx asks: Who are you?" in stderr
    assert 'elicited: accept {\\"name\\": \\"Ada\\"}' in stdout
    assert "Traceback" not in stderr


async def test_call_in_a_terminal_shows_an_elicited_url_waits_for_enter_and_accepts(tmp_path: Path) -> None:
    config = write_settings(tmp_path, {"fx": fixture_server("--fidelity", protocol="legacy")})
    with trio.fail_after(BOUND_SEC):
        code, stdout, stderr = await _call_in_a_terminal(
            config, "mcp__fx__elicit_url", answers=[("(Ctrl-D cancels): ", b"\n")]
        )
    assert code == 0, stderr
    assert "fx asks you to open a URL: Please log in\n  https://example.invalid/login\n" in stderr
    assert "elicited: accept null" in stdout


async def test_ctrl_d_in_the_terminal_cancels_the_elicitation(tmp_path: Path) -> None:
    config = write_settings(tmp_path, {"fx": fixture_server("--fidelity", protocol="legacy")})
    with trio.fail_after(BOUND_SEC):
        code, stdout, stderr = await _call_in_a_terminal(config, "mcp__fx__elicit", answers=[("  name: ", b"\x04")])
    assert code == 0, stderr
    assert "elicited: cancel null" in stdout and "(cancelled)" in stderr


async def test_no_input_or_a_stdin_that_is_no_terminal_refuses_the_elicitation_as_for_a_script(tmp_path: Path) -> None:
    config = write_settings(tmp_path, {"fx": fixture_server("--fidelity", protocol="legacy")})
    with trio.fail_after(BOUND_SEC):
        code, stdout, stderr = await _call_in_a_terminal(config, "mcp__fx__elicit", "--no-input", answers=[])
        piped = await trio.run_process(  # stdin a pipe, as for a script
            [sys.executable, "-m", "supervisor", "call", "mcp__fx__elicit", "{}", "--config", str(config)],
            stdin=b"Ada\n",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(REPO_ROOT),
            env=sidecar_env(),
        )
    runs = [(code, stdout, stderr), (piped.returncode, piped.stdout.decode(), piped.stderr.decode())]
    for result_code, result_stdout, result_stderr in runs:
        assert result_code == 1  # the tool's error result
        assert "refused -32600: mcp-supervisor has no host to forward elicitation/create to" in result_stdout
        assert "asks:" not in result_stderr
